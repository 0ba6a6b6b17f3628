"""Writing RLDS episodes into a TFDS dataset directory (tests, benchmarks, recorded datasets).

A thin layer over `tfds.dataset_builders.store_as_tfds_dataset`, which writes any iterable of
(key, example) pairs with declared features and records split sizes and shard lengths.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional, Union

import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.core.episodes import Episode

EpisodeLike = Union[Episode, Mapping[str, Any]]


def write_episodes(episodes: Union[Iterable[EpisodeLike], Mapping[str, Iterable[EpisodeLike]]],
                   *,
                   features: tfds.features.FeaturesDict,
                   data_dir: Union[str, os.PathLike],
                   name: str,
                   version: str = '1.0.0',
                   config: Optional[str] = None,
                   split: str = 'train',
                   description: Optional[str] = None) -> str:
  """Writes episodes (or {split: episodes}) as the TFDS dataset `name` under `data_dir`.

  Episodes are `Episode`s or examples {'steps': {...}, **metadata} matching `features` (see
  `rlds_suite.tfds.features.rlds_features`). Returns the dataset's version directory, which
  `rlds_suite.tfds.datasets.load_builder` accepts.
  """
  splits = dict(episodes) if isinstance(episodes, Mapping) else {split: episodes}

  def keyed(split_episodes: Iterable[EpisodeLike]):
    for index, episode in enumerate(split_episodes):
      yield index, episode.as_example() if isinstance(episode, Episode) else dict(episode)

  try:
    builder = tfds.dataset_builders.store_as_tfds_dataset(
        name=name,
        version=version,
        config=config,
        features=features,
        split_datasets={key: keyed(value) for key, value in splits.items()},
        data_dir=os.fspath(data_dir),
        description=description,
        disable_shuffling=True)
  except errors.RLDSSuiteError:
    raise
  except (TypeError, ValueError, KeyError) as e:
    raise errors.SchemaError(f'episodes do not match the declared features: {e}',
                             path=os.path.join(os.fspath(data_dir), name)) from e
  return os.fspath(builder.data_dir)
