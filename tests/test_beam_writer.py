"""The Beam workers' job (tfds/beam.py's _ItemWriter), run in this process: its shards hold the
bytes the non-Beam writer writes for the same examples (writing.Serializer: planned features batch
per field, TFDS's own encoding for features it cannot plan), cut at the shard size; its progress
file is rewritten at most once a second and holds the item's full counts at the end."""

import json
import os

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import features
from rlds_suite.tfds import tfrecord_files
from rlds_suite.tfds import writing

from tests import build_helpers

PREFIX = 'counting-train'


def _given(item):
  """A work item's examples are the item itself (the tests' items are lists of examples)."""
  for key, example in item:
    if example is None:
      raise errors.CorruptFileError('truncated', path=f'/data/{key}.gz')
    yield key, example


def _write(feature_dict, items, directory, max_shard_bytes=rlds_beam.MAX_SHARD_BYTES):
  """What the worker returns for each item, in item order."""
  writer = rlds_beam._ItemWriter(  # pylint: disable=protected-access
      rlds_beam.WorkerWritten(items, _given), feature_dict, str(directory), PREFIX, max_shard_bytes)
  return [out for index, item in enumerate(items) for out in writer((index, item))]


def _records(shards):
  return [record for shard in shards for record in tfrecord_files.read_records(shard.path)]


def _progress(directory, index):
  path = directory / f'{rlds_beam._PROGRESS_PREFIX}{PREFIX}-{index:05d}'  # pylint: disable=protected-access
  return json.loads(path.read_text())


def test_shards_hold_the_non_beam_writers_bytes_cut_at_the_shard_size(tmp_path):
  """Image, nested, text, ZLIB and exact float leaves: the bytes write_split's Serializer writes."""
  feature_dict = build_helpers.Counting(data_dir='/nonexistent').info.features
  assert writing.plan_of(feature_dict) is not None
  examples = [(index, build_helpers.episode(0, index)) for index in range(12)]
  items = [examples[:7], examples[7:]]
  shards = _write(feature_dict, items, tmp_path, max_shard_bytes=20_000)

  serializer = writing.Serializer(feature_dict, workers=0)
  expected = [data for _, example in examples for data in serializer.add(example)]
  expected += list(serializer.flush())
  assert _records(shards) == expected
  assert [(s.item, s.part) for s in shards] == sorted((s.item, s.part) for s in shards)
  assert len(shards) > len(items) and {s.item for s in shards} == {0, 1}  # Cut by size.
  for shard in shards:
    records = list(tfrecord_files.read_records(shard.path))
    assert (shard.num_examples, shard.num_bytes) == (len(records), sum(map(len, records)))
    assert os.path.basename(shard.path).startswith(f'{PREFIX}.item{shard.item:05d}-part')
  for index, item in enumerate(items):
    assert _progress(tmp_path, index) == {
        'examples': len(item), 'steps': sum(progress.num_steps(e) for _, e in item), 'items': 1}


def test_features_it_cannot_plan_are_written_as_tfds_writes_them(tmp_path):
  ragged = features.rlds_features(observation=features.tensor((None,), np.float32),
                                  action=features.scalar(np.int32),
                                  episode_metadata={'id': features.scalar(np.int64)})
  assert writing.plan_of(ragged) is None
  examples = []
  for index, width in enumerate((3, 1, 4)):
    flags = np.arange(2) == 0
    examples.append((index, {'id': index, 'steps': {
        'observation': np.arange(2 * width, dtype=np.float32).reshape(2, width),
        'action': np.array([1, index], np.int32), 'reward': np.zeros(2, np.float32),
        'discount': np.ones(2, np.float32), 'is_first': flags, 'is_last': ~flags,
        'is_terminal': ~flags}}))
  shards = _write(ragged, [examples], tmp_path)
  theirs = tfds.core.example_serializer.ExampleSerializer(ragged.get_serialized_info())
  assert _records(shards) == [theirs.serialize_example(ragged.encode_example(e))
                              for _, e in examples]


def test_a_typed_error_comes_back_after_the_shards_written_before_it(tmp_path):
  feature_dict = build_helpers.Counting(data_dir='/nonexistent').info.features
  item = [(0, build_helpers.episode(0, 0)), (1, None)]
  out = _write(feature_dict, [item], tmp_path)
  failure = out[-1]
  assert isinstance(failure, rlds_beam._Failure)  # pylint: disable=protected-access
  assert type(failure.error()) is errors.CorruptFileError and failure.path == '/data/1.gz'
  # What was counted is on disk at the end; the item is not counted done.
  assert _progress(tmp_path, 0) == {
      'examples': 1, 'steps': progress.num_steps(item[0][1]), 'items': 0}


def test_progress_file_is_rewritten_at_most_once_a_second_and_at_the_end(tmp_path):
  now = [100.0]
  path = tmp_path / f'{rlds_beam._PROGRESS_PREFIX}x-00000'  # pylint: disable=protected-access
  counts = rlds_beam._ProgressFile(str(path), clock=lambda: now[0])  # pylint: disable=protected-access
  for _ in range(1000):
    counts.add(1, 10)
  assert not path.exists()
  now[0] += 1.0
  counts.add(1, 10)
  assert json.loads(path.read_text()) == {'examples': 1001, 'steps': 10010, 'items': 0}
  for _ in range(5):
    now[0] += 0.1
    counts.add(1, 10)
  assert json.loads(path.read_text())['examples'] == 1001
  counts.items = 1
  counts.write()
  assert json.loads(path.read_text()) == {'examples': 1006, 'steps': 10060, 'items': 1}
  assert os.listdir(tmp_path) == [path.name]  # Replaced whole: no staged file left to count.
