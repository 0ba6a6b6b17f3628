"""A killed recording loses seconds: episodes reach the open shard file as they end, and what a
killed writer left is recovered record by record (rlds_suite.recording.recovery)."""

import contextlib
import io
import json
import os
import shutil
import signal
import struct
import tempfile
import time

import envlogger
import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite import cli
from rlds_suite import envs
from rlds_suite import streams
from rlds_suite.core import errors
from rlds_suite.recording import random_policy
from rlds_suite.recording import recovery
from rlds_suite.recording import shards
from rlds_suite.tfds import provenance
from tests.recording_helpers import read_episodes
from tests.recording_child import Counter
from tests.recording_helpers import start_recording_child as _start

UNFINISHED = '.counter-train.tfrecord-00000' + shards.IN_PROGRESS_SUFFIX  # The child's.
CARTPOLE_UNFINISHED = '.cartpole-train.tfrecord-00000' + shards.IN_PROGRESS_SUFFIX


def _started(directory) -> int:
  with open(str(directory) + '.progress') as f:
    return f.read().count('episode')


def _run(writer, env, episodes, seed=0):
  policy = random_policy(env.action_spec(), seed)
  logged = envlogger.EnvLogger(env, backend=writer)
  for _ in range(episodes):
    timestep = logged.reset()
    while not timestep.last():
      timestep = logged.step(policy(timestep))
  return logged


def _cli(*argv):
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = cli.main(list(argv))
  return code, out.getvalue(), err.getvalue()


def _assert_counter_episodes(episodes):
  for episode in episodes:  # Each whole, as the environment returned it.
    steps = episode['steps']
    np.testing.assert_array_equal(steps['observation'], np.arange(51, dtype=np.float32))
    assert steps['is_terminal'].tolist() == [False] * 50 + [True]
    assert steps['reward'].tolist() == [1.0] * 50 + [0.0]


@pytest.fixture(scope='module')
def killed_recording(tmp_path_factory):
  """A slow-episode recording (50 steps of 30 ms) killed with SIGKILL after its second episode
  ended and flush_seconds (0.5) passed; returns (directory, episodes started before the kill)."""
  directory = tmp_path_factory.mktemp('killed') / 'ds'
  process = _start(directory, 1000, '0.5', '0.03')
  deadline = time.time() + 180
  while not (os.path.exists(str(directory) + '.progress') and _started(directory) >= 3):
    assert process.poll() is None and time.time() < deadline, process.stderr.read().decode()[-2000:]
    time.sleep(0.05)
  time.sleep(0.7)
  with pytest.raises(errors.UnfinishedRecordingError, match='writing into this directory'):
    recovery.recover(directory)  # The child holds the directory's lock: nothing is touched.
  process.send_signal(signal.SIGKILL)
  process.wait()
  return directory, _started(directory)


def test_sigkill_loses_only_the_episode_in_flight(killed_recording, tmp_path):
  source, started = killed_recording
  directory = tmp_path / 'ds'
  shutil.copytree(source, directory)
  # No shard completed (1000 episodes per shard): readers say what to do, in one line.
  with pytest.raises(errors.UnfinishedRecordingError, match='run rlds-suite recover'):
    rlds_suite.validate(directory)
  with pytest.raises(errors.UnfinishedRecordingError, match='recording in progress or interrupted'):
    streams.stream([os.fspath(directory)])
  code, _, err = _cli('validate', os.fspath(directory))
  assert code == 2 and err.count('\n') == 1 and 'rlds-suite recover' in err

  code, out, _ = _cli('recover', os.fspath(directory))
  assert code == 0
  summary = json.loads(out)
  recovered = summary['recovered_episodes']
  assert started - 1 <= recovered <= started and recovered >= 2  # All ended episodes.
  [salvaged] = summary['salvaged']
  assert salvaged['records'] == recovered and salvaged['torn_bytes'] == 0
  builder = tfds.builder_from_directory(os.fspath(directory))
  assert builder.info.splits['train'].shard_lengths == [recovered]
  episodes = read_episodes(directory)
  assert len(episodes) == recovered
  _assert_counter_episodes(episodes)
  assert rlds_suite.validate(directory).ok
  assert not [f for f in os.listdir(directory) if f.startswith('.')]  # Nothing unfinished left.
  code, out, _ = _cli('recover', os.fspath(directory))  # Idempotent.
  assert code == 0 and json.loads(out)['recovered_episodes'] == 0
  # Provenance was written as the recording started and updated by recover: it verifies.
  code, out, _ = _cli('verify', os.fspath(directory))
  assert code == 0 and json.loads(out)['ok'], out
  killed_run, recovery_run = provenance.read(directory)['runs']
  assert killed_run['recording']['status'] == 'recording'  # Killed: it never said otherwise.
  assert recovery_run['recovery']['recovered_episodes'] == recovered


def test_next_recording_recovers_and_appends(killed_recording, tmp_path):
  source, _ = killed_recording
  directory = tmp_path / 'ds'
  shutil.copytree(source, directory)
  unfinished = directory / UNFINISHED
  with open(unfinished, 'ab') as f:  # As if killed while writing the next record.
    f.write(struct.pack('<Q', 5000) + b'\x01\x02\x03')
  writer = rlds_suite.record(Counter(0), lambda timestep: 0, episodes=2, data_dir=directory,
                             name='counter', progress=False, handle_signals=False)
  report = writer.recovery_report
  [salvaged] = report.salvaged
  assert salvaged.torn_bytes == 11 and salvaged.records >= 2
  assert 'torn last record dropped' in str(report)
  builder = tfds.builder_from_directory(os.fspath(directory))
  assert builder.info.splits['train'].shard_lengths == [salvaged.records, 2]
  episodes = read_episodes(directory)
  assert len(episodes) == salvaged.records + 2
  _assert_counter_episodes(episodes)
  assert rlds_suite.validate(directory).ok


@pytest.fixture(scope='module')
def unfinished_dataset(tmp_path_factory):
  """A copy of a CartPole recording's directory taken while the writer was open after four
  episodes were flushed (what a SIGKILL leaves), and the four episodes as written."""
  root = tmp_path_factory.mktemp('unfinished')
  env = envs.make('gymnasium:CartPole-v1', seed=0)
  writer = rlds_suite.RLDSWriter(root / 'live', name='cartpole', env=env, flush_seconds=0)
  logged = _run(writer, env, episodes=4)
  logged.reset()  # The fourth episode ends (and is written) at the next reset.
  shutil.copytree(root / 'live', root / 'killed')
  writer.close()
  os.remove(root / 'killed' / recovery.LOCK_FILENAME)  # Its holder is gone.
  written = read_episodes(root / 'live')[:4]
  return root / 'killed', written


def _record_ends(path):
  """Byte offsets where each record of a complete TFRecord file ends."""
  data, ends, offset = open(path, 'rb').read(), [], 0
  while offset < len(data):
    (length,) = struct.unpack_from('<Q', data, offset)
    offset += 12 + length + 4
    ends.append(offset)
  assert offset == len(data)
  return ends


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(fraction=st.floats(0, 1))
@hypothesis.example(fraction=0.0)
@hypothesis.example(fraction=1.0)
def test_crash_at_any_byte_keeps_every_complete_record(unfinished_dataset, fraction):
  source, written = unfinished_dataset
  ends = _record_ends(source / CARTPOLE_UNFINISHED)
  assert len(ends) == 4
  cut = round(fraction * ends[-1])
  kept = sum(end <= cut for end in ends)
  with tempfile.TemporaryDirectory() as root:
    directory = os.path.join(root, 'ds')
    shutil.copytree(source, directory)
    os.truncate(os.path.join(directory, CARTPOLE_UNFINISHED), cut)
    report = recovery.recover(directory)
    [salvaged] = report.salvaged
    assert salvaged.records == kept
    assert salvaged.torn_bytes == cut - (ends[kept - 1] if kept else 0)
    assert not os.path.exists(os.path.join(directory, CARTPOLE_UNFINISHED))
    if not kept:
      with pytest.raises(errors.UnfinishedRecordingError):
        rlds_suite.validate(directory)
      return
    episodes = read_episodes(directory)
    assert len(episodes) == kept
    for got, want in zip(episodes, written):
      for key in ('observation', 'action', 'reward', 'is_terminal', 'is_last'):
        np.testing.assert_array_equal(got['steps'][key], want['steps'][key])
    assert rlds_suite.validate(directory).ok


def test_zero_filled_tail_is_torn_and_a_bad_middle_record_is_refused(unfinished_dataset, tmp_path):
  source, _ = unfinished_dataset
  zeros = tmp_path / 'zeros'
  shutil.copytree(source, zeros)
  with open(zeros / CARTPOLE_UNFINISHED, 'ab') as f:  # The file was extended, its data not written.
    f.write(bytes(4096))
  [salvaged] = recovery.recover(zeros).salvaged
  assert salvaged.records == 4 and salvaged.torn_bytes == 4096

  corrupt = tmp_path / 'corrupt'
  shutil.copytree(source, corrupt)
  path = corrupt / CARTPOLE_UNFINISHED
  ends = _record_ends(path)
  data = bytearray(open(path, 'rb').read())
  data[ends[0] + 40] ^= 0xFF  # Inside the second record's data: its checksum fails.
  open(path, 'wb').write(bytes(data))
  with pytest.raises(errors.CorruptFileError, match=f'record 1 at byte {ends[0]}.*not a torn'):
    recovery.recover(corrupt)
  assert open(path, 'rb').read() == bytes(data)  # Left as it was.


def test_ended_episodes_reach_the_file_within_flush_seconds(tmp_path):
  env = envs.make('gymnasium:CartPole-v1', seed=0)
  writer = rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env, flush_seconds=0.3)
  logged = _run(writer, env, episodes=3)
  timestep = logged.reset()  # Episode 3 ended: pending until 0.3 s after the first one ended.
  time.sleep(0.35)
  logged.step(random_policy(env.action_spec(), 0)(timestep))  # Any call past the deadline writes.
  unfinished = tmp_path / CARTPOLE_UNFINISHED
  assert recovery.scan_records(os.fspath(unfinished)).records == 3
  writer.close()
  assert len(read_episodes(tmp_path)) == 4  # And the one in flight, truncated, at close.


def test_one_writer_per_directory(tmp_path):
  env = envs.make('gymnasium:CartPole-v1', seed=0)
  writer = rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env)
  with pytest.raises(errors.UnfinishedRecordingError, match='this process'):
    rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env)
  with pytest.raises(errors.UnfinishedRecordingError):
    recovery.recover(tmp_path)
  _run(writer, env, episodes=2)
  writer.close()
  assert not os.path.exists(tmp_path / recovery.LOCK_FILENAME)
  assert not recovery.recover(tmp_path).changed
  _run(rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env), env, episodes=1).close()
  assert len(read_episodes(tmp_path)) == 3


def test_a_shard_renamed_before_its_metadata_is_listed(unfinished_dataset, tmp_path):
  source, written = unfinished_dataset
  directory = tmp_path / 'ds'
  shutil.copytree(source, directory)  # Killed between the shard's rename and the metadata.
  os.replace(directory / CARTPOLE_UNFINISHED, directory / 'cartpole-train.tfrecord-00000')
  report = recovery.recover(directory)
  assert report.unlisted_shards == [os.fspath(directory / 'cartpole-train.tfrecord-00000')]
  assert not report.salvaged
  episodes = read_episodes(directory)
  assert len(episodes) == 4
  np.testing.assert_array_equal(episodes[3]['steps']['action'], written[3]['steps']['action'])


def test_record_command_takes_flush_seconds(tmp_path, monkeypatch):
  from rlds_suite.recording import backend  # pylint: disable=g-import-not-at-top
  given = []
  original = backend.RLDSWriter.__init__
  monkeypatch.setattr(backend.RLDSWriter, '__init__', lambda self, *args, **kwargs: (
      given.append(kwargs.get('flush_seconds')), original(self, *args, **kwargs))[1])
  code, out, _ = _cli('record', '--env', 'gymnasium:CartPole-v1', '--episodes', '2', '--seed', '0',
                      '--out', os.fspath(tmp_path / 'ds'), '--flush_seconds', '0.5',
                      '--no_progress')
  assert code == 0 and json.loads(out.splitlines()[-1])['episodes_written'] == 2
  assert given == [0.5]
  assert len(read_episodes(tmp_path / 'ds')) == 2
