"""Recordings whose rows carry one `done` flag per action (il-representations' Atari and procgen
demos): split into episodes at the flags, each ended as its format's BoundaryPolicy declares."""

from __future__ import annotations

import collections
from typing import Any, Iterator, Mapping

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core.episodes import BoundaryPolicy, Trajectory


def odd_one_out(lengths: Mapping[str, int]) -> str:
  """The first field whose length differs from the most common one (the one to name in an error)."""
  common = collections.Counter(lengths.values()).most_common(1)[0][0]
  return next(name for name, length in lengths.items() if length != common)


def split_at_dones(policy: BoundaryPolicy, observations: np.ndarray, actions: np.ndarray,
                   rewards: np.ndarray, dones: np.ndarray,
                   metadata: Mapping[str, Any]) -> Iterator[Trajectory]:
  """Row t is (o_t, a_t, r_t, done_t); done_t closes an episode after a_t, and rows after the last
  flag form an unfinished episode (its terminal flag False). Episode metadata gets
  `episode_in_trajectory`, the episode's index within this recording."""
  lengths = {'obs': len(observations), 'acts': len(actions), 'rews': len(rewards),
             'dones': len(dones)}
  if len(set(lengths.values())) != 1:
    raise errors.EpisodeBoundaryError(f'expected one row per step in every field, got {lengths}',
                                      field=odd_one_out(lengths))
  if not len(dones):
    raise errors.EpisodeBoundaryError('the recording has no step', field='dones')
  dones = np.asarray(dones, dtype=bool).reshape(-1)
  for number, rows in enumerate(episodes.split_rows(dones)):
    yield policy.trajectory(
        observations[rows], actions[rows], rewards[rows],
        terminal_flag=bool(dones[rows.stop - 1]),
        metadata={**metadata, 'episode_in_trajectory': np.int64(number)})
