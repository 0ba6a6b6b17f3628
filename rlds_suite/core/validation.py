"""The RLDS episode validator: checks boundary flags, specs and rewards, reporting every violation.

Pure numpy: it takes episodes as {'steps': {...}, **metadata} dicts (or `Episode`s) with one row per
step. `rlds_suite.tfds.datasets.numpy_episodes` turns a TFDS dataset or directory into such episodes.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.core.episodes import Episode

MAX_REPORTED_PER_EPISODE = 20


@dataclasses.dataclass(frozen=True)
class Violation:
  episode: int
  step: Optional[int]
  field: str
  problem: str

  def __str__(self) -> str:
    where = f'episode {self.episode}' + ('' if self.step is None else f', step {self.step}')
    return f'{where}: {self.field}: {self.problem}'


@dataclasses.dataclass
class ValidationReport:
  """What the validator found, plus the summary figures it gathered on the way."""
  name: str = ''
  num_episodes: int = 0
  num_steps: int = 0
  returns: list = dataclasses.field(default_factory=list)
  step_spec: Any = None  # {field: nested (row shape, dtype)} of the first episode.
  violations: list = dataclasses.field(default_factory=list)

  @property
  def ok(self) -> bool:
    return not self.violations

  def raise_if_invalid(self) -> None:
    if self.violations:
      shown = '\n  '.join(str(v) for v in self.violations[:50])
      more = len(self.violations) - 50
      raise errors.ValidationError(
          f'{len(self.violations)} violation(s):\n  {shown}' + (f'\n  ... {more} more' if more > 0
                                                               else ''),
          path=self.name or None)

  def summary(self) -> dict[str, Any]:
    returns = np.asarray(self.returns, dtype=np.float64)
    spec = self.step_spec or {}
    return {
        'name': self.name,
        'episodes': self.num_episodes,
        'steps': self.num_steps,
        'return_mean': float(returns.mean()) if len(returns) else float('nan'),
        'return_min': float(returns.min()) if len(returns) else float('nan'),
        'return_max': float(returns.max()) if len(returns) else float('nan'),
        'observation_spec': _describe_spec(spec.get(fields.OBSERVATION)),
        'action_spec': _describe_spec(spec.get(fields.ACTION)),
        'valid': self.ok,
        'violations': len(self.violations),
    }


def validate_episodes(episodes: Iterable[Episode | Mapping[str, Any]],
                      name: str = '') -> ValidationReport:
  """Checks every episode; returns a report listing each violation with episode and step index."""
  report = ValidationReport(name=name)
  for index, episode in enumerate(episodes):
    steps = episode.steps if isinstance(episode, Episode) else episode[fields.STEPS]
    found = _check_episode(index, steps, report)
    report.violations.extend(found)
    report.num_episodes += 1
  return report


def _check_episode(index: int, steps: Mapping[str, Any], report: ValidationReport) -> list:
  found: list[Violation] = []

  def add(step: Optional[int], field: str, problem: str) -> None:
    if len(found) < MAX_REPORTED_PER_EPISODE:
      found.append(Violation(index, step, field, problem))

  missing = [f for f in fields.CORE_STEP_FIELDS if f not in steps]
  for field in missing:
    add(None, field, 'missing step field')
  if missing:
    return found
  steps = {k: nested.as_arrays(v) for k, v in steps.items()}
  lengths = {}
  for key, value in steps.items():
    try:
      lengths[key] = nested.leading_length(value)
    except ValueError as e:
      add(None, key, str(e))
  if len(set(lengths.values())) > 1:
    add(None, fields.STEPS, f'fields have different numbers of steps: {lengths}')
    return found
  num_steps = lengths.get(fields.IS_FIRST, 0)
  report.num_steps += num_steps
  if num_steps == 0:
    add(None, fields.STEPS, 'episode has no steps')
    return found

  is_first = steps[fields.IS_FIRST].astype(bool).reshape(num_steps)
  is_last = steps[fields.IS_LAST].astype(bool).reshape(num_steps)
  is_terminal = steps[fields.IS_TERMINAL].astype(bool).reshape(num_steps)
  if not is_first[0]:
    add(0, fields.IS_FIRST, 'first step of the episode is not marked is_first')
  for step in np.flatnonzero(is_first[1:]) + 1:
    add(int(step), fields.IS_FIRST, 'is_first set after the start of the episode')
  if not is_last[-1]:
    add(num_steps - 1, fields.IS_LAST, 'final step of the episode is not marked is_last')
  for step in np.flatnonzero(is_last[:-1]):
    add(int(step), fields.IS_LAST, 'is_last set before the final step')
  for step in np.flatnonzero(is_terminal & ~is_last):
    add(int(step), fields.IS_TERMINAL, 'is_terminal set on a step that is not is_last')

  rewards = steps[fields.REWARD]
  for path, leaf in nested.flatten_with_paths(rewards):
    if np.issubdtype(leaf.dtype, np.number):
      bad = ~np.isfinite(leaf.reshape(num_steps, -1)).all(axis=1)
      for step in np.flatnonzero(bad):
        add(int(step), fields.REWARD + (f'/{path}' if path else ''), f'non-finite reward {leaf[step]}')
    else:
      add(None, fields.REWARD, f'reward has non-numeric dtype {leaf.dtype}')
  report.returns.append(float(sum(np.sum(leaf, dtype=np.float64) for leaf in nested.leaves(rewards))))

  spec = {key: nested.spec_of(value) for key, value in steps.items()}
  if report.step_spec is None:
    report.step_spec = spec
  elif spec != report.step_spec:
    for key in sorted(set(spec) | set(report.step_spec)):
      if spec.get(key) != report.step_spec.get(key):
        add(None, key, f'spec {spec.get(key)} differs from the first episode\'s '
            f'{report.step_spec.get(key)}')
  return found


def _describe_spec(spec: Any) -> Any:
  """(shape, dtype) leaves -> 'dtype[shape]' strings, keeping the nesting."""
  if spec is None:
    return None
  if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], np.dtype):
    shape, dtype = spec
    return f'{dtype.name}{list(shape)}'
  if isinstance(spec, Mapping):
    return {k: _describe_spec(v) for k, v in spec.items()}
  return [_describe_spec(v) for v in spec]
