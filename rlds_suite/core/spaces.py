"""Declared action and observation spaces, and the values that fall outside them (numpy only).

A builder declares what its environment allows (`Discrete(2)` for CartPole's actions, `Box(-1, 1)`
for D4RL's) in the dataset metadata (`as_metadata`); the validator reads it back (`from_metadata`)
and checks every real value: a discrete value out of range is an error, a continuous one outside
its bounds a counted warning (recorded data can hold e.g. an unclipped action). NaN and infinite
floats are errors, declared space or not, as non-finite rewards are.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Union

import numpy as np

METADATA_KEY = 'spaces'  # Dataset metadata entry: {'action': space, 'observation': space}.


@dataclasses.dataclass(frozen=True)
class Discrete:
  """Integers start, ..., start + n - 1 (gymnasium's Discrete)."""
  n: int
  start: int = 0


@dataclasses.dataclass(frozen=True)
class Box:
  """Values within [low, high] (scalars, or per element lists broadcast to the value's shape)."""
  low: Any
  high: Any


# The full ALE action set: any Atari game's (minimal) actions are indices below 18.
ATARI_ACTIONS = Discrete(18)

# A space, or {key: Space} for dict values.
Space = Union[Discrete, Box, Mapping[str, Any]]


def as_metadata(**spaces: Space) -> dict[str, Any]:
  """{METADATA_KEY: JSON-ready spaces}, e.g. as_metadata(action=Discrete(2))."""
  return {METADATA_KEY: {name: _encode(space) for name, space in spaces.items()}}


def from_metadata(metadata: Optional[Mapping[str, Any]]) -> dict[str, Space]:
  """The spaces a dataset's metadata declares ({} when none)."""
  declared = (metadata or {}).get(METADATA_KEY) or {}
  return {name: _decode(value) for name, value in declared.items()}


def _encode(space: Space) -> Any:
  if isinstance(space, Discrete):
    return {'discrete': {'n': int(space.n), 'start': int(space.start)}}
  if isinstance(space, Box):
    return {'box': {'low': np.asarray(space.low, np.float64).tolist(),
                    'high': np.asarray(space.high, np.float64).tolist()}}
  return {'dict': {key: _encode(sub) for key, sub in space.items()}}


def _decode(value: Mapping[str, Any]) -> Space:
  if 'discrete' in value:
    return Discrete(**value['discrete'])
  if 'box' in value:
    return Box(**value['box'])
  return {key: _decode(sub) for key, sub in value['dict'].items()}


@dataclasses.dataclass(frozen=True)
class Finding:
  """Rows of one field whose values break a rule: an error unless `warning`."""
  field: str
  kind: str
  rows: np.ndarray
  warning: bool = False


def check(name: str, values: Any, space: Optional[Space], rows: np.ndarray) -> list[Finding]:
  """Findings for the `rows` (a boolean mask over steps) of `values`, a field's (nested) arrays:
  non-finite floats; values outside `space` when one is declared."""
  found: list[Finding] = []
  if isinstance(values, Mapping):
    for key, sub in values.items():
      sub_space = space.get(key) if isinstance(space, Mapping) else None
      found.extend(check(f'{name}/{key}', sub, sub_space, rows))
    return found
  values = np.asarray(values)
  if values.dtype.kind not in 'biuf' or not rows.any() or (
      values.dtype.kind != 'f' and space is None):
    return found  # No values to check (e.g. a reset-only episode has no real action).
  flat = values[rows].reshape(int(rows.sum()), -1)
  steps = np.flatnonzero(rows)
  bad = ~np.isfinite(flat).all(axis=1) if values.dtype.kind == 'f' else np.zeros(len(flat), bool)
  if bad.any():
    found.append(Finding(name, 'non-finite value (NaN or infinite)', steps[bad]))
  if isinstance(space, Discrete):
    outside = ((flat < space.start) | (flat >= space.start + space.n)).any(axis=1)
    if outside.any():
      found.append(Finding(name, f'outside the declared Discrete({space.n}'
                           f'{f", start={space.start}" if space.start else ""}) space',
                           steps[outside]))
  elif isinstance(space, Box):
    shape = values.shape[1:]
    low = np.broadcast_to(np.asarray(space.low, np.float64), shape).reshape(-1)
    high = np.broadcast_to(np.asarray(space.high, np.float64), shape).reshape(-1)
    with np.errstate(invalid='ignore'):
      outside = ((flat < low) | (flat > high)).any(axis=1) & ~bad  # Those are errors already.
    if outside.any():
      found.append(Finding(name, 'outside the declared Box bounds', steps[outside], warning=True))
  return found
