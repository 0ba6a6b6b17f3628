"""d4rl-pybullet datasets (takuseno/d4rl-pybullet): D4RL-style HDF5 files of PyBullet locomotion.

Datasets: observations (N, obs), actions (N, act), rewards (N, 1), terminals (N, 1); nothing else.
The writer (d4rl_pybullet/collect.py) appends [obs_t, act_t, [rew_t], [ter_t]] before stepping, so
row t holds the reward received on arriving at obs_t (0 on an episode's first row) and the done flag
of that arrival; a finished episode ends with an extra row holding its final observation, a zero
action and terminal=1. Gym's TimeLimit (max_episode_steps=1000 for every d4rl-pybullet env) also
sets done, so an episode whose 1000th action ended it is truncated, not terminated. The file is
cut at 1,000,000 rows, leaving an unfinished last episode without a terminal row (truncated).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.core.episodes import BoundaryPolicy, EndingRule, FinalObservation, RewardTiming, Trajectory
from rlds_suite.readers import d4rl

TIME_LIMIT = 1000  # max_episode_steps of every env registered in d4rl_pybullet/__init__.py.

POLICY = BoundaryPolicy(final_observation=FinalObservation.LAST_ROW,
                        reward_timing=RewardTiming.ON_ARRIVAL,
                        ending_rule=EndingRule.TIME_LIMIT,
                        time_limit=TIME_LIMIT)


@dataclasses.dataclass(frozen=True)
class Task:
  """A PyBullet locomotion env (pybullet_envs.robot_locomotors) and its array sizes."""
  name: str
  observation_size: int
  action_size: int


TASKS = (
    Task('hopper', observation_size=15, action_size=3),
    Task('halfcheetah', observation_size=26, action_size=6),
    Task('ant', observation_size=28, action_size=8),
    Task('walker2d', observation_size=22, action_size=6),
)
COLLECTIONS = ('random', 'medium', 'mixed')

# Public Dropbox links, from d4rl_pybullet/__init__.py (no published checksums).
URLS = {
    'hopper-bullet-medium-v0': 'https://www.dropbox.com/s/w22kgzldn6eng7j/hopper-bullet-medium-v0.hdf5?dl=1',
    'hopper-bullet-mixed-v0': 'https://www.dropbox.com/s/xv3p0h7dzgxt8xb/hopper-bullet-mixed-v0.hdf5?dl=1',
    'hopper-bullet-random-v0': 'https://www.dropbox.com/s/bino8ojd7iq4p4d/hopper-bullet-random-v0.hdf5?dl=1',
    'halfcheetah-bullet-medium-v0': 'https://www.dropbox.com/s/v4xgssp1w968a9l/halfcheetah-bullet-medium-v0.hdf5?dl=1',
    'halfcheetah-bullet-mixed-v0': 'https://www.dropbox.com/s/scj1rqun963aw90/halfcheetah-bullet-mixed-v0.hdf5?dl=1',
    'halfcheetah-bullet-random-v0': 'https://www.dropbox.com/s/jnvpb1hp60zt2ak/halfcheetah-bullet-random-v0.hdf5?dl=1',
    'ant-bullet-medium-v0': 'https://www.dropbox.com/s/6n79kwd94xthr1t/ant-bullet-medium-v0.hdf5?dl=1',
    'ant-bullet-mixed-v0': 'https://www.dropbox.com/s/pmy3dzab35g4whk/ant-bullet-mixed-v0.hdf5?dl=1',
    'ant-bullet-random-v0': 'https://www.dropbox.com/s/2xpmh4wk2m7i8xh/ant-bullet-random-v0.hdf5?dl=1',
    'walker2d-bullet-medium-v0': 'https://www.dropbox.com/s/v0f2kz48b1hw6or/walker2d-bullet-medium-v0.hdf5?dl=1',
    'walker2d-bullet-mixed-v0': 'https://www.dropbox.com/s/i4u2ii0d85iblou/walker2d-bullet-mixed-v0.hdf5?dl=1',
    'walker2d-bullet-random-v0': 'https://www.dropbox.com/s/1gwcfl2nmx6878m/walker2d-bullet-random-v0.hdf5?dl=1',
}


def dataset_id(task: Task, collection: str) -> str:
  """The gym id and file stem, e.g. hopper-bullet-medium-v0."""
  return f'{task.name}-bullet-{collection}-v0'


def layout(task: Task) -> d4rl.Layout:
  """Observations and actions are float32 (PyBullet states, SAC/uniform actions), rewards float64
  (Python floats put through np.array by collect.py); no infos/metadata."""
  return d4rl.Layout(observation=d4rl.Spec((task.observation_size,), np.dtype(np.float32)),
                     action=d4rl.Spec((task.action_size,), np.dtype(np.float32)),
                     reward=d4rl.Spec((), np.dtype(np.float64)))


def expected_totals(path: errors.PathLike) -> progress.Totals:
  """The episodes and steps `read_trajectories` yields, from the terminals alone (a build's
  progress totals): a step per row (the first row holds the first observation), a trailing
  one-row tail yields nothing; UNKNOWN where the file cannot say."""
  try:
    terminals, _ = d4rl.read_flags(path)
  except errors.RLDSSuiteError:
    return progress.UNKNOWN
  lengths = [rows.stop - rows.start for rows in episodes.split_rows(terminals)]
  return progress.Totals(episodes=sum(n > 1 for n in lengths), steps=sum(n for n in lengths if n > 1))


def read_trajectories(path: errors.PathLike, task: Task) -> Iterator[Trajectory]:
  """Every episode of a d4rl-pybullet file in standard alignment, in file order.

  A trailing unfinished episode of a single row has no action with a known outcome and yields
  nothing. Raises EpisodeBoundaryError when the rows do not fit the writer's layout.
  """
  table = d4rl.read_table(path, layout(task))
  with errors.located(path):
    all_rows = episodes.split_rows(table.terminals)
    for rows in all_rows:  # One-row episodes are only possible for the tail, which has no terminal.
      if rows.stop - rows.start == 1 and table.terminals[rows.start]:
        raise errors.EpisodeBoundaryError(
            f'row {rows.start} is a terminal row that starts an episode (a finished episode has '
            f'at least one action row before its terminal row)', field='terminals')
    starts = np.asarray([rows.start for rows in all_rows])
    late = np.flatnonzero(table.rewards[starts] != 0)
    if len(late):
      raise errors.EpisodeBoundaryError(
          f'expected reward 0 on the first row of every episode (rewards are stored on arrival), '
          f'got non-zero rewards at rows {starts[late][:10].tolist()}', field='rewards')
    for rows in all_rows:
      if rows.stop - rows.start == 1:
        continue  # An unfinished tail of one row: its action's outcome is unknown.
      yield POLICY.trajectory(table.observations[rows], table.actions[rows], table.rewards[rows],
                              terminal_flag=bool(table.terminals[rows.stop - 1]))
