"""DOPE's model-selection metrics (Fu et al. 2021): errors and regrets normalised by the range of
the policies' true values, and Spearman's rank correlation."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def _range(truth: np.ndarray) -> float:
  spread = float(np.max(truth) - np.min(truth))
  return spread if spread > 0 else 1.0


def absolute_error(estimates: Sequence[float], truth: Sequence[float]) -> float:
  """Mean |estimate - truth| over policies, divided by max(truth) - min(truth)."""
  estimates, truth = np.asarray(estimates, float), np.asarray(truth, float)
  return float(np.mean(np.abs(estimates - truth)) / _range(truth))


def _ranks(values: np.ndarray) -> np.ndarray:
  """Ranks with ties given their average rank."""
  order = np.argsort(values, kind='stable')
  ranks = np.empty(len(values))
  ranks[order] = np.arange(len(values))
  for v in np.unique(values):
    tied = values == v
    ranks[tied] = ranks[tied].mean()
  return ranks


def rank_correlation(estimates: Sequence[float], truth: Sequence[float]) -> float:
  """Spearman's rho between estimates and true values (nan when either is constant)."""
  a, b = _ranks(np.asarray(estimates, float)), _ranks(np.asarray(truth, float))
  a, b = a - a.mean(), b - b.mean()
  denominator = np.sqrt(np.sum(a**2) * np.sum(b**2))
  return float(np.sum(a * b) / denominator) if denominator > 0 else float('nan')


def regret_at_k(estimates: Sequence[float], truth: Sequence[float], k: int = 1) -> float:
  """(best true value - best true value among the k policies estimated best) / range."""
  estimates, truth = np.asarray(estimates, float), np.asarray(truth, float)
  top = np.argsort(-estimates, kind='stable')[:k]
  return float((np.max(truth) - np.max(truth[top])) / _range(truth))


def summary(estimates: Sequence[float], truth: Sequence[float]) -> dict[str, float]:
  return {
      'absolute_error': absolute_error(estimates, truth),
      'rank_correlation': rank_correlation(estimates, truth),
      'regret@1': regret_at_k(estimates, truth, 1),
      'regret@5': regret_at_k(estimates, truth, 5),
  }
