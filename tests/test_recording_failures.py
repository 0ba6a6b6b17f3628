"""What a recording keeps when writing fails or the user stops it: a full disk (injected, and a real
small tmpfs where mounting is permitted), a read-only output, Ctrl-C, a directory holding another
dataset; and that provenance verifies after each."""

import contextlib
import errno
import gc
import io
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import dm_env
from dm_env import specs
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite import cli
from rlds_suite import envs
from rlds_suite.core import errors
from rlds_suite.recording import RecordingInterrupted
from rlds_suite.recording import random_policy
from rlds_suite.recording import recovery
from rlds_suite.recording import shards
from rlds_suite.tfds import provenance
from tests.recording_helpers import Tape, assert_matches_tape, read_episodes

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cli(*argv):
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = cli.main(list(argv))
  return code, out.getvalue(), err.getvalue()


def _cartpole():
  return Tape(envs.make('gymnasium:CartPole-v1', seed=0))


def _record(env, directory, episodes, **kwargs):
  return rlds_suite.record(env, random_policy(env.action_spec(), 0), episodes=episodes,
                           data_dir=directory, name='cartpole', progress=False,
                           handle_signals=False, **kwargs)


def _shard_lengths(directory):
  return list(tfds.builder_from_directory(os.fspath(directory)).info.splits['train'].shard_lengths)


def _hidden(directory):
  return [name for name in os.listdir(directory) if name.startswith('.')]


def _frame(data: bytes) -> bytes:
  """`data` as one TFRecord frame, written by TensorFlow's own writer."""
  with tempfile.TemporaryDirectory() as scratch:
    path = os.path.join(scratch, 'one.tfrecord')
    with _REAL_WRITER(path) as writer:
      writer.write(data)
    with open(path, 'rb') as f:
      return f.read()


_REAL_WRITER = tf.io.TFRecordWriter


def _disk_fills_after(monkeypatch, capacity: int) -> None:
  """TensorFlow's TFRecordWriter writes the first `capacity` records of the test (over all shards);
  the next one reaches the file half written and raises ResourceExhaustedError, as TensorFlow's
  writer does when the disk fills mid-record."""
  written = [0]

  class DiskFillsAfter:

    def __init__(self, path):
      self._path = path
      self._real = _REAL_WRITER(path)

    def write(self, data):
      if written[0] == capacity:
        self._real.flush()
        with open(self._path, 'ab') as f:
          frame = _frame(data)
          f.write(frame[:len(frame) // 2])
        raise tf.errors.ResourceExhaustedError(None, None, f'{self._path}; No space left on device')
      written[0] += 1
      self._real.write(data)

    def flush(self):
      self._real.flush()

    def close(self):
      self._real.close()

  monkeypatch.setattr(tf.io, 'TFRecordWriter', DiskFillsAfter)


def test_disk_full_stops_with_one_line_and_keeps_every_complete_episode(tmp_path, monkeypatch):
  directory = tmp_path / 'ds'
  env = _cartpole()
  _disk_fills_after(monkeypatch, capacity=7)
  with pytest.raises(errors.OutputWriteError) as raised:
    _record(env, directory, 20, flush_seconds=0, max_episodes_per_shard=3)
  message = str(raised.value)
  assert message == (f'disk full while writing {directory}/.cartpole-train.tfrecord-00002'
                     f'{shards.IN_PROGRESS_SUFFIX}: 7 episodes kept')
  assert _shard_lengths(directory) == [3, 3, 1]  # The torn shard's complete episode, salvaged.
  assert not _hidden(directory)  # Nothing unfinished, no lock left.
  episodes = read_episodes(directory)
  assert len(episodes) == 7
  for episode, taped in zip(episodes, env.episodes):
    assert_matches_tape(episode, taped)
  assert rlds_suite.validate(directory).ok
  assert provenance.verify(directory).ok
  [run] = provenance.read(directory)['runs']
  assert run['recording']['status'].startswith('stopped: disk full while writing')
  assert run['recording']['episodes_written'] == 7


def test_disk_full_through_the_command_line_is_one_line(tmp_path, monkeypatch):
  _disk_fills_after(monkeypatch, capacity=2)
  directory = tmp_path / 'ds'
  code, _, err = _cli('record', '--env', 'gymnasium:CartPole-v1', '--episodes', '6', '--seed', '0',
                      '--out', os.fspath(directory), '--flush_seconds', '0', '--no_progress')
  assert code == 2
  assert err == (f'error: OutputWriteError: disk full while writing {directory}/'
                 f'.gymnasium_cartpole_v1-train.tfrecord-00000{shards.IN_PROGRESS_SUFFIX}: '
                 f'2 episodes kept\n')
  assert len(read_episodes(directory)) == 2


@pytest.mark.parametrize('code, reason', [(errno.ENOSPC, 'disk full'),
                                          (errno.EDQUOT, 'disk quota exceeded'),
                                          (errno.EIO, os.strerror(errno.EIO))])
def test_metadata_that_cannot_be_written_leaves_the_episodes_for_recover(tmp_path, monkeypatch,
                                                                         code, reason):
  directory = tmp_path / 'ds'
  env = _cartpole()
  original, calls = shards.write_metadata, []

  def full_after_the_first(*args, **kwargs):  # The new dataset's metadata fits; nothing after.
    calls.append(args)
    if len(calls) > 1:
      raise OSError(code, os.strerror(code))
    return original(*args, **kwargs)

  monkeypatch.setattr(shards, 'write_metadata', full_after_the_first)
  with pytest.raises(errors.OutputWriteError,
                     match=rf'^{reason} while writing .*dataset_info.json: 2 episodes kept; the '
                     r'complete episodes of its last shard are on disk too: free space, then run '
                     r'rlds-suite recover'):
    _record(env, directory, 6, flush_seconds=0, max_episodes_per_shard=2)
  monkeypatch.undo()  # Space freed.
  report = recovery.recover(directory)
  assert report.unlisted_shards == [os.fspath(directory / 'cartpole-train.tfrecord-00000')]
  episodes = read_episodes(directory)
  assert len(episodes) == 2
  for episode, taped in zip(episodes, env.episodes):
    assert_matches_tape(episode, taped)
  assert provenance.verify(directory).ok


def test_recover_trims_a_torn_tail_of_a_completed_shard(tmp_path):
  """What writers before the fix left on a full disk: the shard renamed into place with the torn
  record it was writing, and no metadata naming it."""
  env = _cartpole()
  live = tmp_path / 'live'
  writer = rlds_suite.RLDSWriter(live, name='cartpole', env=env, flush_seconds=0)
  _run_episodes(writer, env, 3)
  shutil.copytree(live, tmp_path / 'ds')  # What a kill leaves: three episodes flushed.
  writer.close()
  directory = tmp_path / 'ds'
  os.remove(directory / recovery.LOCK_FILENAME)
  shard = directory / 'cartpole-train.tfrecord-00000'
  os.replace(directory / f'.cartpole-train.tfrecord-00000{shards.IN_PROGRESS_SUFFIX}', shard)
  torn = _frame(b'x' * 3000)[:1000]
  with open(shard, 'ab') as f:
    f.write(torn)
  code, out, err = _cli('recover', os.fspath(directory))
  assert code == 0, err
  assert '"torn_bytes": 1000' in out
  assert _shard_lengths(directory) == [3]
  for episode, taped in zip(read_episodes(directory), env.episodes):
    assert_matches_tape(episode, taped)


def _run_episodes(writer, env, episodes):
  import envlogger  # pylint: disable=g-import-not-at-top
  policy = random_policy(env.action_spec(), 0)
  logged = envlogger.EnvLogger(env, backend=writer)
  for _ in range(episodes):
    timestep = logged.reset()
    while not timestep.last():
      timestep = logged.step(policy(timestep))
  logged.reset()  # The last episode ends (and is written) at the next reset.


class _Noise(dm_env.Environment):
  """Episodes of 10 steps whose observations are 64 KiB of random floats: fills a disk fast."""

  def __init__(self):
    self._rng = np.random.default_rng(0)
    self._t = 0

  def _observation(self):
    return self._rng.standard_normal(16384).astype(np.float32)

  def reset(self):
    self._t = 0
    return dm_env.restart(self._observation())

  def step(self, action):
    self._t += 1
    if self._t == 10:
      return dm_env.termination(1.0, self._observation())
    return dm_env.transition(1.0, self._observation())

  def observation_spec(self):
    return specs.Array((16384,), np.float32)

  def action_spec(self):
    return specs.DiscreteArray(2)


@contextlib.contextmanager
def _tmpfs(directory, options):
  """A tmpfs mounted at `directory` (root only); skips the test where mounting is not permitted."""
  os.makedirs(directory, exist_ok=True)
  result = subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', os.fspath(directory)],
                          capture_output=True, text=True, check=False)
  if result.returncode:
    pytest.skip(f'cannot mount a tmpfs here ({result.stderr.strip() or "not root"}): the '
                f'injected-failure tests cover this path')
  try:
    yield directory
  finally:
    subprocess.run(['umount', os.fspath(directory)], check=False)


def test_disk_full_on_a_real_small_file_system(tmp_path):
  mount = tmp_path / 'small'
  with _tmpfs(mount, 'size=4m'):
    directory = mount / 'ds'
    with pytest.raises(errors.OutputWriteError) as raised:
      rlds_suite.record(_Noise(), lambda timestep: 0, episodes=100, data_dir=directory,
                        name='noise', flush_seconds=0, progress=False, handle_signals=False)
    message = str(raised.value)
    found = re.fullmatch(r'disk full while writing \S+: (\d+) episodes kept(; .*)?', message)
    assert found and '\n' not in message, message
    kept = int(found[1])
    assert kept >= 1
    if found[2]:  # The metadata did not fit: `recover` lists the last shard once space is freed.
      assert 'free space, then run rlds-suite recover' in found[2]
      subprocess.run(['mount', '-o', 'remount,size=16m', os.fspath(mount)], check=True)
      recovery.recover(directory)
    assert not _hidden(directory)
    episodes = read_episodes(directory)
    assert len(episodes) >= kept
    for episode in episodes:  # Every one whole.
      assert len(episode['steps']['reward']) == 11 and episode['steps']['is_terminal'][-1]
    assert rlds_suite.validate(directory).ok
    assert provenance.verify(directory).ok


def test_read_only_output_is_one_line(tmp_path):
  with _tmpfs(tmp_path / 'ro', 'ro,size=1m') as read_only:
    code, _, err = _cli('record', '--env', 'gymnasium:CartPole-v1', '--episodes', '2',
                        '--out', os.fspath(read_only / 'ds'), '--no_progress')
    assert code == 2
    assert err == (f'error: OutputWriteError: read-only file system while writing '
                   f'{read_only}/ds/{recovery.LOCK_FILENAME}\n')
    code, _, err = _cli('export', os.fspath(_dataset(tmp_path)), os.fspath(read_only / 'x.npz'),
                        '--to', 'npz')
    assert code == 2
    assert err == f'error: OutputWriteError: read-only file system while writing {read_only}/x.npz\n'


def _dataset(tmp_path):
  directory = tmp_path / 'cartpole'
  if not directory.exists():
    _record(_cartpole(), directory, 3)
  return directory


def test_export_interrupted_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  source = _dataset(tmp_path)
  original = datasets.numpy_episodes

  def interrupted_after_one(episodes):
    iterator = original(episodes)
    yield next(iterator)
    raise KeyboardInterrupt

  monkeypatch.setattr(datasets, 'numpy_episodes', interrupted_after_one)
  out = tmp_path / 'out'
  for to, name in (('npz', 'x.npz'), ('d4rl', 'x.hdf5')):
    code, _, err = _cli('export', os.fspath(source), os.fspath(out / name), '--to', to)
    assert (code, err) == (130, f'interrupted: nothing written to {out / name}\n')
    assert not os.listdir(out)


def test_ctrl_c_in_process_closes_the_writer_and_says_what_was_kept(tmp_path):
  env = _cartpole()
  policy = random_policy(env.action_spec(), 0)

  def interrupted_in_episode_three(timestep):
    if len(env.episodes) == 3 and len(env.episodes[-1]) == 5:
      raise KeyboardInterrupt
    return policy(timestep)

  directory = tmp_path / 'ds'
  with pytest.raises(RecordingInterrupted) as raised:
    rlds_suite.record(env, interrupted_in_episode_three, episodes=10, data_dir=directory,
                      name='cartpole', progress=False)
  assert isinstance(raised.value, KeyboardInterrupt)
  assert raised.value.writer.num_episodes_written == 3
  assert str(raised.value) == f'3 episodes kept in {directory}'
  episodes = read_episodes(directory)
  assert len(episodes) == 3
  for episode, taped in zip(episodes[:2], env.episodes):
    assert_matches_tape(episode, taped)
  in_flight = episodes[2]['steps']
  assert len(in_flight['reward']) == 5 and not in_flight['is_terminal'][-1]  # Truncated.
  [run] = provenance.read(directory)['runs']
  assert run['recording']['status'] == 'interrupted'
  assert provenance.verify(directory).ok


def test_ctrl_c_of_the_command_exits_130_and_says_what_was_kept(tmp_path):
  directory = tmp_path / 'ds'
  process = subprocess.Popen(
      [sys.executable, '-m', 'rlds_suite', 'record', '--env', 'gymnasium:CartPole-v1',
       '--episodes', '1000000', '--seed', '0', '--out', os.fspath(directory),
       '--flush_seconds', '0', '--no_progress'],
      env={**os.environ, 'PYTHONPATH': _REPO, 'TF_CPP_MIN_LOG_LEVEL': '3'}, cwd=_REPO,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  unfinished = directory / f'.gymnasium_cartpole_v1-train.tfrecord-00000{shards.IN_PROGRESS_SUFFIX}'
  deadline = time.time() + 180
  while not (unfinished.exists() and unfinished.stat().st_size > 0):
    assert process.poll() is None and time.time() < deadline, process.stderr.read()[-2000:]
    time.sleep(0.05)
  process.send_signal(signal.SIGINT)
  _, err = process.communicate(timeout=120)
  assert process.returncode == 130, err[-2000:]
  assert 'Traceback' not in err
  kept = len(read_episodes(directory))
  assert kept >= 1
  assert err.splitlines()[-1] == f'interrupted: {kept} episodes kept in {directory}'
  assert provenance.verify(directory).ok
  assert not _hidden(directory)


def test_a_directory_holding_another_dataset_is_refused_before_the_first_step(tmp_path):
  directory = _dataset(tmp_path)
  before = _shard_lengths(directory)
  other = Tape(envs.make('gymnasium:MountainCar-v0', seed=0))
  with pytest.raises(errors.SpecMismatchError, match="holds dataset 'cartpole' whose steps "
                     'differ: observation'):
    _record(other, directory, 2)  # Same name, other observations.
  assert other.episodes == []  # Not even reset.
  code, _, err = _cli('record', '--env', 'gymnasium:MountainCar-v0', '--episodes', '2',
                      '--out', os.fspath(directory), '--no_progress')
  assert code == 2 and err.count('\n') == 1
  assert "holds dataset 'cartpole': cannot record 'gymnasium_mountaincar_v0' into it" in err
  assert _shard_lengths(directory) == before
  assert provenance.verify(directory).ok


def test_zero_episodes_is_refused_and_creates_nothing(tmp_path, capsys):
  with pytest.raises(SystemExit) as raised:
    cli.main(['record', '--env', 'gymnasium:CartPole-v1', '--episodes', '0', '--out',
              os.fspath(tmp_path / 'ds')])
  assert raised.value.code == 2
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and '--episodes: 0: nothing to record' in err
  assert not (tmp_path / 'ds').exists()
  with pytest.raises(errors.UsageError, match='nothing to record'):
    rlds_suite.record('gymnasium:CartPole-v1', episodes=0, data_dir=tmp_path / 'ds')
  assert not (tmp_path / 'ds').exists()


def test_a_writer_whose_constructor_raised_is_not_closed_by_del(tmp_path, monkeypatch):
  """Was 'Exception ignored in: <function BackendWriter.__del__>' (at exit, when the error's
  traceback kept the half-built writer alive): close() failed on attributes never set."""
  import envlogger  # pylint: disable=g-import-not-at-top
  unraisable = []
  monkeypatch.setattr(sys, 'unraisablehook', unraisable.append)
  env = envs.make('gymnasium:CartPole-v1', seed=0)
  for make in (lambda: envlogger.EnvLogger(env, data_directory=os.fspath(tmp_path),
                                           max_episodes_per_shard=10),  # RLDSWriter's keyword.
               lambda: rlds_suite.RLDSWriter(tmp_path / 'ds', env=env, max_episodes_per_file=10)):
    try:
      make()
    except TypeError as e:
      assert 'unexpected keyword argument' in str(e)
    else:
      raise AssertionError('the constructor accepted an unknown keyword')
  gc.collect()
  assert not unraisable, [u.exc_value for u in unraisable]
