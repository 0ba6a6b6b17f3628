"""d4rl-pybullet datasets (takuseno/d4rl-pybullet) as RLDS: one config per task and dataset."""

from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow_datasets as tfds

from rlds_suite.tfds import builder_base
from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.tfds import features
from rlds_suite.readers import d4rl_pybullet
from rlds_suite.readers import files


@dataclasses.dataclass
class D4RLPybulletConfig(tfds.core.BuilderConfig):
  task: Optional[d4rl_pybullet.Task] = None
  collection: str = ''

  @property
  def file_name(self) -> str:
    return f'{self.name}.hdf5'


def _links() -> str:
  return '\n'.join(f'  {name}: {url}' for name, url in d4rl_pybullet.URLS.items())


class Builder(builder_base.RLDSBuilder):
  """d4rl-pybullet v0 (hopper, halfcheetah, ant, walker2d x random, medium, mixed)."""

  BUILDER_CONFIGS = [
      D4RLPybulletConfig(name=d4rl_pybullet.dataset_id(task, collection), task=task,
                         collection=collection,
                         description=f'd4rl-pybullet {d4rl_pybullet.dataset_id(task, collection)}.')
      for task in d4rl_pybullet.TASKS
      for collection in d4rl_pybullet.COLLECTIONS
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = f"""
  Download the config's file from its Dropbox link (d4rl_pybullet/__init__.py; no checksums are
  published, so it is not downloaded automatically), keep its name (e.g. hopper-bullet-medium-v0.hdf5)
  and pass its folder as --manual_dir:
{_links()}
  """

  def _info(self) -> tfds.core.DatasetInfo:
    layout = d4rl_pybullet.layout(self.builder_config.task)
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.tensor(layout.observation.shape, layout.observation.dtype),
            action=features.tensor(layout.action.shape, layout.action.dtype),
            reward=features.scalar(layout.reward.dtype,
                                   doc='Reward earned by the action (shifted from arrival).')),
        supervised_keys=None,
        homepage='https://github.com/takuseno/d4rl-pybullet',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    try:
      manual_dir = dl_manager.manual_dir
    except AssertionError as e:  # TFDS: the manual dir is missing or empty.
      raise errors.EmptyInputError(f'no input files: {e}') from e
    path = files.find_files(manual_dir, self.builder_config.file_name)[0]
    return {'train': progress.expect(self._generate_examples(path),
                                     d4rl_pybullet.expected_totals(path))}

  def _generate_examples(self, path):
    trajectories = d4rl_pybullet.read_trajectories(path, self.builder_config.task)
    for index, trajectory in enumerate(trajectories):
      yield index, episodes.to_episode(trajectory).as_example()
