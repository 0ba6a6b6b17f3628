"""Episodes decoded at once equal TFDS's per-step decoding, for plain, ZLIB and PNG features; files
read in batches of episodes, counted so that a short shard is named."""

import os

import numpy as np
import pytest
import tensorflow as tf

from rlds_suite.tfds import datasets
from rlds_suite.core import episodes
from rlds_suite.tfds import features
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.tfds import writing
from rlds_suite.streams import reading

from tests import streams_data


def test_read_steps_equals_tfds_decoding(tmp_path):
  rng = np.random.default_rng(0)
  observations = {'stack': rng.integers(0, 255, size=(4, 20, 20, 12), dtype=np.uint8),
                  'rgb': rng.integers(0, 255, size=(4, 8, 8, 3), dtype=np.uint8)}
  episode = episodes.to_episode(episodes.Trajectory(
      observations=observations, actions=np.arange(4, dtype=np.int64),
      rewards=np.ones(4, np.float32), ending=episodes.Ending.TERMINATED))
  feature_dict = features.rlds_features(
      observation={'stack': features.tensor((20, 20, 12), np.uint8),  # ZLIB: > 4096 elements.
                   'rgb': features.image((8, 8, 3))},
      action=features.scalar(np.int64))
  directory = writing.write_episodes([episode], features=feature_dict, data_dir=tmp_path,
                                     name='encoded')
  builder = datasets.load_builder(directory)
  got = next(iter(reading.read_steps(builder, 'train').as_numpy_iterator()))
  expected = next(datasets.numpy_episodes(datasets.episodes(builder)))[fields.STEPS]
  for path, value in nested.flatten_paths(expected).items():
    np.testing.assert_array_equal(nested.flatten_paths(got)[path], value, err_msg=path)
  np.testing.assert_array_equal(got[fields.OBSERVATION]['stack'], observations['stack'])


def test_serialized_batches_hold_every_episode_once_in_file_order_and_name_a_short_shard(tmp_path):
  directory = streams_data.write(tmp_path, 'batched', streams_data.id_episodes(0, 7, seed=4))
  files = reading.split_files(datasets.load_builder(directory), 'train')
  batches = list(reading.serialized_batches(files, batch_episodes=3).as_numpy_iterator())
  assert [len(b) for b in batches] == [3, 3, 1, 0]  # An empty batch marks the file's end.
  episodes_read = list(reading.serialized_episodes(files).as_numpy_iterator())
  assert np.concatenate(batches).tolist() == episodes_read and len(episodes_read) == 7
  shard = files[0].filename
  with open(shard, 'r+b') as f:
    f.truncate(os.path.getsize(shard) * 2 // 3)
  for read in (reading.serialized_batches(files, batch_episodes=3),
               reading.serialized_episodes(files, shuffle_files=True, seed=0)):
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
      list(read.as_numpy_iterator())
    assert reading.SHORT_SHARD in raised.value.message and shard in raised.value.message
