"""il-representations' native dm_control demos (gzip cloudpickle TrajectoryWithRew lists) as RLDS,
one config per task."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Optional

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.readers import ilr_dm_control
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features


@dataclasses.dataclass
class DmControlConfig(tfds.core.BuilderConfig):
  task: Optional[ilr_dm_control.Task] = None


class Builder(builder_base.RLDSBuilder):
  """il-representations dm_control demos (HumanCompatibleAI/il-representations)."""

  BUILDER_CONFIGS = [
      DmControlConfig(name=name.replace('-', '_'), task=task,
                      description=f'{task.env_id} demos ({task.file_pattern}).')
      for name, task in ilr_dm_control.TASKS.items()
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Put il-representations' dm_control demo files in --manual_dir: a config reads the files named
  *<task>-*.pkl.gz (reacher-easy-*.pkl.gz, as its dm_control_demo_patterns), at any depth.
  Example: tests/data/dm_control/reacher-easy-test.pkl.gz of HumanCompatibleAI/il-representations
  at commit d5dcd1f2b21c00143aa2758c72c9060d28ad00f8.
  """

  def _info(self) -> tfds.core.DatasetInfo:
    task = self.builder_config.task
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.tensor(
                ilr_dm_control.OBSERVATION_SHAPE, np.uint8,
                doc='100x100 RGB render, channels first (dmc2gym channels_first=True).'),
            action=features.tensor((task.action_size,), np.float32,
                                   doc=f'{task.env_id} action; 0 on the final step.'),
            reward=features.scalar(  # float64: stored exactly.
                np.float64, doc=f'Reward summed over the frame skip ({task.frame_skip}).'),
            step_metadata={
                'internal_state': features.tensor(
                    (task.state_size,), np.float64,
                    doc='infos[t]["internal_state"]: physics state (qpos, qvel) after the action; '
                    '0 on the final step.'),
            },
            episode_metadata={
                'source_file': features.text(doc='Demo file name.'),
                'trajectory_index': features.scalar(np.int64, doc='Index in the file\'s list.'),
            }),
        supervised_keys=None,
        homepage='https://github.com/HumanCompatibleAI/il-representations',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = pathlib.Path(dl_manager.manual_dir)
    paths = ilr_dm_control.demo_paths(root, self.builder_config.task)
    return {'train': progress.expect(self._generate_examples(root, paths),
                                     progress.Totals(files=len(paths)))}

  def _generate_examples(self, root, paths):
    for path in progress.files(paths):
      for trajectory in ilr_dm_control.read_trajectories(path, self.builder_config.task):
        with errors.located(path):
          episode = episodes.to_episode(trajectory)
        yield (f'{path.relative_to(root)}/{int(episode.metadata["trajectory_index"])}',
               episode.as_example())
