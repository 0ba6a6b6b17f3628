"""il-representations' native procgen demos (`demo_<game>.pickle`) as RLDS, one config per game."""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.readers import ilr_procgen
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features


@dataclasses.dataclass
class ProcgenConfig(tfds.core.BuilderConfig):
  game: str = ''


class Builder(builder_base.RLDSBuilder):
  """il-representations procgen demos (HumanCompatibleAI/il-representations)."""

  BUILDER_CONFIGS = [
      ProcgenConfig(name=game, game=game, description=f'procgen-{game}-v0 demos '
                    f'(demo_{game}.pickle).')
      for game in ilr_procgen.GAMES
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Put il-representations' procgen demo files in --manual_dir: a config reads demo_<game>.pickle
  (its procgen_demo_paths: procgen/demo_coinrun.pickle ...), at any depth.
  """

  def _info(self) -> tfds.core.DatasetInfo:
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.image(ilr_procgen.OBSERVATION_SHAPE,
                                       doc='64x64 RGB frame (PNG, lossless).'),
            action=features.scalar(np.int64, doc='procgen combo action (0-14).'),
            reward=features.scalar(np.float32, doc='Reward earned by the action.'),
            episode_metadata={
                'source_file': features.text(doc='Demo file name.'),
                'trajectory_index': features.scalar(np.int64, doc='Index in the file\'s lists.'),
                'episode_in_trajectory': features.scalar(
                    np.int64, doc='Index of the episode within the recorded trajectory.'),
            },
            observation_is_copy=ilr_procgen.POLICY.marks_copies),
        supervised_keys=None,
        homepage='https://github.com/HumanCompatibleAI/il-representations',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = pathlib.Path(dl_manager.manual_dir)
    paths = ilr_procgen.demo_paths(root, self.builder_config.game)
    return {'train': progress.expect(self._generate_examples(root, paths),
                                     progress.Totals(files=len(paths)))}

  def _generate_examples(self, root, paths):
    for path in progress.files(paths):
      for trajectory in ilr_procgen.read_trajectories(path):
        with errors.located(path):
          episode = episodes.to_episode(trajectory)
        key = (f'{path.relative_to(root)}/{int(episode.metadata["trajectory_index"])}/'
               f'{int(episode.metadata["episode_in_trajectory"])}')
        yield key, episode.as_example()
