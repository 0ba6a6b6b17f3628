"""Episodes decoded at once equal TFDS's per-step decoding, for plain, ZLIB and PNG features."""

import numpy as np

from rlds_suite.tfds import datasets
from rlds_suite.core import episodes
from rlds_suite.tfds import features
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.tfds import writing
from rlds_suite.streams import reading


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
