"""RLDS episodes as flat transition rows in D4RL's layout, shared by the npz and D4RL exports.

One row per transition (o_t, a_t, r_t, o_t+1) of each episode, never crossing episodes
(`rlds_suite.core.episodes.to_transitions`): `observations`, `actions`, `rewards`,
`next_observations`, `terminals` (the transition reached an absorbing state) and `timeouts` (the
episode was truncated after this transition), which D4RL keeps apart; at most one of them is True,
on an episode's last row. Other step fields go to `infos/NAME`, nested fields to `a/b` keys; a
step field that is itself `infos` (D4RL's own, as our d4rl builders keep it) goes to `infos/*`
unnested, where D4RL has it. Episode-level fields equal in every episode are D4RL's per-file
`metadata/*` (`FileMetadata`); fields that differ between episodes have no place in that layout.
For formats that did not keep the final observation, the last transition's next_observations
repeats its observation (the step mask `observation_is_copy` of the RLDS steps is not exported).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested

OBSERVATIONS, ACTIONS, REWARDS = 'observations', 'actions', 'rewards'
NEXT_OBSERVATIONS, TERMINALS, TIMEOUTS = 'next_observations', 'terminals', 'timeouts'
INFOS = 'infos'
METADATA = 'metadata'


def d4rl_rows(episode: Mapping[str, Any]) -> dict[str, np.ndarray]:
  """One numpy RLDS episode ({'steps': ...}) -> flat D4RL columns (empty dict: no transition)."""
  steps = episode[fields.STEPS]
  transitions = episodes.to_transitions(steps)
  num = len(transitions[fields.REWARD])
  if num == 0:
    return {}
  terminals = np.asarray(transitions[fields.IS_TERMINAL], dtype=bool)
  timeouts = np.zeros(num, dtype=bool)
  timeouts[-1] = not terminals[-1]
  columns = {
      **_named(OBSERVATIONS, transitions[fields.OBSERVATION]),
      **_named(ACTIONS, transitions[fields.ACTION]),
      REWARDS: np.asarray(transitions[fields.REWARD]),
      **_named(NEXT_OBSERVATIONS, transitions[fields.NEXT_OBSERVATION]),
      TERMINALS: terminals,
      TIMEOUTS: timeouts,
  }
  for name, values in steps.items():
    if name in fields.CORE_STEP_FIELDS or name == fields.OBSERVATION_IS_COPY:
      continue
    prefix = INFOS if name == INFOS and isinstance(values, Mapping) else f'{INFOS}/{name}'
    for key, rows in _named(prefix, nested.take_rows(values, slice(0, num))).items():
      if key in columns:
        raise errors.SchemaError(f'two step fields export to {key!r}', field=name)
      columns[key] = rows
  return columns


class FileMetadata:
  """D4RL's `metadata/*`: the episode-level fields (outside `steps`) equal in every episode."""

  def __init__(self):
    self._values: Optional[dict[str, np.ndarray]] = None
    self.varying: set[str] = set()

  def add(self, episode: Mapping[str, Any]) -> None:
    values = _named(METADATA, {k: v for k, v in episode.items() if k != fields.STEPS})
    if self._values is None:
      self._values = values
      return
    for key in set(values) | set(self._values):
      if (key not in values or key not in self._values or
          not np.array_equal(values[key], self._values[key])):
        self.varying.add(key)

  def columns(self) -> dict[str, np.ndarray]:
    """`metadata/PATH` -> the value shared by every episode added."""
    return {key: value for key, value in (self._values or {}).items() if key not in self.varying}


def _named(prefix: str, structure: Any) -> dict[str, np.ndarray]:
  if isinstance(structure, Mapping):
    if not structure:
      return {}
    return {f'{prefix}/{path}': np.asarray(value)
            for path, value in nested.flatten_paths(structure).items()}
  return {prefix: np.asarray(structure)}
