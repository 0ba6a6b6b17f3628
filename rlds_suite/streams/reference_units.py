"""Numpy reference semantics of the stream units beyond transitions: n-step returns, windows, pairs.

Every function takes the RLDS steps of ONE episode (field -> array with one row per step) and
returns a dict of arrays with one row per unit. Units never cross an episode. Transitions are
`rlds_suite.core.episodes.to_transitions`; `rlds_suite.streams.units` is the vectorised TensorFlow
implementation, tested against these loops.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import fields
from rlds_suite.core import nested

Nested = nested.Nested

# Unit field names beyond rlds_suite.core.fields.
MASK = 'mask'  # Windows: True on real steps, False on padding.
CONTEXT = 'context'  # Target pairs: the earlier step.
TARGET = 'target'  # Target pairs: the step `offset` steps later.
NUM_STEPS = 'num_steps'  # n-step transitions: how many actions the return sums (<= n at the end).
PADDING_MASK = 'padding_mask'  # Streams padding datasets to one spec: True on real values.


def to_n_step_transitions(steps: Mapping[str, Nested], n: int, gamma: float = 1.0) -> dict[str, Nested]:
  """n-step transitions (o_t, a_t, R_t, discount_t, o_t+m, is_terminal_t+m) with m = min(n, T-1-t).

  R_t = sum_{k<m} (prod_{j<k} gamma * d_t+j) * r_t+k and discount_t = prod_{k<m} gamma * d_t+k is
  the factor a bootstrap value of o_t+m gets: 0 after the action reaching an absorbing state, not
  after truncation. Near the end of an episode the sum is cut at its last step (m < n).
  """
  if n < 1:
    raise ValueError(f'n must be >= 1, got {n}')
  transitions = episodes.to_transitions(steps)
  rewards = np.asarray(transitions[fields.REWARD], dtype=np.float64)
  discounts = np.asarray(transitions[fields.DISCOUNT], dtype=np.float64)
  is_terminal = np.asarray(steps[fields.IS_TERMINAL])
  num = len(rewards)
  returns = np.zeros(num)
  factors = np.ones(num)
  lengths = np.zeros(num, dtype=np.int32)
  for t in range(num):
    m = min(n, num - t)
    for k in range(m):
      returns[t] += factors[t] * rewards[t + k]
      factors[t] *= gamma * discounts[t + k]
    lengths[t] = m
  return {
      fields.OBSERVATION: transitions[fields.OBSERVATION],
      fields.ACTION: transitions[fields.ACTION],
      fields.REWARD: returns.astype(np.asarray(transitions[fields.REWARD]).dtype),
      fields.DISCOUNT: factors.astype(np.asarray(transitions[fields.DISCOUNT]).dtype),
      fields.NEXT_OBSERVATION: nested.take_rows(steps[fields.OBSERVATION], np.arange(num) + lengths),
      fields.IS_TERMINAL: is_terminal[np.arange(num) + lengths],
      NUM_STEPS: lengths,
  }


def window_starts(num_steps: int, length: int, stride: int = 1, pad: bool = True) -> np.ndarray:
  """First step of each window: every `stride`-th step; without padding only windows that fit."""
  if length < 1 or stride < 1:
    raise ValueError(f'length and stride must be >= 1, got {length} and {stride}')
  last = num_steps if pad else num_steps - length + 1
  return np.arange(0, max(last, 0), stride)


def to_windows(steps: Mapping[str, Nested], length: int, stride: int = 1,
               pad: bool = True) -> dict[str, Nested]:
  """Fixed-length windows of consecutive steps, one starting at every `stride`-th step.

  With `pad`, windows running past the last step are zero-filled there and `mask` is False on those
  rows; without it, windows that do not fit inside the episode are dropped (and `mask` is all True).
  """
  num_steps = len(steps[fields.IS_FIRST])
  windows = []
  for start in window_starts(num_steps, length, stride, pad):
    rows = np.arange(start, start + length)
    mask = rows < num_steps
    real = nested.take_rows(dict(steps), rows[mask])
    padding = nested.map_arrays(
        lambda a: np.zeros((length - mask.sum(),) + a.shape[1:], a.dtype), real)
    windows.append({**nested.concat_rows([real, padding]), MASK: mask})
  if not windows:
    empty = nested.map_arrays(lambda a: np.zeros((0, length) + np.shape(a)[1:], np.asarray(a).dtype),
                              dict(steps))
    return {**empty, MASK: np.zeros((0, length), dtype=bool)}
  return nested.stack_rows(windows)


def to_target_pairs(steps: Mapping[str, Nested], offset: int) -> dict[str, Nested]:
  """Pairs of steps `offset` apart within the episode: {context: step t, target: step t+offset}."""
  if offset < 0:
    raise ValueError(f'offset must be >= 0, got {offset}')
  num_steps = len(steps[fields.IS_FIRST])
  context = np.arange(max(num_steps - offset, 0))
  return {
      CONTEXT: nested.take_rows(dict(steps), context),
      TARGET: nested.take_rows(dict(steps), context + offset),
  }
