"""PNG plots of episodes and dataset statistics (matplotlib, headless)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from rlds_suite.core import episodes as episode_model
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.inspection import statistics


def _pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _columns(structure: Any, length: int) -> list[tuple[str, np.ndarray]]:
  """Numeric leaves as (name, (length, dims)) arrays; images and text are left out."""
  out = []
  for path, leaf in nested.flatten_with_paths(structure):
    leaf = np.asarray(leaf)
    if leaf.dtype.kind in 'biuf' and leaf.size // max(length, 1) <= 64:
      out.append((path, leaf.reshape(length, -1).astype(np.float64)))
  return out


def plot_episodes(episodes: Sequence[Mapping[str, Any]], path: str, title: str = '') -> None:
  """Observation dimensions, actions and rewards over time; episode ends marked (dashed: truncated,
  solid red: terminated)."""
  plt = _pyplot()
  steps = [episode[fields.STEPS] for episode in episodes]
  lengths = [len(s[fields.IS_FIRST]) for s in steps]
  total = sum(lengths)
  rows = [('observation', fields.OBSERVATION), ('action', fields.ACTION), ('reward', fields.REWARD)]
  figure, axes = plt.subplots(len(rows), 1, figsize=(11, 7.5), sharex=True)
  time = np.arange(total)
  for axis, (label, key) in zip(axes, rows):
    parts = [_columns(s.get(key, {}), n) for s, n in zip(steps, lengths)]
    if key != fields.OBSERVATION:  # is_last steps' action and reward are placeholders: a gap.
      for s, columns in zip(steps, parts):
        for _, values in columns:
          values[~episode_model.real_action_rows(s)] = np.nan
    for index, (name, _) in enumerate(parts[0]):
      values = np.concatenate([p[index][1] for p in parts])
      for d in range(values.shape[1]):
        axis.plot(time, values[:, d], linewidth=0.9,
                  label=f'{name or label}[{d}]' if values.shape[1] > 1 else (name or label))
    axis.set_ylabel(label)
    if axis.lines and len(axis.lines) <= 12:
      axis.legend(loc='upper right', fontsize=7, ncol=min(len(axis.lines), 6))
  start = 0
  for s, n in zip(steps, lengths):
    terminal = bool(np.asarray(s[fields.IS_TERMINAL])[-1])
    for axis in axes:
      axis.axvline(start + n - 0.5, color='red' if terminal else 'gray',
                   linestyle='-' if terminal else '--', linewidth=1)
    start += n
  axes[-1].set_xlabel('step (episodes concatenated; red: terminated, dashed: truncated)')
  figure.suptitle(title or f'{len(steps)} episode(s), {total} steps')
  figure.tight_layout()
  figure.savefig(path, dpi=100)
  plt.close(figure)


def plot_statistics(stats: statistics.DatasetStatistics, path: str, title: str = '',
                    normalized_returns: Optional[Sequence[float]] = None) -> None:
  """Histograms of episode lengths and returns (normalised too when given), endings, and
  per-dimension mean +- std with range."""
  plt = _pyplot()
  figure, axes = plt.subplots(2, 2, figsize=(11, 7.5))
  axes[0, 0].hist(stats.lengths, bins=min(30, max(1, len(set(stats.lengths)))), color='tab:blue')
  axes[0, 0].set_title('episode length')
  if stats.returns:
    axes[0, 1].hist(stats.returns, bins=min(30, max(1, len(stats.returns))), color='tab:green')
  axes[0, 1].set_title('episode return' if stats.returns else 'episode return (no reward field)')
  if normalized_returns is not None:
    normalized = 100 * np.asarray(normalized_returns)
    axes[0, 1].set_title(f'episode return (normalised: mean {normalized.mean():.1f}, '
                         f'min {normalized.min():.1f}, max {normalized.max():.1f})')
  axes[1, 0].bar(['terminated', 'truncated'], [stats.terminated, stats.truncated],
                 color=['tab:red', 'tab:gray'])
  axes[1, 0].set_title('episode endings')
  labels, means, stds, lows, highs = [], [], [], [], []
  for name, moments in stats.moments.items():
    for d in range(len(moments.mean)):
      labels.append(f'{name}[{d}]')
      means.append(moments.mean[d])
      stds.append(moments.std[d])
      lows.append(moments.minimum[d])
      highs.append(moments.maximum[d])
  shown = slice(0, 40)
  x = np.arange(len(labels[shown]))
  axes[1, 1].errorbar(x, means[shown], yerr=stds[shown], fmt='o', markersize=3, label='mean +- std')
  axes[1, 1].scatter(x, lows[shown], marker='_', color='black', label='min/max')
  axes[1, 1].scatter(x, highs[shown], marker='_', color='black')
  axes[1, 1].set_xticks(x, labels[shown], rotation=90, fontsize=6)
  axes[1, 1].set_title('observation / action dimensions' + (' (first 40)' if len(labels) > 40 else ''))
  axes[1, 1].legend(fontsize=7)
  figure.suptitle(title or f'{stats.episodes} episodes, {stats.steps} steps')
  figure.tight_layout()
  figure.savefig(path, dpi=100)
  plt.close(figure)
