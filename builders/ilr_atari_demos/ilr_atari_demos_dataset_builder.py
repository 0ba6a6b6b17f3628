"""il-representations' native Atari demos (`.npz`, object array `arr_0`) as RLDS, one config per game."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Optional

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.readers import ilr_atari
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features


@dataclasses.dataclass
class AtariConfig(tfds.core.BuilderConfig):
  game: Optional[ilr_atari.Game] = None


def config_for(env_id: str) -> AtariConfig:
  """A config for any `*NoFrameskip-v4` game: tfds.builder('ilr_atari_demos', config=...)."""
  game = ilr_atari.Game.of(env_id)
  return AtariConfig(name=env_id[:-len('NoFrameskip-v4')].lower(), game=game,
                     description=f'{env_id} demos ({game.file_pattern}).')


class Builder(builder_base.RLDSBuilder):
  """il-representations Atari demos (HumanCompatibleAI/il-representations)."""

  BUILDER_CONFIGS = [config_for(game.env_id) for game in ilr_atari.GAMES.values()]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Put il-representations' Atari demo files in --manual_dir: a config reads the .npz files whose
  name contains its game (pong.npz, PongNoFrameskip-v4_rollouts_500_ts_100_traj.npz), at any depth.
  Example: tests/data/atari/pong.npz of HumanCompatibleAI/il-representations at commit
  d5dcd1f2b21c00143aa2758c72c9060d28ad00f8. Other games: config=config_for('<Game>NoFrameskip-v4').
  """

  def _info(self) -> tfds.core.DatasetInfo:
    env_id = self.builder_config.game.env_id
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.tensor(
                ilr_atari.OBSERVATION_SHAPE, np.uint8,
                doc='Four 84x84 grayscale frames, oldest first (channels last, as recorded); '
                'zeros before the episode\'s first frame.'),
            action=features.scalar(np.int64, doc=f'{env_id} discrete action.'),
            reward=features.scalar(np.float32,
                                   doc='Not recorded in these demos: always 0, has_rewards=False.'),
            episode_metadata={
                'source_file': features.text(doc='Demo file name.'),
                'trajectory_index': features.scalar(np.int64, doc='Index in arr_0.'),
                'episode_in_trajectory': features.scalar(
                    np.int64, doc='Index of the episode within the recorded trajectory.'),
                'has_rewards': features.scalar(
                    np.bool_, doc='False: the demos hold no rewards (reward is a placeholder).'),
            },
            observation_is_copy=ilr_atari.POLICY.marks_copies),
        supervised_keys=None,
        homepage='https://github.com/HumanCompatibleAI/il-representations',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = pathlib.Path(dl_manager.manual_dir)
    paths = ilr_atari.demo_paths(root, self.builder_config.game)
    return {'train': progress.expect(self._generate_examples(root, paths),
                                     progress.Totals(files=len(paths)))}

  def _generate_examples(self, root, paths):
    for path in progress.files(paths):
      for trajectory in ilr_atari.read_trajectories(path):
        with errors.located(path):
          episode = episodes.to_episode(trajectory)
        key = (f'{path.relative_to(root)}/{int(episode.metadata["trajectory_index"])}/'
               f'{int(episode.metadata["episode_in_trajectory"])}')
        yield key, episode.as_example()
