"""Minari datasets (HDF5 or Arrow storage) as RLDS: one config per local Minari dataset id."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Optional

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite import scores
from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.core import spaces
from rlds_suite.readers import minari
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features

# metadata.json entries kept as dataset metadata (besides the reference scores).
# Episodes a Beam worker converts as one work item (it holds one episode at a time).
BEAM_ITEM_EPISODES = 100
_KEPT_METADATA = ('dataset_id', 'data_format', 'jpeg_encoding', 'total_episodes', 'total_steps',
                  'env_spec', 'eval_env_spec', 'algorithm_name', 'minari_version',
                  'code_permalink', 'num_episodes_average_score')


@dataclasses.dataclass
class MinariConfig(tfds.core.BuilderConfig):
  """A local Minari dataset, by id (e.g. 'mujoco/pusher/expert-v0')."""
  dataset_id: str = ''


def config_name(dataset_id: str) -> str:
  """The TFDS config name of a Minari id: '/' becomes '.' ('mujoco.pusher.expert-v0')."""
  return re.sub(r'[^\w.\-]', '.', dataset_id)


def config_for(dataset_id: str) -> MinariConfig:
  """The config of a dataset id, the same object each time (TFDS compares configs by identity)."""
  name = config_name(dataset_id)
  if name not in _CONFIGS:
    _CONFIGS[name] = MinariConfig(name=name, dataset_id=dataset_id,
                                  description=f'Minari dataset {dataset_id}.')
  return _CONFIGS[name]


_CONFIGS: dict[str, MinariConfig] = {}


def _declared(space: minari.Space) -> Optional[spaces.Space]:
  """The space to check values against (core/spaces): Discrete, a Box with its bounds, or a dict
  of those; None where Minari keeps no bounds (MultiDiscrete, MultiBinary)."""
  if isinstance(space, (dict, tuple)):
    items = space.items() if isinstance(space, dict) else enumerate(space)
    found = {str(key): _declared(sub) for key, sub in items}
    found = {key: sub for key, sub in found.items() if sub is not None}
    return found or None
  if isinstance(space, minari.Discrete):
    return spaces.Discrete(space.n, space.start)
  if space.low is None:
    return None
  return spaces.Box(space.low, space.high)


def _feature(space: minari.Space) -> Any:
  if isinstance(space, dict):
    return {key: _feature(sub) for key, sub in space.items()}
  if isinstance(space, tuple):
    return {str(j): _feature(sub) for j, sub in enumerate(space)}
  if isinstance(space, minari.Discrete):
    return features.scalar(space.dtype)
  if space.image and len(space.shape) == 3 and space.shape[-1] in (1, 3, 4):
    return features.image(space.shape)  # Lossless PNG of the pixels Minari decodes.
  return features.tensor(space.shape, space.dtype) if space.shape else features.scalar(space.dtype)


class Builder(rlds_beam.WorkerWrittenBuilder, builder_base.RLDSBuilder):
  """Local Minari datasets: `tfds.builder('minari', dataset_id='mujoco/pusher/expert-v0')`, or by
  config name, `tfds.builder('minari/mujoco.pusher.expert-v0')`."""

  READS_MANUAL_DIR = False  # Its files come from a Minari datasets root (rlds-suite build).
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download the dataset with Minari (`minari download ID`) or copy its directory into a Minari
  datasets root: $MINARI_DATASETS_PATH, ~/.minari/datasets, or the builder's `minari_root`.
  """

  def __init__(self, *, dataset_id: Optional[str] = None, minari_root: Optional[str] = None,
               jpeg_encoding: Optional[bool] = None, beam: bool = False, **kwargs: Any):
    """`dataset_id` picks the dataset (or pass config=MinariConfig(...)); `minari_root` overrides
    $MINARI_DATASETS_PATH and ~/.minari/datasets; `jpeg_encoding` declares the JPEG flag of
    datasets whose metadata.json has none (Minari assumes true); `beam` generates the examples as
    an Apache Beam pipeline, one element per episode (pass Beam options in the DownloadConfig)."""
    self._beam = beam
    if dataset_id is not None:
      kwargs['config'] = config_for(dataset_id)
    config = kwargs.get('config')
    if isinstance(config, str):  # 'minari/mujoco.pusher.expert-v0'
      config = kwargs['config'] = self.get_builder_config(config.split(':')[0])
    if not isinstance(config, MinariConfig):
      raise ValueError('minari needs a local Minari dataset: dataset_id=... or a config name')
    self._metadata = minari.read_metadata(minari.find_dataset(config.dataset_id, minari_root),
                                          jpeg_encoding)
    super().__init__(**kwargs)

  @classmethod
  def get_builder_config(cls, name: str, version: Any = None) -> Optional[MinariConfig]:
    """Every config name is a dataset id with '/' written '.': 'mujoco.pusher.expert-v0' is
    'mujoco/pusher/expert-v0' (ids with '.' of their own need dataset_id=...)."""
    return _CONFIGS.get(name) or config_for(name.replace('.', '/'))

  def _info(self) -> tfds.core.DatasetInfo:
    meta = self._metadata
    dataset_metadata = {key: meta.raw[key] for key in _KEPT_METADATA if key in meta.raw}
    declared = {name: _declared(space) for name, space in (
        ('observation', meta.observation_space), ('action', meta.action_space))}
    dataset_metadata.update(spaces.as_metadata(
        **{name: space for name, space in declared.items() if space is not None}))
    try:
      dataset_metadata.update(scores.reference(meta.dataset_id, meta.raw).as_metadata())
    except LookupError:
      pass  # Datasets without ref_min_score/ref_max_score have no normalised score.
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=_feature(meta.observation_space),
            action=_feature(meta.action_space),
            reward=features.scalar(np.float64, doc='As Minari stores it (float64).'),
            episode_metadata={
                'episode_id': features.scalar(np.int64, doc='Minari episode id.'),
                'seed': features.scalar(np.int64, doc='Reset seed; -1 when none was recorded.'),
            }),
        supervised_keys=None,
        homepage='https://minari.farama.org',
        metadata=tfds.core.MetadataDict(dataset_metadata),
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    del dl_manager  # The dataset is local (see MANUAL_DOWNLOAD_INSTRUCTIONS).
    return {'train': self._generate_examples()}

  def _generate_examples(self):
    """With `beam`, work items of BEAM_ITEM_EPISODES episodes written by Beam workers; otherwise
    a generator of all."""
    if self._beam:
      ids = list(minari.episode_ids(self._metadata))
      items = [ids[i:i + BEAM_ITEM_EPISODES] for i in range(0, len(ids), BEAM_ITEM_EPISODES)]
      totals = minari.expected_totals(self._metadata)
      return rlds_beam.WorkerWritten(items, functools.partial(_examples, metadata=self._metadata),
                                     total_steps=totals.steps, total_episodes=totals.episodes)
    return progress.expect(_examples(None, self._metadata), minari.expected_totals(self._metadata))


def _examples(episode_ids: Optional[list[int]], metadata: minari.Metadata):
  """(key, example) of the episodes `episode_ids`, or of every episode when it is None."""
  for trajectory in minari.trajectories(metadata, episode_ids):
    found_id = int(trajectory.metadata['episode_id'])
    with errors.located(minari.episode_file(metadata, found_id)):  # e.g. a NaN reward.
      yield found_id, episodes.to_episode(trajectory).as_example()

