"""Model-based OPE with the dataset's own transitions as the model (certainty equivalence).

A model step from (s, a) takes a dataset transition (s_i, a, r_i, s'_i) whose s_i is nearest to s
(Euclidean on standardised observations; among transitions that took the same discrete action, or
nearest in (s, a) for continuous actions; ties broken at random) and moves s by s'_i - s_i, with
reward r_i and the transition's bootstrap flag: 0 (a termination) ends the rollout, a truncation
does not. On a finite MDP this samples the empirical model, whose value converges to the true one;
on continuous states it is a nearest-neighbour model. The target policy is rolled out from the
dataset's initial states for `horizon` steps.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from rlds_suite.core import fields
from rlds_suite.ope import data as data_lib
from rlds_suite.ope import policies as policies_lib

_CHUNK = 256  # rollouts whose distances to the dataset are computed at once


@dataclasses.dataclass
class ModelConfig:
  discount: float = 0.99
  rollouts_per_start: int = 8
  horizon: Optional[int] = None  # default: until discount**t < 1e-3
  seed: int = 0

  def steps(self) -> int:
    if self.horizon is not None:
      return self.horizon
    return 1 if self.discount <= 0 else int(math.ceil(math.log(1e-3) / math.log(self.discount)))


class _Lookup:
  """Dataset rows by key: the distinct keys, and for each the rows that have it."""

  def __init__(self, keys: np.ndarray, rows: np.ndarray):
    unique, inverse = np.unique(keys[rows], axis=0, return_inverse=True)
    self.keys = unique
    self.norms = np.sum(unique * unique, 1)
    self.members = rows[np.argsort(inverse.reshape(-1), kind='stable')]
    self.counts = np.bincount(inverse.reshape(-1), minlength=len(unique))
    self.starts = np.cumsum(self.counts) - self.counts

  def nearest(self, queries: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per query, a row whose key is nearest (one of them at random where several share it)."""
    found = np.empty(len(queries), np.int64)
    for a in range(0, len(queries), _CHUNK):
      q = queries[a:a + _CHUNK]
      found[a:a + _CHUNK] = np.argmin(self.norms[None] - 2 * q @ self.keys.T, 1)
    offset = (rng.random(len(queries)) * self.counts[found]).astype(np.int64)
    return self.members[self.starts[found] + offset]


class NearestNeighbourModel:
  """The dataset's transitions, looked up by nearest observation (per discrete action)."""

  def __init__(self, data: data_lib.OPEData):
    t = data.transitions()
    obs = t[fields.OBSERVATION].reshape(len(t[fields.REWARD]), -1).astype(np.float64)
    self.discrete = data.discrete_actions
    self.scale = obs.std(0) + 1e-8
    self.deltas = t[fields.NEXT_OBSERVATION].reshape(obs.shape).astype(np.float64) - obs
    self.rewards = t[fields.REWARD].astype(np.float64)
    self.bootstrap = t['bootstrap'].astype(np.float64)
    everything = np.arange(len(obs))
    if self.discrete:
      actions = t[fields.ACTION].reshape(-1).astype(np.int64)
      keys = obs / self.scale
      self.by_action = {int(a): _Lookup(keys, np.flatnonzero(actions == a))
                        for a in np.unique(actions)}
      self.any_action = _Lookup(keys, everything)
    else:
      acts = t[fields.ACTION].reshape(len(obs), -1).astype(np.float64)
      self.action_scale = acts.std(0) + 1e-8
      self.any_action = _Lookup(np.concatenate([obs / self.scale, acts / self.action_scale], -1),
                                everything)

  def step(self, obs: np.ndarray, actions: np.ndarray,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Next observations, rewards and bootstrap flags for a batch of (observation, action)."""
    obs = obs.reshape(len(obs), -1)
    if self.discrete:
      actions = np.asarray(actions).reshape(-1).astype(np.int64)
      picked = np.empty(len(obs), np.int64)
      for a in np.unique(actions):
        rows = np.flatnonzero(actions == a)
        # An action the dataset never took: the nearest observation's transition, any action.
        lookup = self.by_action.get(int(a), self.any_action)
        picked[rows] = lookup.nearest(obs[rows] / self.scale, rng)
    else:
      queries = np.concatenate(
          [obs / self.scale, np.asarray(actions).reshape(len(obs), -1) / self.action_scale], -1)
      picked = self.any_action.nearest(queries, rng)
    return obs + self.deltas[picked], self.rewards[picked], self.bootstrap[picked]


def start_values(policy: policies_lib.Policy, data: data_lib.OPEData,
                 config: ModelConfig = ModelConfig(),
                 model: Optional[NearestNeighbourModel] = None) -> np.ndarray:
  """Per episode: the model's discounted return of `policy` from that episode's initial
  observation, averaged over `rollouts_per_start` rollouts."""
  model = model or NearestNeighbourModel(data)
  rng = np.random.default_rng(config.seed)
  starts = data.initial_observations()
  n = len(starts)
  obs = np.repeat(starts.reshape(n, -1).astype(np.float64), config.rollouts_per_start, 0)
  shape = starts.shape[1:]
  value = np.zeros(len(obs))
  alive = np.ones(len(obs))
  for t in range(config.steps()):
    live = np.flatnonzero(alive)
    if not len(live):
      break
    actions = policy.sample(obs[live].reshape((len(live),) + shape).astype(np.float32), rng)
    next_obs, rewards, bootstrap = model.step(obs[live], actions, rng)
    value[live] += config.discount**t * rewards
    alive[live] *= bootstrap
    obs[live] = next_obs
  return value.reshape(n, config.rollouts_per_start).mean(1)


def evaluate(policy: policies_lib.Policy, data: data_lib.OPEData,
             config: ModelConfig = ModelConfig()) -> float:
  """The model-based estimate of `policy`'s value on `data`."""
  return float(np.mean(start_values(policy, data, config)))
