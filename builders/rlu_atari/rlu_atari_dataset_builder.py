"""RL Unplugged Atari (atari_episodes_ordered) as RLDS: one config per game and run."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterator

import tensorflow_datasets as tfds

from rlds_suite.core import episodes
from rlds_suite import scores
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.core import spaces
from rlds_suite.readers import rl_unplugged
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features
from rlds_suite.tfds import tfrecord_episodes


@dataclasses.dataclass
class RLUAtariConfig(tfds.core.BuilderConfig):
  game: str = 'Pong'
  run: int = 1


def _examples(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
  """(key, example) of every episode in one shard; key = checkpoint_episode, as TFDS's builder."""
  with errors.located(path):
    for parsed in tfrecord_episodes.read_examples(path, tfrecord_episodes.atari_spec()):
      parsed['observations'] = tfrecord_episodes.decode_frames(parsed['observations'],
                                                               rl_unplugged.ATARI_FRAME_SHAPE)
      trajectory = rl_unplugged.atari_trajectory(parsed)
      key = f'{trajectory.metadata["checkpoint_id"]}_{trajectory.metadata["episode_id"]}'
      yield key, episodes.to_episode(trajectory).as_example()


class Builder(rlds_beam.WorkerWrittenBuilder, builder_base.RLDSBuilder):
  """RL Unplugged Atari: 46 games x 5 runs of DQN replay episodes (GZIP TFRecord shards).

  Registered as `rlds_suite_rlu_atari`: TFDS registers its own `rlu_atari` builder.
  """
  name = 'rlds_suite_rlu_atari'

  BUILDER_CONFIGS = [
      RLUAtariConfig(name=f'{game}_run_{run}', game=game, run=run,
                     description=f'RL Unplugged Atari {game} run {run}.')
      for game in rl_unplugged.ATARI_GAMES for run in range(1, 6)
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Copy the run's shards into --manual_dir as GAME/run_R-0000i-of-000NN, e.g.
    gsutil -m cp 'gs://rl_unplugged/atari_episodes_ordered/Pong/run_1-*' MANUAL_DIR/Pong/
  (50 shards a run; 49 for Carnival, Gravitar and StarGunner).
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
            observation=features.image(rl_unplugged.ATARI_FRAME_SHAPE,
                                       doc='Grayscale frame (no frame stack).'),
            action=features.scalar('int64'),
            reward=features.scalar('float32', doc='Unclipped game reward earned by the action.'),
            step_metadata={'clipped_reward': features.scalar(
                'float32', doc='The reward clipped to [-1, 1], as DQN trained on it.')},
            episode_metadata={
                'episode_id': features.scalar('int64'),
                'checkpoint_id': features.scalar('int64'),
                'episode_return': features.scalar(
                    'float32', doc="The file's episode_return: the sum of unclipped rewards."),
                'clipped_episode_return': features.scalar(
                    'float32', doc='The sum of clipped rewards.'),
            },
            observation_is_copy=rl_unplugged.ATARI_POLICY.marks_copies),
        metadata=tfds.core.MetadataDict(game=cfg.game, run=cfg.run,
                                        **scores.atari_metadata(cfg.game),
                                        **spaces.as_metadata(action=spaces.ATARI_ACTIONS)),
        homepage='https://github.com/deepmind/deepmind-research/tree/master/rl_unplugged',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    cfg = self.builder_config
    names = rl_unplugged.atari_shard_names(cfg.game, cfg.run)
    if self._num_shards is not None:
      names = [f'{cfg.game}/run_{cfg.run}-{i:05d}-of-{self._num_shards:05d}'
               for i in range(self._num_shards)]
    paths = tfrecord_episodes.shard_paths(dl_manager.manual_dir, names)
    return {'train': self._generate_examples([os.fspath(p) for p in paths])}

  def _generate_examples(self, paths: list[str]):
    if self._beam:
      return rlds_beam.per_file(paths, _examples)
    found = (example for path in progress.files(paths) for example in _examples(path))
    return progress.expect(found, progress.Totals(files=len(paths)))
