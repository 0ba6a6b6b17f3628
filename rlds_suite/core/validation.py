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
from rlds_suite.core import spaces
from rlds_suite.core.episodes import Episode

MAX_REPORTED_PER_EPISODE = 20
FIRST_LOCATIONS = 5  # Locations shown per kind of violation in grouped reports.

# Why a zero discount before an episode's last action is a warning, not an error.
MID_EPISODE_ZERO_DISCOUNT = (
    'discount 0 before the last action (the return and TD targets stop there although the '
    'episode goes on; only right for environments that signal e.g. a lost life this way)')


@dataclasses.dataclass(frozen=True)
class Violation:
  """One finding: `kind` says what is wrong (the same text for every occurrence, so findings
  group), `detail` the values of this one; warnings do not make a dataset invalid."""
  episode: int
  step: Optional[int]
  field: str
  kind: str
  detail: str = ''
  warning: bool = False

  @property
  def problem(self) -> str:
    return f'{self.kind}: {self.detail}' if self.detail else self.kind

  @property
  def location(self) -> str:
    return f'episode {self.episode}' + ('' if self.step is None else f', step {self.step}')

  def __str__(self) -> str:
    return f'{self.location}: {self.field}: {self.problem}'


@dataclasses.dataclass(frozen=True)
class ViolationGroup:
  """Every finding of one kind on one field: how many, in how many episodes, the first few."""
  field: str
  kind: str
  warning: bool
  count: int
  episodes: int
  first: tuple[Violation, ...]

  def __str__(self) -> str:
    label = 'warning' if self.warning else 'error'
    where = '; '.join(v.location + (f' ({v.detail})' if v.detail else '') for v in self.first)
    more = ', ...' if self.count > len(self.first) else ''
    return (f'{label}: {self.field}: {self.kind}: {self.count} in {self.episodes} '
            f'episode(s), first at {where}{more}')


def group(violations: Iterable[Violation]) -> list[ViolationGroup]:
  """Findings grouped by (field, kind), errors first, in order of first occurrence."""
  found: dict[tuple[str, str, bool], list] = {}
  for violation in violations:
    entry = found.setdefault((violation.field, violation.kind, violation.warning), [0, set(), []])
    entry[0] += 1
    entry[1].add(violation.episode)
    if len(entry[2]) < FIRST_LOCATIONS:
      entry[2].append(violation)
  groups = [ViolationGroup(field, kind, warning, count, len(episodes), tuple(first))
            for (field, kind, warning), (count, episodes, first) in found.items()]
  return sorted(groups, key=lambda g: g.warning)  # Stable: first occurrence within each.


@dataclasses.dataclass
class ValidationReport:
  """What the validator found, plus the summary figures it gathered on the way. `violations`
  make the dataset invalid; `warnings` are reported with their reason and do not."""
  name: str = ''
  num_episodes: int = 0
  num_steps: int = 0
  returns: list = dataclasses.field(default_factory=list)
  step_spec: Any = None  # {field: nested (row shape, dtype)} of the first episode.
  violations: list = dataclasses.field(default_factory=list)
  warnings: list = dataclasses.field(default_factory=list)

  @property
  def ok(self) -> bool:
    return not self.violations

  def groups(self) -> list[ViolationGroup]:
    """Errors, then warnings, grouped by kind with counts and their first locations."""
    return group(self.violations) + group(self.warnings)

  def raise_if_invalid(self) -> None:
    if self.violations:
      shown = '\n  '.join(str(g) for g in group(self.violations))
      raise errors.ValidationError(f'{len(self.violations)} violation(s):\n  {shown}',
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
        'warnings': len(self.warnings),
        'by_kind': {f'{"warning" if g.warning else "error"}: {g.field}: {g.kind}': g.count
                    for g in self.groups()},
    }


def validate_episodes(episodes: Iterable[Episode | Mapping[str, Any]], name: str = '',
                      declared: Optional[Mapping[str, spaces.Space]] = None) -> ValidationReport:
  """Checks every episode; returns a report listing each violation with episode and step index.
  `declared`: the action/observation spaces the dataset declares (spaces.from_metadata)."""
  report = ValidationReport(name=name)
  for index, episode in enumerate(episodes):
    steps = episode.steps if isinstance(episode, Episode) else episode[fields.STEPS]
    found = _check_episode(index, steps, report, declared or {})
    report.violations.extend(v for v in found if not v.warning)
    report.warnings.extend(v for v in found if v.warning)
    report.num_episodes += 1
  return report


def _check_episode(index: int, steps: Mapping[str, Any], report: ValidationReport,
                   declared: Mapping[str, spaces.Space]) -> list:
  found: list[Violation] = []

  def add(step: Optional[int], field: str, kind: str, detail: str = '',
          warning: bool = False) -> None:
    if len(found) < MAX_REPORTED_PER_EPISODE:
      found.append(Violation(index, None if step is None else int(step), field, kind, detail,
                             warning))

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
      add(None, key, 'not an array with a leading steps dimension', str(e))
  if len(set(lengths.values())) > 1:
    add(None, fields.STEPS, 'fields have different numbers of steps', str(lengths))
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
  _check_discounts(steps[fields.DISCOUNT], is_last, is_terminal, add)

  rewards = steps[fields.REWARD]
  for path, leaf in nested.flatten_with_paths(rewards):
    if np.issubdtype(leaf.dtype, np.number):
      bad = ~np.isfinite(leaf.reshape(num_steps, -1)).all(axis=1)
      for step in np.flatnonzero(bad):
        add(step, fields.REWARD + (f'/{path}' if path else ''), 'non-finite reward',
            str(leaf[step]))
    else:
      add(None, fields.REWARD, 'reward has a non-numeric dtype', str(leaf.dtype))
  report.returns.append(float(sum(np.sum(leaf, dtype=np.float64) for leaf in nested.leaves(rewards))))
  _check_values(steps, declared, is_last, add)

  spec = {key: nested.spec_of(value) for key, value in steps.items()}
  if report.step_spec is None:
    report.step_spec = spec
  elif spec != report.step_spec:
    for key in sorted(set(spec) | set(report.step_spec)):
      if spec.get(key) != report.step_spec.get(key):
        add(None, key, 'spec differs from the first episode\'s',
            f'{spec.get(key)} vs {report.step_spec.get(key)}')
  return found


def _check_values(steps: Mapping[str, Any], declared: Mapping[str, spaces.Space],
                  is_last: np.ndarray, add) -> None:
  """Actions (but the placeholder of the is_last step) and observations: non-finite floats and
  values outside the declared spaces, one finding per field and kind with the steps counted."""
  every_step = np.ones(len(is_last), dtype=bool)
  for field, rows in ((fields.ACTION, ~is_last), (fields.OBSERVATION, every_step)):
    for finding in spaces.check(field, steps[field], declared.get(field), rows):
      first = int(finding.rows[0])
      value = np.asarray(_leaf_at(nested.row(steps[field], first), finding.field))
      add(first, finding.field, finding.kind,
          f'{len(finding.rows)} step(s), e.g. {np.array2string(value, threshold=8)}',
          warning=finding.warning)


def _leaf_at(value: Any, path: str) -> Any:
  """The leaf of a nested row at 'field/key/...' (the field itself is the row)."""
  for key in path.split('/')[1:]:
    value = value[key]
  return value


def _check_discounts(discount: Any, is_last: np.ndarray, is_terminal: np.ndarray, add) -> None:
  """Termination: the last step and the action that reached it have discount 0. Truncation: that
  action keeps discount 1 (a 0 there is a termination not marked is_terminal). A 0 earlier is a
  warning (MID_EPISODE_ZERO_DISCOUNT)."""
  num_steps = len(is_last)
  discount = np.asarray(discount)
  if discount.dtype.kind not in 'biuf' or discount.size != num_steps:
    add(None, fields.DISCOUNT, 'expected one numeric discount per step',
        f'{discount.dtype.name}{list(discount.shape)}')
    return
  discount = discount.reshape(num_steps).astype(np.float64)
  last, reaching = num_steps - 1, num_steps - 2  # The final step and the action that reached it.
  if is_terminal[last]:
    if discount[last] != 0:
      add(last, fields.DISCOUNT, 'terminal step has a non-zero discount', f'{discount[last]:g}')
    if reaching >= 0 and discount[reaching] != 0:
      add(reaching, fields.DISCOUNT,
          'the action reaching the terminal step has a non-zero discount (expected 0)',
          f'{discount[reaching]:g}')
  elif is_last[last] and reaching >= 0 and discount[reaching] == 0:
    add(reaching, fields.DISCOUNT,
        'the last action of an episode not marked is_terminal has discount 0 (truncation keeps 1)')
  for step in np.flatnonzero(discount[:max(reaching, 0)] == 0):
    add(step, fields.DISCOUNT, MID_EPISODE_ZERO_DISCOUNT, warning=True)


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
