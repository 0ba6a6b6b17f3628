"""D4RL families beyond gym-mujoco: AntMaze (v0, v2), Maze2D, Adroit (v0, v1), Kitchen.

The files are D4RL's flat HDF5 tables (`readers/d4rl.py` reads them); what differs per family is
what the flags mean, read from each family's generation code in D4RL's scripts/generation/:

* AntMaze (generate_ant_maze_datasets.py, then relabel_antmaze_rewards.py): the ant is reset when
  `ts >= max_episode_steps` (1001 rows per episode) or the env says done (the ant flipped). v2's
  generator records the time limit in `timeouts` and the env's done in `terminals`; the v0-era one
  (scripts/generate_ant_maze_datasets.py at D4RL commit bb001e9) records both in `terminals` and
  writes no `timeouts` (the released v0 files carry timeouts from no published script, known not to
  line up with the resets: D4RL issue #77). The relabelling then overwrites `terminals` and
  `rewards` with "row t+1 is within 0.5 of the goal", where the ant was not reset. So episodes are
  cut where the ant's x-y position jumps (`episodes.jump_ends`, more than `ANTMAZE_JUMP` in one
  step) and, in v2 only, after stored timeouts; every episode is truncated, and `terminals` are
  kept as the step field `goal_reached`. v0's stored timeouts are only compared.
* Maze2D (generate_maze2d_datasets.py): `terminals` is the waypoint controller's done (goal reached,
  or `ts >= max_episode_steps`), after which a new target is set without resetting the point mass:
  episodes end there and are truncated (no absorbing state). The generator does not refresh `s` after
  a goal switch, so each episode's first observation repeats the previous episode's last one (its
  `infos/qpos` hold the true state); kept as written.
* Adroit (hand_dapg_demos.py, hand_dapg_policies.py, hand_dapg_combined.py): `timeouts` end each
  demonstration or rollout, `terminals` are the env's own done (pen drops): the standard D4RL rule
  (`d4rl.episode_rows`), terminated iff `terminals` is set.
* Kitchen (generate_kitchen_datasets.py): demonstrations concatenated, `terminals` set on each demo's
  last row, no `timeouts`; the demos end because the recording ends, so each is truncated. Rows hold
  the score of their own observation o_t as reward (not of o_t+1), as written.

Episode boundary rules themselves live in `rlds_suite.core.episodes`; here each family declares
which one it uses.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Iterator, Mapping, Optional

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import nested
from rlds_suite.core import progress
from rlds_suite.core.episodes import BoundaryPolicy, EndingRule, FinalObservation, Trajectory
from rlds_suite.readers import d4rl
from rlds_suite.readers.d4rl import Layout, Spec

URL_ROOT = 'http://rail.eecs.berkeley.edu/datasets/offline_rl/'
# An ant moves well under 1.0 (x-y units) in one 0.05 s step; resets move it to another maze cell
# (cells are 4.0 apart). Resets that land within 1.0 of where the ant was are not detected. D4RL's
# own scripts/check_antmaze_datasets.py counts resets as jumps over 5.0, which misses resets into a
# neighbouring cell.
ANTMAZE_JUMP = 1.0
GOAL_REACHED = 'goal_reached'

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


class Cut(enum.Enum):
  """Where a family's episodes end."""
  STORED_FLAGS = 'stored_flags'  # After rows with terminals or timeouts set.
  POSITION_JUMPS = 'position_jumps'  # Where the position (observation[:, :2]) jumps: resets.


@dataclasses.dataclass(frozen=True)
class Family:
  """A family's declared boundary semantics (see the module docstring for each)."""
  name: str
  cut: Cut
  ending_rule: EndingRule  # TERMINAL_FLAG (Adroit) or ALWAYS_TRUNCATED.
  rule: str  # One line for the dataset metadata and README.
  terminals_field: Optional[str] = None  # Keep `terminals` as this step field (not episode ends).
  timeouts_end_episodes: bool = True  # POSITION_JUMPS: stored timeouts are resets too (v2, not v0).

  @property
  def policy(self) -> BoundaryPolicy:
    return BoundaryPolicy(final_observation=FinalObservation.NOT_STORED,
                          ending_rule=self.ending_rule)


ANTMAZE_V0 = Family(
    'antmaze', Cut.POSITION_JUMPS, EndingRule.ALWAYS_TRUNCATED, terminals_field=GOAL_REACHED,
    timeouts_end_episodes=False,
    rule=f'cut where the ant x-y position jumps by more than {ANTMAZE_JUMP} (a reset); all '
         'truncated; terminals kept as goal_reached; stored timeouts compared, not used')
ANTMAZE_V2 = dataclasses.replace(
    ANTMAZE_V0, timeouts_end_episodes=True,
    rule=f'cut after timeouts and where the ant x-y position jumps by more than {ANTMAZE_JUMP} (a '
         'reset after the env\'s done); all truncated; terminals kept as goal_reached')
MAZE2D = Family(
    'maze2d', Cut.STORED_FLAGS, EndingRule.ALWAYS_TRUNCATED,
    rule='cut after terminals (goal reached or time limit, then a new target without reset); '
         'all truncated')
ADROIT = Family(
    'adroit', Cut.STORED_FLAGS, EndingRule.TERMINAL_FLAG,
    rule='cut after terminals or timeouts; terminated iff terminals')
KITCHEN = Family(
    'kitchen', Cut.STORED_FLAGS, EndingRule.ALWAYS_TRUNCATED,
    rule='cut after terminals (the last row of each demonstration); all truncated')


@dataclasses.dataclass(frozen=True)
class Dataset:
  """One released file: its D4RL name (gym id), family, URL and declared content."""
  name: str
  family: Family
  url: str
  layout: Layout

  @property
  def file_name(self) -> str:
    return self.url.rsplit('/', 1)[-1]


def _antmaze_datasets() -> list[Dataset]:
  layout = Layout(observation=Spec((29,), _F32), action=Spec((8,), _F32),
                  infos={'goal': Spec((2,), _F32), 'qpos': Spec((15,), _F32),
                         'qvel': Spec((14,), _F32)})
  mazes = {'umaze': 'u-maze', 'medium': 'big-maze', 'large': 'hardest-maze'}
  kinds = [('umaze', '', False, False), ('umaze', '-diverse', True, True),
           ('medium', '-play', True, False), ('medium', '-diverse', True, True),
           ('large', '-play', True, False), ('large', '-diverse', True, True)]
  out = []
  for version, folder, suffix in (('v0', 'ant_maze_new', ''), ('v2', 'ant_maze_v2', '_fixed')):
    for maze, kind, multistart, multigoal in kinds:
      file = (f'Ant_maze_{mazes[maze]}_noisy_multistart_{multistart}_multigoal_{multigoal}'
              f'_sparse{suffix}.hdf5')
      family = ANTMAZE_V0 if version == 'v0' else ANTMAZE_V2
      out.append(Dataset(f'antmaze-{maze}{kind}-{version}', family,
                         f'{URL_ROOT}{folder}/{file}', layout))
  return out


def _maze2d_datasets() -> list[Dataset]:
  layout = Layout(observation=Spec((4,), _F32), action=Spec((2,), _F32),
                  infos={'goal': Spec((2,), _F32), 'qpos': Spec((2,), _F32),
                         'qvel': Spec((2,), _F32)})
  out = []
  for dense in ('', '-dense'):
    for maze, version in (('open', 'v0'), ('umaze', 'v1'), ('medium', 'v1'), ('large', 'v1')):
      file = (f'maze2d-{maze}{"-dense" if dense else "-sparse"}'
              f'{"" if version == "v0" else "-" + version}.hdf5')
      out.append(Dataset(f'maze2d-{maze}{dense}-{version}', MAZE2D,
                         f'{URL_ROOT}maze2d/{file}', layout))
  return out


@dataclasses.dataclass(frozen=True)
class _Hand:
  name: str
  observation: int
  action: int
  qpos: int
  qvel: int
  body: Mapping[str, tuple[int, ...]]  # infos written from the env state (v1), TFDS's key table.


_HANDS = (
    _Hand('door', 39, 28, 30, 30, {'door_body_pos': (3,)}),
    _Hand('hammer', 46, 26, 33, 33, {'board_pos': (3,), 'target_pos': (3,)}),
    _Hand('pen', 45, 24, 30, 30, {'desired_orien': (4,)}),
    _Hand('relocate', 39, 30, 36, 36, {'hand_qpos': (30,), 'obj_pos': (3,), 'palm_pos': (3,),
                                       'target_pos': (3,)}),
)


def _adroit_datasets() -> list[Dataset]:
  out = []
  for hand in _HANDS:
    for kind in ('human', 'cloned', 'expert'):
      for version in ('v0', 'v1'):
        # v0-cloned (hand_dapg_combined.py over float64 BC rollouts) is float64 except actions.
        f = _F64 if (version, kind) == ('v0', 'cloned') else _F32
        infos: dict[str, Any] = {'qpos': Spec((hand.qpos,), f), 'qvel': Spec((hand.qvel,), f)}
        if version == 'v1':
          infos.update({key: Spec(shape, f) for key, shape in hand.body.items()})
        if kind == 'expert':  # hand_dapg_policies.py: the policy's mean and log-std per step.
          log_std = 'action_logstd' if version == 'v0' else 'action_log_std'
          infos.update({'action_mean': Spec((hand.action,), f), log_std: Spec((hand.action,), f)})
        if version == 'v0':
          file = {'human': f'{hand.name}-v0_demos_clipped', 'cloned': f'{hand.name}-demos-v0-bc-combined',
                  'expert': f'{hand.name}-v0_expert_clipped'}[kind]
          url = f'{URL_ROOT}hand_dapg/{file}.hdf5'
        else:
          url = f'{URL_ROOT}hand_dapg_v1/{hand.name}-{kind}-v1.hdf5'
        layout = Layout(observation=Spec((hand.observation,), f), action=Spec((hand.action,), _F32),
                        reward=Spec((), f), infos=infos)
        out.append(Dataset(f'{hand.name}-{kind}-{version}', ADROIT, url, layout))
  return out


def _kitchen_datasets() -> list[Dataset]:
  layout = Layout(observation=Spec((60,), _F32), action=Spec((9,), _F32))
  files = {'complete': 'mini_kitchen_microwave_kettle_light_slider-v0',
           'partial': 'kitchen_microwave_kettle_light_slider-v0',
           'mixed': 'kitchen_microwave_kettle_bottomburner_light-v0'}
  return [Dataset(f'kitchen-{kind}-v0', KITCHEN, f'{URL_ROOT}kitchen/{file}.hdf5', layout)
          for kind, file in files.items()]


DATASETS: tuple[Dataset, ...] = tuple(
    _antmaze_datasets() + _maze2d_datasets() + _adroit_datasets() + _kitchen_datasets())


@dataclasses.dataclass(frozen=True)
class BoundaryCounts:
  """How a file's episode ends were found, for the dataset metadata."""
  episodes: int
  inferred_ends: int  # Ends found by a declared rule, not by a stored flag (AntMaze jumps).
  stored_timeouts: int  # -1: the file has no timeouts.
  stored_timeouts_at_ends: int  # Stored timeouts that fall on an episode end.

  def as_metadata(self) -> dict[str, int]:
    return dataclasses.asdict(self)


def episode_rows(table: d4rl.Table, family: Family) -> tuple[list[slice], BoundaryCounts]:
  """The rows of each episode under the family's declared rule, and how they were found."""
  if family.cut is Cut.POSITION_JUMPS:
    jumps = episodes.jump_ends(table.observations[:, :2], ANTMAZE_JUMP)
    recorded = np.zeros_like(jumps)
    if family.timeouts_end_episodes and table.timeouts is not None:
      recorded = table.timeouts
    ends = jumps | recorded
    inferred = int((jumps & ~recorded).sum())
  else:
    if family.ending_rule is EndingRule.TERMINAL_FLAG and table.timeouts is None:
      # Time-limit ends are recorded only there: without them, episodes would run together.
      raise errors.SchemaError(f'{family.name} files end every episode with timeouts; this one has '
                               'none', field='timeouts')
    ends = episodes.episode_ends(table.terminals, table.timeouts)
    inferred = 0
  rows = episodes.split_rows(ends)  # Rows after the last end: an unfinished, truncated episode.
  timeouts = table.timeouts
  counts = BoundaryCounts(
      episodes=len(rows), inferred_ends=inferred,
      stored_timeouts=-1 if timeouts is None else int(timeouts.sum()),
      stored_timeouts_at_ends=0 if timeouts is None else int((timeouts & ends).sum()))
  return rows, counts


def expected_totals(path: errors.PathLike, dataset: Dataset) -> progress.Totals:
  """The episodes and steps `read(path, dataset)` yields, from the stored flags alone (a build's
  progress totals); UNKNOWN for families cut where positions jump (that needs the observations)
  or where the file cannot say."""
  family = dataset.family
  if family.cut is not Cut.STORED_FLAGS:
    return progress.UNKNOWN
  try:
    terminals, timeouts = d4rl.read_flags(path)
  except errors.RLDSSuiteError:
    return progress.UNKNOWN
  if family.ending_rule is EndingRule.TERMINAL_FLAG and timeouts is None:
    return progress.UNKNOWN  # `episode_rows` refuses the file.
  return d4rl.rows_totals(episodes.split_rows(episodes.episode_ends(terminals, timeouts)))


def trajectories(table: d4rl.Table, family: Family,
                 rows: Optional[list[slice]] = None) -> Iterator[Trajectory]:
  """The episodes of a table under the family's rule, in file order."""
  if rows is None:
    rows, _ = episode_rows(table, family)
  policy = family.policy
  for episode in rows:
    step_metadata: dict[str, Any] = {}
    if table.infos:
      step_metadata[d4rl.INFOS] = nested.take_rows(table.infos, episode)
    if family.terminals_field:
      step_metadata[family.terminals_field] = table.terminals[episode]
    yield policy.trajectory(
        table.observations[episode], table.actions[episode], table.rewards[episode],
        terminal_flag=bool(table.terminals[episode.stop - 1]),
        step_metadata=step_metadata or None, metadata=table.metadata)


def read(path: errors.PathLike, dataset: Dataset) -> tuple[Iterator[Trajectory], BoundaryCounts]:
  """Reads one released file: its episodes (an iterator) and how their ends were found."""
  table = d4rl.read_table(path, dataset.layout)
  with errors.located(path):
    rows, counts = episode_rows(table, dataset.family)
  return _located(path, trajectories(table, dataset.family, rows)), counts


def _located(path: errors.PathLike, items: Iterator[Trajectory]) -> Iterator[Trajectory]:
  with errors.located(path):
    yield from items
