"""MAGICAL reference demonstrations as RLDS (one config per MAGICAL task)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.tfds import builder_base
from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.tfds import features
from rlds_suite.readers import magical


@dataclasses.dataclass
class MagicalConfig(tfds.core.BuilderConfig):
  task: str = ''


def _snake(name: str) -> str:
  return re.sub(r'(?<!^)(?=[A-Z])', '_', name).lower()


class Builder(builder_base.RLDSBuilder):
  """MAGICAL reference demos (qxcv/magical-data)."""

  BUILDER_CONFIGS = [
      MagicalConfig(name=_snake(task), task=task, description=f'{task}-Demo-v0 reference demos.')
      for task in magical.TASKS
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download https://github.com/qxcv/magical-data/archive/master.zip (the archive MAGICAL's
  `try_download_demos` fetches; its content changes with the branch, so it has no fixed checksum),
  unzip it and pass the directory as --manual_dir (or unzip it into <data_dir>/downloads/manual).
  Each config reads every file named demo-<Task>-Demo-v0-*.pkl.gz found anywhere below that
  directory (gzip'd pickles of MILBenchTrajectory); the archive lays them out as
    magical-data-master/move-to-region/demo-MoveToRegion-Demo-v0-000.pkl.gz
    magical-data-master/move-to-region/demo-MoveToRegion-Demo-v0-001.pkl.gz ...
  Configs and the <Task> they read: """ + ', '.join(
      f'{_snake(task)}: {task}' for task in magical.TASKS) + '.\n'

  def _info(self) -> tfds.core.DatasetInfo:
    view = lambda name: features.image(magical.IMAGE_SHAPE, doc=f'{name} view, RGB.')
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=tfds.features.FeaturesDict({
                'allo': view('Allocentric (top-down, fixed)'),
                'ego': view('Egocentric (follows the robot)'),
            }),
            action=features.scalar(np.int64, doc='MAGICAL flat action id (0-17).'),
            reward=features.scalar(np.float32, doc='Always 0 in MAGICAL.'),
            step_metadata={
                'eval_score': features.scalar(np.float32,
                                              doc='Per-step eval score from info.'),
            },
            episode_metadata={
                'score': features.scalar(np.float32, doc='Final score of the demo in [0, 1].'),
                'env_name': features.text(doc='Gym id the demo was recorded in.'),
                'demo_file': features.text(doc='Source file name.'),
            }),
        supervised_keys=None,
        homepage='https://github.com/qxcv/magical',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    paths = magical.demo_paths(dl_manager.manual_dir, self.builder_config.task)
    return {'train': progress.expect(self._generate_examples(paths),
                                     progress.Totals(episodes=len(paths)))}

  def _generate_examples(self, paths):
    for path in paths:
      with errors.located(path):
        episode = episodes.to_episode(magical.read_demo(path))
      yield path.name, episode.as_example()
