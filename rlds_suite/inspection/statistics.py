"""Dataset statistics computed one episode at a time (constant memory in the number of steps).

Actions and rewards are counted on the steps that carry real ones (not an episode's `is_last`
step, whose action and reward are placeholders), as rlds' `sar_fields_mask` counts them."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import fields
from rlds_suite.core import nested


@dataclasses.dataclass
class Moments:
  """Count, mean, M2 (for the variance), min and max of a vector field, merged batch by batch."""
  count: int = 0
  mean: Optional[np.ndarray] = None
  m2: Optional[np.ndarray] = None
  minimum: Optional[np.ndarray] = None
  maximum: Optional[np.ndarray] = None

  def add(self, rows: np.ndarray) -> None:
    """Adds rows (n, ...) by Chan et al.'s parallel update; NaNs count as values."""
    rows = rows.reshape(len(rows), -1).astype(np.float64)
    if not len(rows):
      return
    n, mean = len(rows), rows.mean(axis=0)
    m2 = ((rows - mean) ** 2).sum(axis=0)
    if self.count == 0:
      self.count, self.mean, self.m2 = n, mean, m2
      self.minimum, self.maximum = rows.min(axis=0), rows.max(axis=0)
      return
    total = self.count + n
    delta = mean - self.mean
    self.mean = self.mean + delta * n / total
    self.m2 = self.m2 + m2 + delta ** 2 * self.count * n / total
    self.count = total
    self.minimum = np.minimum(self.minimum, rows.min(axis=0))
    self.maximum = np.maximum(self.maximum, rows.max(axis=0))

  @property
  def std(self) -> np.ndarray:
    return np.sqrt(self.m2 / self.count)


@dataclasses.dataclass
class DatasetStatistics:
  """What `rlds-suite stats` prints and plots."""
  episodes: int = 0
  steps: int = 0
  terminated: int = 0
  truncated: int = 0
  lengths: list[int] = dataclasses.field(default_factory=list)
  returns: list[float] = dataclasses.field(default_factory=list)
  moments: dict[str, Moments] = dataclasses.field(default_factory=dict)

  def add_episode(self, steps: Mapping[str, Any]) -> None:
    """Adds one episode's numpy steps (RLDS layout)."""
    length = len(steps[fields.IS_FIRST])
    is_terminal = np.asarray(steps[fields.IS_TERMINAL])
    self.episodes += 1
    self.steps += length
    self.lengths.append(length)
    if is_terminal.any():
      self.terminated += 1
    else:
      self.truncated += 1
    real = episodes.real_action_rows(steps)
    if fields.REWARD in steps:
      rewards = np.asarray(steps[fields.REWARD], np.float64)[real]
      self.returns.append(float(rewards.sum()))
    for group, rows in ((fields.OBSERVATION, slice(None)), (fields.ACTION, real)):
      for path, leaf in nested.flatten_with_paths(steps.get(group, {})):
        leaf = np.asarray(leaf)
        if leaf.dtype.kind not in 'biuf' or leaf[0].size > 64:  # Images and large tensors: skip.
          continue
        self.moments.setdefault('/'.join(p for p in (group, path) if p), Moments()).add(leaf[rows])


def compute(episodes: Iterable[Mapping[str, Any]]) -> DatasetStatistics:
  """Statistics of numpy episodes ({'steps': ...}), consumed one at a time."""
  stats = DatasetStatistics()
  for episode in episodes:
    stats.add_episode(episode[fields.STEPS])
  return stats


def summary_table(stats: DatasetStatistics) -> str:
  """A plain-text table of the statistics."""
  lengths = np.asarray(stats.lengths) if stats.lengths else np.zeros(1)
  lines = [f'episodes {stats.episodes}   steps {stats.steps}   terminated {stats.terminated}   '
           f'truncated {stats.truncated}',
           f'length   mean {lengths.mean():.4g}  min {lengths.min()}  max {lengths.max()}']
  if stats.returns:
    returns = np.asarray(stats.returns)
    lines.append(f'return   mean {returns.mean():.6g}  std {returns.std():.6g}  '
                 f'min {returns.min():.6g}  max {returns.max():.6g}')
  lines.append(f'{"field":<28}{"dim":>5}{"mean":>13}{"std":>13}{"min":>13}{"max":>13}')
  for name, moments in stats.moments.items():
    for d in range(len(moments.mean)):
      lines.append(f'{name:<28}{d:>5}{moments.mean[d]:>13.5g}{moments.std[d]:>13.5g}'
                   f'{moments.minimum[d]:>13.5g}{moments.maximum[d]:>13.5g}')
  return '\n'.join(lines)
