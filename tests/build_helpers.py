"""A small builder of deterministic episodes over every kind of leaf the writer handles, and a
comparison of built datasets, for the writer's tests (test_parallel_build, test_build_resume)."""

from __future__ import annotations

import time
from typing import Any, Iterator

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import fields
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import datasets
from rlds_suite.tfds import features


class Counting(builder_base.RLDSBuilder, skip_registration=True):
  """`episodes` episodes of 1-30 steps: a PNG frame and a float state per step, a ZLIB map, an
  exact float64, text and an index per episode; each drawn from (seed, index) alone."""

  def __init__(self, *, episodes: int = 40, seed: int = 0, delay: float = 0.0, **kwargs: Any):
    self._episodes, self._seed, self._delay = episodes, seed, delay
    super().__init__(**kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(features=features.rlds_features(
        observation={'frame': features.image((8, 8, 1)),
                     'state': features.tensor((3,), np.float32)},
        action=features.scalar(np.int32),
        step_metadata={'exact': features.scalar(np.float64),
                       'map': features.tensor((70, 70), np.uint8)},
        episode_metadata={'source': features.text(), 'index': features.scalar(np.int64)}))

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    return {'train': self._generate_examples()}

  def _generate_examples(self) -> Iterator[tuple[int, dict[str, Any]]]:
    for index in range(self._episodes):
      time.sleep(self._delay)
      yield index, episode(self._seed, index)


def episode(seed: int, index: int) -> dict[str, Any]:
  rng = np.random.default_rng((seed, index))
  n = int(rng.integers(1, 31))
  flags = np.arange(n)
  return {
      fields.STEPS: {
          fields.OBSERVATION: {'frame': rng.integers(0, 256, (n, 8, 8, 1), dtype=np.uint8),
                               'state': rng.normal(size=(n, 3)).astype(np.float32)},
          fields.ACTION: rng.integers(-5, 2**20, n).astype(np.int32),
          fields.REWARD: rng.normal(size=n).astype(np.float32),
          fields.DISCOUNT: np.ones(n, np.float32),
          fields.IS_FIRST: flags == 0, fields.IS_LAST: flags == n - 1,
          fields.IS_TERMINAL: (flags == n - 1) & (index % 2 == 0),
          'exact': rng.normal(size=n) * 1e-300,
          'map': np.repeat(rng.integers(0, 4, (n, 70, 1), dtype=np.uint8), 70, axis=2),
      },
      'source': f'episode {index} é', 'index': index,
  }


def built_episodes(data_dir: str) -> list[dict[str, Any]]:
  """The episodes of a built dataset directory, read by TFDS alone."""
  builder = tfds.builder_from_directory(data_dir)
  return list(datasets.numpy_episodes(builder.as_dataset(split='train')))


def assert_same_episodes(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
  assert len(got) == len(expected)
  for a, b in zip(got, expected):
    flat_a, flat_b = tfds.core.utils.flatten_nest_dict(a), tfds.core.utils.flatten_nest_dict(b)
    assert flat_a.keys() == flat_b.keys()
    for key in flat_a:
      np.testing.assert_array_equal(flat_a[key], flat_b[key], err_msg=key)
