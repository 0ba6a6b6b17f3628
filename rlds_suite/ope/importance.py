"""Per-decision weighted importance sampling and weighted doubly robust (Thomas & Brunskill 2016).

Both read each episode's per-step log-ratios log pi(a_t|s_t) - log b(a_t|s_t). Episodes are padded
to the longest one with zero rewards and their last cumulative ratio, and the cumulative ratios are
normalised over episodes at each step (per-decision weighting). The doubly robust estimate adds a
model's (FQE's) control variate and, after a truncated episode's last action, the model's value of
the state reached (a truncation is not an end of the task; a termination is).
"""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from rlds_suite.ope import data as data_lib
from rlds_suite.ope import policies as policies_lib


def log_ratios(policy: policies_lib.Policy, data: data_lib.OPEData,
               behaviour: Optional[policies_lib.Policy] = None) -> list[np.ndarray]:
  """Per-episode log pi(a|s) - log b(a|s); b from `behaviour` or the recorded log-probs."""
  if behaviour is None:
    data_lib.require_log_probs(data)
  out = []
  for e in data.episodes:
    obs = e.observations[:-1]
    target = policy.log_prob(obs, e.actions)
    logged = behaviour.log_prob(obs, e.actions) if behaviour is not None else e.behaviour_log_probs
    out.append(np.asarray(target, np.float64) - np.asarray(logged, np.float64))
  return out


def _weights(ratios: list[np.ndarray], horizon: int) -> np.ndarray:
  """[n, horizon] per-decision weights, normalised over episodes at each step."""
  cumulative = np.zeros((len(ratios), horizon))
  for i, r in enumerate(ratios):
    c = np.cumsum(r)
    cumulative[i, :len(c)] = c
    cumulative[i, len(c):] = c[-1] if len(c) else 0.0
  cumulative -= cumulative.max(axis=0, keepdims=True)
  w = np.exp(cumulative)
  return w / w.sum(axis=0, keepdims=True)


def _padded(values: list[np.ndarray], horizon: int) -> np.ndarray:
  out = np.zeros((len(values), horizon))
  for i, v in enumerate(values):
    out[i, :len(v)] = v
  return out


class Estimates:
  """Per-episode pieces of WIS / WDR, so that a bootstrap resamples episodes cheaply."""

  def __init__(self, data: data_lib.OPEData, ratios: list[np.ndarray], discount: float,
               q_hat: Optional[list[np.ndarray]] = None,
               v_hat: Optional[list[np.ndarray]] = None):
    horizon = max(e.length for e in data.episodes)
    self.discounts = discount ** np.arange(horizon)
    self.ratios = ratios
    self.horizon = horizon
    self.rewards = _padded([e.rewards for e in data.episodes], horizon)
    self.residuals = None
    self.initial = None
    if q_hat is not None and v_hat is not None:
      # r_t + gamma * bootstrap_t * V(s_t+1) - Q(s_t, a_t); v_hat has T + 1 rows per episode.
      self.residuals = _padded([
          e.rewards + discount * e.bootstrap * v[1:] - q
          for e, q, v in zip(data.episodes, q_hat, v_hat)], horizon)
      self.initial = np.array([v[0] for v in v_hat])

  def wis(self, rows: Optional[np.ndarray] = None) -> float:
    rows = np.arange(len(self.ratios)) if rows is None else rows
    w = _weights([self.ratios[i] for i in rows], self.horizon)
    return float(np.sum(self.discounts * np.sum(w * self.rewards[rows], axis=0)))

  def wdr(self, rows: Optional[np.ndarray] = None) -> float:
    if self.residuals is None:
      raise ValueError('weighted doubly robust needs q_hat and v_hat')
    rows = np.arange(len(self.ratios)) if rows is None else rows
    w = _weights([self.ratios[i] for i in rows], self.horizon)
    return float(np.mean(self.initial[rows]) +
                 np.sum(self.discounts * np.sum(w * self.residuals[rows], axis=0)))


def bootstrap_interval(estimate: Callable[[np.ndarray], float], num_episodes: int,
                       resamples: int = 200, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
  """Percentile interval of `estimate(rows)` over episodes resampled with replacement."""
  if resamples < 1:
    return float('nan'), float('nan')
  rng = np.random.default_rng(seed)
  values = [estimate(rng.integers(0, num_episodes, num_episodes)) for _ in range(resamples)]
  tail = (1 - level) / 2 * 100
  return float(np.percentile(values, tail)), float(np.percentile(values, 100 - tail))
