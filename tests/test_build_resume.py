"""A build killed at any moment and run again continues from its last complete shard and ends equal
to an uninterrupted build; stop signals keep what is complete; nothing half-built looks complete.

Builds run in processes forked by tests/build_resume_child.py (libraries imported once), since a
real kill is the point. Datasets are compared file by file: every shard byte-equal to the
uninterrupted build's, and the same splits in dataset_info.json (neither process imports
TensorFlow, whose import alone took most of this test's time on a loaded machine).
"""

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import pytest

from rlds_suite.tfds import datasets
from rlds_suite.tfds import shard_reader
from rlds_suite.tfds import tfrecord_files
from rlds_suite.tfds import writing

CHILD = pathlib.Path(__file__).parent / 'build_resume_child.py'
TRIALS = int(os.environ.get('RLDS_SUITE_RESUME_TRIALS', '10'))
REQUEST = {'episodes': 24, 'delay': 0.015, 'workers': 1, 'shard_bytes': 15_000,
           'batch_bytes': 30_000}  # Shards complete while episodes are generated.


class Builds:
  """Requests builds from the child; `run` returns the build's exit status."""

  def __init__(self, log: pathlib.Path):
    self._log = open(log, 'w')  # pylint: disable=consider-using-with
    self._child = subprocess.Popen([sys.executable, str(CHILD)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=self._log, text=True)

  def run(self, data_dir: pathlib.Path, after: float | None = None, sig: int = signal.SIGKILL,
          after_shards: int = 0, before_signal=lambda pid: None, **overrides) -> int:
    """Builds in `data_dir`; with `after`, sends `sig` once `after_shards` shards are complete
    and `after` more seconds have passed (a build that ends first is not signalled), calling
    `before_signal` with the build's process id first."""
    self._child.stdin.write(json.dumps({**REQUEST, **overrides, 'data_dir': str(data_dir)}) + '\n')
    self._child.stdin.flush()
    pid = json.loads(self._child.stdout.readline())['pid']
    if after is not None:
      while _shards_done(data_dir) < after_shards and _running(pid):
        time.sleep(0.005)
      time.sleep(after)
      before_signal(pid)
      try:
        os.kill(pid, sig)
      except ProcessLookupError:
        pass
    return json.loads(self._child.stdout.readline())['status']

  def close(self) -> None:
    self._child.stdin.close()
    self._child.wait(timeout=60)
    self._log.close()


def _running(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split(')')[-1].split()[0] != 'Z'
  except FileNotFoundError:
    return False


@pytest.fixture(scope='module')
def builds(tmp_path_factory):
  started = Builds(tmp_path_factory.mktemp('logs') / 'child.log')
  yield started
  started.close()


@pytest.fixture(scope='module')
def reference(builds, tmp_path_factory):
  data_dir = tmp_path_factory.mktemp('reference')
  assert builds.run(data_dir) == 0
  snapshot = _snapshot(data_dir)
  return snapshot, len(snapshot['splits'][0]['shardLengths'])


def _snapshot(data_dir: pathlib.Path) -> dict:
  """A built dataset's shards (bytes by file name) and its dataset_info.json's splits."""
  version = _version_dir(data_dir)
  return {'splits': json.loads((version / 'dataset_info.json').read_text())['splits'],
          'data_dir': data_dir, 'shards': {p.name: p.read_bytes() for p in sorted(version.glob('*.tfrecord*'))}}


def _assert_same_dataset(data_dir: pathlib.Path, expected: dict, same_shards: bool = True) -> None:
  """Byte-equal shards and splits; or, where a stop signal closed a shard early (`same_shards`
  False), byte-equal records in the same order."""
  got = _snapshot(data_dir)
  if same_shards:
    assert got['splits'] == expected['splits']
    assert sorted(got['shards']) == sorted(expected['shards'])
    for name, data in expected['shards'].items():
      assert got['shards'][name] == data, name
  else:
    assert _records(data_dir) == _records(expected['data_dir'])


def _records(data_dir: pathlib.Path) -> list[bytes]:
  version = _version_dir(data_dir)
  return [record for path in sorted(version.glob('*.tfrecord*'))
          for record in tfrecord_files.read_records(path)]


def _version_dir(data_dir: pathlib.Path) -> pathlib.Path:
  return data_dir / 'counting' / '1.0.0'


def _work_dir(data_dir: pathlib.Path) -> pathlib.Path:
  return data_dir / 'counting' / (writing.WORK_DIR_PREFIX + '1.0.0')


def _shards_done(data_dir: pathlib.Path) -> int:
  path = _work_dir(data_dir) / writing.PROGRESS_FILE
  if not path.exists():
    return 0
  return len(json.loads(path.read_text())['splits'].get('train', {}).get('shards', []))


def _assert_nothing_half_built(data_dir: pathlib.Path) -> None:
  """Only a complete dataset has a version directory; every shard the progress lists is there
  (an unlisted one, renamed just before a kill, is removed by the next run)."""
  version = _version_dir(data_dir)
  if version.exists():
    assert (version / 'dataset_info.json').exists()
  work = _work_dir(data_dir)
  if work.exists():
    listed = {s['file'] for s in json.loads((work / writing.PROGRESS_FILE).read_text())[
        'splits'].get('train', {}).get('shards', [])} if (work / writing.PROGRESS_FILE).exists() else set()
    assert listed <= {n for n in os.listdir(work) if n.endswith('.tfrecord')}


def test_killed_at_random_points_resumes_to_the_same_dataset(builds, reference, tmp_path):
  expected, shards = reference
  rng = random.Random(17)
  resumed_with_shards = 0
  for trial in range(TRIALS):
    data_dir = tmp_path / f'trial{trial}'
    pool = trial % 3 == 2  # Some trials serialize in worker processes.
    options = {'workers': 2, 'pool_after': 0, 'batch_bytes': 30_000} if pool else {}
    status = builds.run(data_dir, after=rng.uniform(0.0, 0.1), after_shards=rng.randrange(shards),
                        **options)
    _assert_nothing_half_built(data_dir)
    if status != 0:
      assert status == -signal.SIGKILL
      resumed_with_shards += _shards_done(data_dir) > 0
      if rng.random() < 0.3:  # Killed again while resuming.
        builds.run(data_dir, after=rng.uniform(0.0, 0.1),
                   after_shards=_shards_done(data_dir) + rng.randrange(2), **options)
        _assert_nothing_half_built(data_dir)
      assert builds.run(data_dir, **options) == 0
    _assert_same_dataset(data_dir, expected)
    assert not _work_dir(data_dir).exists()
    assert not [n for n in os.listdir(data_dir / 'counting') if n.startswith('incomplete')]
  assert resumed_with_shards  # At least one trial continued after completed shards.


def _pool_workers(parent: int) -> list[int]:
  """The process ids of `parent`'s multiprocessing workers (spawned, so not the tracker)."""
  found = []
  for entry in os.listdir('/proc'):
    try:
      with open(f'/proc/{entry}/stat') as f:
        ppid = int(f.read().rsplit(')', 1)[1].split()[1])
      with open(f'/proc/{entry}/cmdline', 'rb') as f:
        spawned = b'spawn_main' in f.read()
    except (OSError, ValueError, IndexError):
      continue
    if ppid == parent and spawned:
      found.append(int(entry))
  return found


def test_a_killed_build_leaves_no_pool_worker_behind(builds, tmp_path):
  """A build SIGKILLed while its pool serializes takes its workers with it: they used to wait for
  batches for ever (~100 MB each), keeping its shared-memory blocks from being unlinked."""
  workers: list[int] = []

  def workers_up(pid):
    deadline = time.monotonic() + 60
    while len(workers) < 2 and time.monotonic() < deadline:
      workers[:] = _pool_workers(pid)
      time.sleep(0.01)

  status = builds.run(tmp_path, after=0.0, after_shards=1, before_signal=workers_up, delay=0.05,
                      workers=2, pool_after=0)
  assert status == -signal.SIGKILL and len(workers) == 2
  deadline = time.monotonic() + 30
  while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
    time.sleep(0.05)
  assert not [pid for pid in workers if _running(pid)]


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGUSR1])
def test_stop_signal_keeps_complete_shards_and_resumes(builds, reference, tmp_path, sig):
  expected, _ = reference
  data_dir = tmp_path / 'stopped'
  assert builds.run(data_dir, after=0.0, after_shards=1, sig=sig, delay=0.05) == 3
  assert not _version_dir(data_dir).exists()
  kept = json.loads((_work_dir(data_dir) / writing.PROGRESS_FILE).read_text())
  assert kept['splits']['train']['shards'] and not kept['splits']['train']['done']
  assert builds.run(data_dir, delay=0.05) == 0
  _assert_same_dataset(data_dir, expected, same_shards=False)


def test_another_source_starts_over(builds, tmp_path):
  data_dir = tmp_path / 'changed'
  assert builds.run(data_dir, after=0.0, after_shards=1, sig=signal.SIGTERM, delay=0.05) == 3
  assert builds.run(data_dir, episodes=12) == 0  # Other settings: the kept shards are not used.
  info = datasets.load_builder(str(_version_dir(data_dir))).info
  assert [int(e['index']) for e in shard_reader.read_episodes(info)] == list(range(12))


D4RL_DUMMY = pathlib.Path(__file__).parents[1] / 'builders' / 'd4rl' / 'dummy_data'


def test_ctrl_c_in_cli_build_says_what_was_kept_and_the_same_command_resumes(
    tmp_path, monkeypatch, capsys):
  from rlds_suite import cli  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import builder_base  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(builder_base.RLDSBuilder, 'writer_shard_bytes', 1)  # A shard per episode.
  monkeypatch.setattr(writing, 'BATCH_BYTES', 1)  # Serialized as they come.
  add = writing.Serializer.add
  calls = []

  def interrupted_at_the_third(self, example):
    calls.append(1)
    if len(calls) == 3:
      raise KeyboardInterrupt
    yield from add(self, example)

  command = ['build', 'd4rl/walker2d-random-v2', '--manual_dir', str(D4RL_DUMMY),
             '--data_dir', str(tmp_path)]
  monkeypatch.setattr(writing.Serializer, 'add', interrupted_at_the_third)
  assert cli.main(command) == 130
  err = capsys.readouterr().err
  assert 'stopped (SIGINT): 2 episodes in 2 shards kept in' in err
  assert 'run the same command to resume' in err and 'Traceback' not in err
  dataset = tmp_path / 'd4rl' / 'walker2d-random-v2'
  assert sorted(os.listdir(dataset)) == [writing.WORK_DIR_PREFIX + '1.0.0']

  monkeypatch.setattr(writing.Serializer, 'add', add)
  assert cli.main(command) == 0
  assert 'resuming: 2 shards done (2 episodes)' in capsys.readouterr().err
  assert sorted(os.listdir(dataset)) == ['1.0.0']


def test_ctrl_c_before_any_shard_leaves_no_dataset_directory(tmp_path, monkeypatch, capsys):
  from rlds_suite import cli  # pylint: disable=g-import-not-at-top

  def interrupted(self, example):
    raise KeyboardInterrupt
    yield  # pylint: disable=unreachable

  monkeypatch.setattr(writing.Serializer, 'add', interrupted)
  assert cli.main(['build', 'd4rl/walker2d-random-v2', '--manual_dir', str(D4RL_DUMMY),
                   '--data_dir', str(tmp_path)]) == 130
  assert 'nothing kept' in capsys.readouterr().err
  assert not (tmp_path / 'd4rl').exists()


def test_empty_incomplete_directories_of_a_killed_build_are_removed(builds, tmp_path):
  stale = tmp_path / 'counting' / 'incomplete.AB12CD_1.0.0'
  (stale / 'dqn_replay-train.tfrecord-00000-of-00001').mkdir(parents=True)  # What TFDS left.
  beam = tmp_path / 'counting' / 'incomplete.EF34GH_0.9.0'  # Another version's, empty, old.
  beam.mkdir()
  os.utime(beam, (time.time() - 3600,) * 2)
  assert builds.run(tmp_path, episodes=3) == 0
  assert sorted(os.listdir(tmp_path / 'counting')) == ['1.0.0']
