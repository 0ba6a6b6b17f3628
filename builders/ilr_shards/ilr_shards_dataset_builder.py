"""il-representations processed shards (`<root>/processed/<type>/<benchmark>/<task>/*.tar.zst`) as
RLDS, one config per (type, benchmark, task) declared in rlds_suite.readers.il_representations_tasks."""

from __future__ import annotations

import dataclasses
import json
import logging
import pathlib
from typing import Optional

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.readers import il_representations
from rlds_suite.readers import il_representations_tasks as tasks
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features

DATA_TYPES = ('demos', 'random')


@dataclasses.dataclass
class ShardsConfig(tfds.core.BuilderConfig):
  data_type: str = 'demos'
  layout: Optional[tasks.TaskLayout] = None


def config_for(data_type: str, layout: tasks.TaskLayout) -> ShardsConfig:
  """The config of one (type, benchmark, task); for a task not declared in
  il_representations_tasks, pass its own TaskLayout: tfds.builder('ilr_shards', config=...)."""
  return ShardsConfig(
      name=f'{data_type}-{layout.benchmark}-{layout.task}', data_type=data_type, layout=layout,
      description=f'il-representations processed {data_type} of {layout.benchmark} {layout.task}.')


def configs_found(root: pathlib.Path) -> list[ShardsConfig]:
  """A config for every processed/<type>/<benchmark>/<task>/ directory holding shards below
  `root` (or root/data): the declared layout where there is one, else the one the first shard's
  metadata describes; a task that cannot be read (no declared semantics, an unsupported space) is
  skipped with a warning naming its directory. Build one with tfds.builder('ilr_shards', config=...)."""
  root = pathlib.Path(root)
  configs = {}
  for base in (root / 'processed', root / 'data' / 'processed'):
    for directory in sorted(base.glob('*/*/*')):
      shards = sorted(directory.glob('*.tar.zst'))
      data_type, benchmark, task = directory.parts[-3:]
      if not shards or (data_type, benchmark, task) in configs:
        continue
      try:
        layout = tasks.layout(benchmark, task) or il_representations.layout_of(shards[0])
        il_representations.semantics_of({'benchmark_name': layout.benchmark})
      except errors.RLDSSuiteError as e:  # One unsupported task does not hide the others.
        logging.warning('ilr_shards: skipping %s: %s', directory, e)
        continue
      configs[(data_type, benchmark, task)] = config_for(data_type, layout)
  return list(configs.values())


def shard_paths(root: pathlib.Path, config: ShardsConfig) -> list[pathlib.Path]:
  """The config's shards below `root/processed/...` or `root/data/processed/...` (il-representations'
  data_root layout)."""
  relative = pathlib.Path('processed', config.data_type, config.layout.benchmark, config.layout.task)
  directories = [root / relative, root / 'data' / relative]
  found = sorted(p for d in directories if d.is_dir() for p in d.glob('*.tar.zst'))
  if not found:
    raise errors.EmptyInputError(
        f'no *.tar.zst shards in {relative} or data/{relative}', path=root)
  return found


class Builder(builder_base.RLDSBuilder):
  """il-representations processed datasets (HumanCompatibleAI/il-representations)."""

  # MAGICAL's simulator cannot be installed on a current stack, so no random rollouts are
  # declared for it (configs_found still finds processed random shards made elsewhere).
  BUILDER_CONFIGS = [config_for(data_type, layout)
                     for data_type in DATA_TYPES for layout in tasks.LAYOUTS.values()
                     if not (data_type == 'random' and layout.benchmark == tasks.MAGICAL)]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Pass il-representations' data root as --manual_dir: a config reads the *.tar.zst shards in
  processed/<type>/<benchmark>/<task>/ (or data/processed/...), as mkdataset_demos and
  mkdataset_random write them, e.g. processed/demos/atari/PongNoFrameskip-v4/demos.tar.zst. The
  authors' test shards are tests/data/processed/ of HumanCompatibleAI/il-representations at commit
  c2bdbe1d884f54c28c3103584720270b6915bfdc.
  """

  def _info(self) -> tfds.core.DatasetInfo:
    layout = self.builder_config.layout
    if layout.discrete:
      action = features.scalar(np.int64, doc=f'Discrete action (0-{layout.num_actions - 1}).')
    else:
      action = features.tensor((layout.action_dim,), np.float32, doc='Continuous action in [-1, 1].')
    step_metadata = {}
    if layout.has_internal_state:
      step_metadata[il_representations.INTERNAL_STATE] = features.tensor(
          (None,), np.float64, doc='Physics state (qpos, qvel) from infos; zeros on the final step.')
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.tensor(
                layout.observation_shape, np.uint8,
                doc=f'Frame stack, channels first, as the shard stores it ({layout.color_space}).'),
            action=action,
            reward=features.scalar(np.float64, doc='rews; 0 where has_rewards is False.'),
            step_metadata=step_metadata,
            observation_is_copy=il_representations.SEMANTICS[layout.benchmark].policy.marks_copies,
            episode_metadata={
                'task_name': features.text(doc='env_cfg task_name.'),
                'env_cfg': features.text(doc='The shard\'s env_cfg (JSON).'),
                'has_rewards': features.scalar(
                    np.bool_, doc='False: the shard holds no rews (reward is a placeholder 0).'),
                'shard_file': features.text(doc='Shard path below manual_dir.'),
                'episode_in_shard': features.scalar(np.int64, doc='Index of the episode in it.'),
            }),
        supervised_keys=None,
        # Shard order is trajectory order (il-representations takes the first n_trajs): keep it.
        disable_shuffling=True,
        homepage='https://github.com/HumanCompatibleAI/il-representations',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = pathlib.Path(dl_manager.manual_dir)
    paths = shard_paths(root, self.builder_config)
    return {'train': progress.expect(self._generate_examples(root, paths),
                                     progress.Totals(files=len(paths)))}

  def _generate_examples(self, root, paths):
    layout = self.builder_config.layout
    for path in progress.files(paths):
      shard = il_representations.open_shard(path)  # One episode in memory at a time.
      env_cfg = dict(shard.metadata.get('env_cfg', {}))
      with errors.located(path):
        found = (env_cfg.get('benchmark_name'), env_cfg.get('task_name'))
        if found != (layout.benchmark, layout.task):
          raise errors.SchemaError(f'shard is for {found[0]}/{found[1]}, not {layout.benchmark}/'
                                   f'{layout.task}', field='env_cfg')
        for index, trajectory in enumerate(shard.trajectories):
          shape = tuple(np.shape(trajectory.observations)[1:])
          if shape != layout.observation_shape:
            raise errors.SchemaError(f'observations of shape {shape}, expected '
                                     f'{layout.observation_shape}', field='obs')
          episode = episodes.to_episode(trajectory)
          metadata = {'env_cfg': json.dumps(env_cfg),
                      'has_rewards': shard.has_rewards,
                      'shard_file': str(path.relative_to(root)), 'episode_in_shard': index}
          yield f'{path.relative_to(root)}/{index}', {
              **episode.as_example(), **metadata}
