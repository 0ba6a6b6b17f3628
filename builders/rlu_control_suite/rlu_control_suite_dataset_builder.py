"""RL Unplugged DeepMind Control Suite (dm_control_suite_episodes) as RLDS: one config per task."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Iterator, Mapping

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.readers import rl_unplugged
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features
from rlds_suite.tfds import tfrecord_episodes


@dataclasses.dataclass
class RLUControlSuiteConfig(tfds.core.BuilderConfig):
  observation_sizes: Mapping[str, int] = dataclasses.field(default_factory=dict)
  action_size: int = 0


def _examples(path: str, observation_sizes: Mapping[str, int],
              action_size: int) -> Iterator[tuple[str, dict[str, Any]]]:
  """(key, example) of every episode in one shard; key = episode_id, as TFDS's builder."""
  spec = tfrecord_episodes.control_suite_spec(observation_sizes, action_size)
  with errors.located(path):
    for parsed in tfrecord_episodes.read_examples(path, spec):
      trajectory = rl_unplugged.control_suite_trajectory(parsed, observation_sizes)
      yield str(trajectory.metadata['episode_id']), episodes.to_episode(trajectory).as_example()


class Builder(rlds_beam.WorkerWrittenBuilder, builder_base.RLDSBuilder):
  """RL Unplugged DeepMind Control Suite: 9 tasks of D4PG / V-MPO episodes.

  Registered as `rlds_suite_rlu_control_suite`: TFDS registers its own `rlu_control_suite` builder.
  """
  name = 'rlds_suite_rlu_control_suite'

  BUILDER_CONFIGS = [
      RLUControlSuiteConfig(name=task, observation_sizes=sizes, action_size=action_size,
                            description=f'RL Unplugged control suite {task}.')
      for task, (sizes, action_size) in rl_unplugged.CONTROL_SUITE_TASKS.items()
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Copy the task's shards into --manual_dir as TASK/train-0000i-of-00100, e.g.
    gsutil -m cp 'gs://rl_unplugged/dm_control_suite_episodes/cartpole_swingup/train-*' MANUAL_DIR/cartpole_swingup/
  """

  def __init__(self, *, beam: bool = True, num_shards: int | None = None, **kwargs: Any):
    """`beam=False` reads the shards in this process; `num_shards` overrides the published count
    (for subsets and test data)."""
    self._beam = beam
    self._num_shards = num_shards
    super().__init__(**kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    cfg = self.builder_config
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation={k: features.tensor((v,), np.float32)
                         for k, v in cfg.observation_sizes.items()},
            action=features.tensor((cfg.action_size,), np.float32),
            reward=features.scalar('float32', doc='The reward the action earned.'),
            episode_metadata={'episode_id': features.scalar('int64'),
                              'timestamp': features.scalar('int64')}),
        metadata=tfds.core.MetadataDict(task=cfg.name),
        homepage='https://github.com/deepmind/deepmind-research/tree/master/rl_unplugged',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    task = self.builder_config.name
    names = rl_unplugged.control_suite_shard_names(task)
    if self._num_shards is not None:
      names = [f'{task}/train-{i:05d}-of-{self._num_shards:05d}' for i in range(self._num_shards)]
    paths = tfrecord_episodes.shard_paths(dl_manager.manual_dir, names)
    return {'train': self._generate_examples([os.fspath(p) for p in paths])}

  def _generate_examples(self, paths: list[str]):
    cfg = self.builder_config
    examples = functools.partial(_examples, observation_sizes=dict(cfg.observation_sizes),
                                 action_size=cfg.action_size)
    if self._beam:
      return rlds_beam.per_file(paths, examples)
    found = (example for path in progress.files(paths) for example in examples(path))
    return progress.expect(found, progress.Totals(files=len(paths)))
