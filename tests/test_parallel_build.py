"""The builders' writer (tfds/writing.py, tfds/episode_wire.py): what it writes is what TFDS's own
encoding writes, a parallel build equals a sequential one, and the directory is plain TFDS."""

import concurrent.futures
import json
import multiprocessing
import os
import pathlib
import threading

import numpy as np
import pytest
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.tfds import episode_wire
from rlds_suite.tfds import features
from rlds_suite.tfds import writing

from tests import build_helpers


def _build(tmp_path, name, workers, monkeypatch=None, **kwargs):
  builder = build_helpers.Counting(data_dir=str(tmp_path / name), **kwargs)
  builder.writer_workers = workers
  builder.writer_shard_bytes = 20_000
  builder.download_and_prepare()
  return builder


def test_wire_bytes_decode_like_tfds_own_encoding():
  feature_dict = build_helpers.Counting(data_dir='/nonexistent').info.features
  plan = writing.plan_of(feature_dict)
  assert {leaf.kind for leaf in plan} == {episode_wire.PNG, episode_wire.FLOAT, episode_wire.INT,
                                          episode_wire.RAW, episode_wire.ZLIB, episode_wire.TEXT}
  examples = [build_helpers.episode(3, index) for index in range(5)]
  ours = episode_wire.serialize(plan, [writing.flat_episode(plan, e) for e in examples])
  serializer = tfds.core.example_serializer.ExampleSerializer(feature_dict.get_serialized_info())
  parser = tfds.core.example_parser.ExampleParser(feature_dict.get_serialized_info())

  def decoded(data):
    parsed = parser.parse_example(data)
    steps = feature_dict['steps'].feature.decode_batch_example(parsed['steps'])
    return tfds.as_numpy({'steps': steps, **{key: feature_dict[key].decode_example(parsed[key])
                                             for key in ('source', 'index')}})

  for data, example in zip(ours, examples):
    theirs = serializer.serialize_example(feature_dict.encode_example(example))
    build_helpers.assert_same_episodes([decoded(data)], [decoded(theirs)])


def _wait_for_workers_at_start(monkeypatch) -> list[int]:
  """Makes each build wait for its pool's workers before its first example, so that every batch
  goes to them; returns the pids of the workers whose warm-up ran."""
  pids: list[int] = []
  start = writing.Serializer.start

  def start_and_wait(self):
    start(self)
    pids.extend(future.result() for future in self._warm_up)  # pylint: disable=protected-access

  monkeypatch.setattr(writing.Serializer, 'start', start_and_wait)
  return pids


def test_parallel_build_equals_sequential_and_loads_with_tfds_alone(tmp_path, monkeypatch):
  monkeypatch.setattr(writing, 'POOL_AFTER_BYTES', 0)  # Use the pool at once.
  monkeypatch.setattr(writing, 'BATCH_BYTES', 50_000)
  pids = _wait_for_workers_at_start(monkeypatch)
  sequential = _build(tmp_path, 'one', workers=1)
  parallel = _build(tmp_path, 'two', workers=2)
  assert pids  # Every batch went to the workers.
  one = build_helpers.built_episodes(str(sequential.data_dir))
  two = build_helpers.built_episodes(str(parallel.data_dir))
  build_helpers.assert_same_episodes(two, one)
  expected = [build_helpers.episode(0, index) for index in range(40)]
  assert [e['index'] for e in two] == list(range(40))  # In the order generated.
  np.testing.assert_array_equal(two[7]['steps']['observation']['frame'],
                                expected[7]['steps']['observation']['frame'])
  assert two[7]['source'] == 'episode 7 é'.encode()
  info = json.loads((pathlib.Path(parallel.data_dir) / 'dataset_info.json').read_text())
  split = info['splits'][0]
  assert len(split['shardLengths']) > 3 and sum(map(int, split['shardLengths'])) == 40
  assert info['disableShuffling'] is True
  names = sorted(os.listdir(parallel.data_dir))
  assert [n for n in names if 'tfrecord' in n] == [
      f'counting-train.tfrecord-{i:05d}-of-{len(split["shardLengths"]):05d}'
      for i in range(len(split['shardLengths']))]
  assert not [n for n in os.listdir(os.path.dirname(parallel.data_dir)) if n.startswith('incomplete')]


def _write(tmp_path, examples, workers=2):
  feature_dict = build_helpers.Counting(data_dir='/nonexistent').info.features
  work = writing.WorkDir(tmp_path / 'ds' / '1.0.0', {'test': 1})
  writing.write_split(examples, features=feature_dict, work=work, split='train', workers=workers,
                      shard_bytes=20_000)
  return work


def test_workers_start_before_the_first_example_is_read(tmp_path):
  """The pool's workers import while the builder reads (they took ~0.7 s after it, serially)."""
  before = set(multiprocessing.active_children())
  children_at_first_pull = []

  def examples():
    children_at_first_pull.extend(set(multiprocessing.active_children()) - before)
    for index in range(3):
      yield index, build_helpers.episode(0, index)

  work = _write(tmp_path, examples())
  assert len(children_at_first_pull) == 2
  assert sum(shard['examples'] for shard in work.progress.shards('train')) == 3
  work.remove()


def test_batches_are_serialized_here_until_the_workers_are_up(tmp_path, monkeypatch):
  """A build past POOL_AFTER_BYTES does not wait for the workers' start-up: its batches are
  serialized in this process until the workers are up, then in the workers; the shards are the
  same bytes as a sequential build's."""
  monkeypatch.setattr(writing, 'POOL_AFTER_BYTES', 0)
  monkeypatch.setattr(writing, 'BATCH_BYTES', 1)  # A batch per episode.
  here = []
  serialize = episode_wire.serialize
  monkeypatch.setattr(episode_wire, 'serialize',
                      lambda plan, batch, *args: here.append(len(batch)) or serialize(
                          plan, batch, *args))
  two_read, workers_up = threading.Event(), threading.Event()
  start = writing.Serializer.start

  def start_and_hold(self):
    """The workers count as up only once two episodes are read, and then the build waits. Later
    calls (each batch before pooling calls start) change nothing, as the real start's do."""
    # pylint: disable=protected-access
    first = self._pool is None
    start(self)
    if not first:
      return
    warm_up = self._warm_up
    held = self._warm_up = [concurrent.futures.Future() for _ in warm_up]

    def release():
      two_read.wait(60)
      for real, future in zip(warm_up, held):
        future.set_result(real.result())
      workers_up.set()

    threading.Thread(target=release, daemon=True).start()

  monkeypatch.setattr(writing.Serializer, 'start', start_and_hold)

  def examples():
    for index in range(40):
      if index == 2:
        two_read.set()
        assert workers_up.wait(60)
      yield index, build_helpers.episode(0, index)

  work = _write(tmp_path / 'two', examples())
  assert here == [1, 1]  # The rest went to the workers.
  sequential = _write(tmp_path / 'one', ((i, build_helpers.episode(0, i)) for i in range(40)),
                      workers=1)
  ours, theirs = work.progress.shards('train'), sequential.progress.shards('train')
  assert len(ours) == len(theirs) > 3
  for mine, other in zip(ours, theirs):
    assert (pathlib.Path(work.path, mine['file']).read_bytes() ==
            pathlib.Path(sequential.path, other['file']).read_bytes())
  work.remove()
  sequential.remove()


def test_ragged_features_fall_back_to_tfds_encoding():
  ragged = features.rlds_features(observation=features.tensor((None,), np.float32),
                                  action=features.scalar(np.int32))
  assert writing.plan_of(ragged) is None
  flags = np.array([True, False])
  example = {'steps': {'observation': np.arange(6, dtype=np.float32).reshape(2, 3),
                       'action': np.array([1, 2], np.int32), 'reward': np.zeros(2, np.float32),
                       'discount': np.ones(2, np.float32), 'is_first': flags,
                       'is_last': ~flags, 'is_terminal': ~flags}}
  serializer = writing.Serializer(ragged, workers=2)
  ours = list(serializer.add(example)) + list(serializer.flush())
  theirs = tfds.core.example_serializer.ExampleSerializer(ragged.get_serialized_info())
  assert ours == [theirs.serialize_example(ragged.encode_example(example))]


def test_example_not_matching_features_is_a_schema_error():
  plan = writing.plan_of(build_helpers.Counting(data_dir='/nonexistent').info.features)
  example = build_helpers.episode(0, 1)
  example['steps']['observation']['state'] = example['steps']['observation']['state'][:, :2]
  with pytest.raises(errors.SchemaError, match='steps/observation/state'):
    writing.flat_episode(plan, example)


def test_a_shard_that_cannot_be_completed_fails_the_build_and_is_written_again_on_resume(
    tmp_path, monkeypatch):
  """Closed shards are completed (fsynced, renamed, listed) off the writing thread: a failure
  there (a full disk at fsync) still fails the build, lists nothing after the shards before it,
  and the same build run again ends equal to an uninterrupted one."""
  episodes = [(i, build_helpers.episode(0, i)) for i in range(12)]
  fsync = os.fsync

  def full_at_the_second_shard(fd):
    if os.readlink(f'/proc/self/fd/{fd}').endswith('.train.shard-00001.tfrecord.partial'):
      raise OSError(28, 'No space left on device')
    fsync(fd)

  feature_dict = build_helpers.Counting(data_dir='/nonexistent').info.features
  work = writing.WorkDir(tmp_path / 'failed' / 'ds' / '1.0.0', {'test': 1})
  monkeypatch.setattr(os, 'fsync', full_at_the_second_shard)
  with pytest.raises(OSError, match='No space left'):
    writing.write_split(iter(episodes), features=feature_dict, work=work, split='train',
                        workers=1, shard_bytes=20_000)
  monkeypatch.setattr(os, 'fsync', fsync)
  work.release()  # As the builder does; the next run takes the directory over.
  work = writing.WorkDir(tmp_path / 'failed' / 'ds' / '1.0.0', {'test': 1})
  assert [s['file'] for s in work.progress.shards('train')] == ['train.shard-00000.tfrecord']
  assert sorted(os.listdir(work.path)) == ['.lock', writing.PROGRESS_FILE,
                                           'train.shard-00000.tfrecord']
  writing.write_split(iter(episodes), features=feature_dict, work=work, split='train', workers=1,
                      shard_bytes=20_000)
  clean = _write(tmp_path / 'clean', iter(episodes), workers=1)
  ours, theirs = work.progress.shards('train'), clean.progress.shards('train')
  assert ours == theirs and len(ours) > 2
  for shard in ours:
    assert (pathlib.Path(work.path, shard['file']).read_bytes() ==
            pathlib.Path(clean.path, shard['file']).read_bytes())


def test_after_a_shard_fails_to_complete_no_later_shard_is_listed(tmp_path, monkeypatch):
  """The completion thread's failure stays raised once the writer has seen it: were it
  cleared, shards closed after the failed one would be completed and listed in its place, and a
  resumed build would skip the wrong examples."""
  work = writing.WorkDir(tmp_path / 'ds' / '1.0.0', {'test': 1})
  shards = writing._ShardWriter(work, 'train', shard_bytes=1)  # pylint: disable=protected-access
  fsync = os.fsync

  def full_at_the_first_shard(fd):
    if os.readlink(f'/proc/self/fd/{fd}').endswith('.train.shard-00000.tfrecord.partial'):
      raise OSError(28, 'No space left on device')
    fsync(fd)

  monkeypatch.setattr(os, 'fsync', full_at_the_first_shard)
  shards.write(b'first')  # Closes shard 0, whose completion fails.
  with pytest.raises(OSError, match='No space left'):
    shards.wait()
  with pytest.raises(OSError, match='No space left'):
    shards.write(b'second')
    shards.wait()
  assert work.progress.shards('train') == []
  work.release()
