"""DQN Replay Dataset (batch_rl logs of dopamine DQN runs) as RLDS: one config per game and run."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, Iterator, Optional

from etils import epath
import tensorflow_datasets as tfds

from rlds_suite.core import episodes
from rlds_suite import scores
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.core import spaces
from rlds_suite.readers import dqn_replay
from rlds_suite.readers import dqn_replay_spans
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features


@dataclasses.dataclass
class DQNReplayConfig(tfds.core.BuilderConfig):
  """One run of one game; `checkpoints` = (first, last), inclusive, or None for every one present."""
  game: str = 'Pong'
  run: int = 1
  checkpoints: Optional[tuple[int, int]] = None

  @property
  def wanted(self) -> Optional[list[int]]:
    if self.checkpoints is None:
      return None
    first, last = self.checkpoints
    return list(range(first, last + 1))


def config(game: str, run: int, first: Optional[int] = None,
           last: Optional[int] = None) -> DQNReplayConfig:
  """The config of `game` run `run`, all checkpoints or checkpoints first..last (inclusive)."""
  if game not in dqn_replay.GAMES or run not in dqn_replay.RUNS:
    raise ValueError(f'no DQN Replay run {game} {run}: games are {dqn_replay.GAMES}, runs 1-5')
  name = f'{game}-run{run}'
  checkpoints = None
  if first is not None or last is not None:
    first = 0 if first is None else first
    last = dqn_replay.NUM_CHECKPOINTS - 1 if last is None else last
    checkpoints = (first, last)
    name += f'-ckpt{first}-{last}'
  return DQNReplayConfig(name=name, game=game, run=run, checkpoints=checkpoints,
                         description=f'DQN Replay {game} run {run}, checkpoints '
                                     f'{"all" if checkpoints is None else f"{first}-{last}"}.')


def _example(trajectory: episodes.Trajectory) -> tuple[int, dict[str, Any]]:
  """(key, TFDS example): frames get their channel axis; the key is the first step's add index."""
  final = trajectory.final_observation
  trajectory = dataclasses.replace(trajectory, observations=trajectory.observations[..., None],
                                   final_observation=None if final is None else final[..., None])
  return trajectory.metadata['first_add_index'], episodes.to_episode(trajectory).as_example()


def _span_examples(spans: list[dqn_replay_spans.Span], replay_logs: str,
                   wanted: Optional[list[int]]) -> Iterator[tuple[int, dict[str, Any]]]:
  """A work item's examples: its episodes read one at a time."""
  with errors.located(replay_logs):
    for trajectory in dqn_replay_spans.read_spans(replay_logs, spans, wanted):
      yield _example(trajectory)


def _beam_split(replay_logs: str, wanted: Optional[list[int]], item_rows: int,
                workers: int = 1) -> rlds_beam.WorkerWritten:
  """Work items of whole episodes found from the terminal files: about `item_rows` rows each, and
  a multiple of `workers` items. (A worker inflates a file from its start up to its item: fewer,
  larger items inflate less twice.)"""
  with errors.located(replay_logs):
    spans = dqn_replay_spans.episode_spans(dqn_replay.Run(replay_logs), wanted)
  rows = sum(len(s) for s in spans)
  count = -(-rows // max(item_rows, 1))
  items = dqn_replay_spans.work_items(spans, -(-count // workers) * workers)
  totals = _totals(spans)
  return rlds_beam.WorkerWritten(
      items, functools.partial(_span_examples, replay_logs=replay_logs, wanted=wanted),
      total_steps=totals.steps, total_episodes=totals.episodes)


def _totals(spans: list[dqn_replay_spans.Span]) -> progress.Totals:
  """The episodes and steps of `spans`: their rows less the padding, and the final step."""
  rows = sum(len(s) for s in spans)
  return progress.Totals(episodes=len(spans),
                         steps=rows - len(spans) * (dqn_replay.POLICY.padding_rows - 1))


class Builder(rlds_beam.WorkerWrittenBuilder, builder_base.RLDSBuilder):
  """DQN Replay: 60 Atari games x 5 runs of batch_rl's logged replay (checkpoint ranges by config)."""

  BUILDER_CONFIGS = [config(game, run) for game in dqn_replay.GAMES for run in dqn_replay.RUNS]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Copy a run's logs into --manual_dir as GAME/RUN/replay_logs/, e.g.
    gsutil -m cp -R gs://atari-replay-datasets/dqn/Pong/1 MANUAL_DIR/Pong/
  (`dqn_replay.urls(game, run, checkpoint)` lists the https URLs of one checkpoint's files). A
  checkpoint range (`config(game, run, first, last)`) needs checkpoints first-1 (its terminal and
  add_count files tell where the first episode starts) to last+1 (where the last one ends) when
  they exist.
  """

  # Beam work items: runs of whole episodes of at most about this many rows (a worker holds one
  # episode at a time, whatever the item's size).
  beam_item_rows = 1_000_000

  def __init__(self, *, beam: bool = True, **kwargs: Any):
    """`beam=False` generates in this process (one pass over the files) instead of with Beam."""
    self._beam = beam
    super().__init__(**kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    cfg = self.builder_config
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.image((84, 84, 1), doc='One grayscale frame (no frame stack).'),
            action=features.scalar('int32'),
            reward=features.scalar(
                'float32', doc='Clipped to [-1, 1]: dopamine stored rewards after clipping; the '
                'game score is not in the files.'),
            episode_metadata={
                'checkpoint': features.scalar('int64', doc='Checkpoint of the first step.'),
                'first_add_index': features.scalar(
                    'int64', doc="The first step's index in the run's add order."),
            },
            observation_is_copy=dqn_replay.POLICY.marks_copies),
        metadata=tfds.core.MetadataDict(game=cfg.game, run=cfg.run,
                                        checkpoints=list(cfg.checkpoints or []),
                                        **scores.atari_metadata(cfg.game),
                                        **spaces.as_metadata(action=spaces.ATARI_ACTIONS)),
        homepage='https://research.google/tools/datasets/dqn-replay/',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    cfg = self.builder_config
    replay_logs = epath.Path(dl_manager.manual_dir) / cfg.game / str(cfg.run) / 'replay_logs'
    return {'train': self._generate_examples(os.fspath(replay_logs))}

  def _generate_examples(self, replay_logs: str):
    wanted = self.builder_config.wanted
    if self._beam:
      return _beam_split(replay_logs, wanted, self.beam_item_rows, self.beam_workers)
    with errors.located(replay_logs):  # The terminal files alone: 1 byte a row.
      spans = dqn_replay_spans.episode_spans(dqn_replay.Run(replay_logs), wanted)
    # The spans (read_run's episodes, tests/test_readers_dqn_replay_spans.py) are read each into
    # one array per field: read_run's blocks would be joined into episodes, a copy of every frame.
    return progress.expect(_span_examples(spans, replay_logs, wanted), _totals(spans))
