"""Stream units, vectorised per episode: the steps of one episode ([T, ...] tensors) -> [U, ...] units.

Each unit is the TensorFlow twin of a numpy reference (`rlds_suite.core.episodes.to_transitions`,
`rlds_suite.streams.reference_units`) and is tested against it. Units never cross an episode because they are cut
from one episode's tensors at a time.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Mapping

import numpy as np
import tensorflow as tf

from rlds_suite.core import episodes
from rlds_suite.core import fields
from rlds_suite.streams import reference_units as reference

Steps = Mapping[str, Any]  # Field -> (nested) tensor with one row per step.


def _take(structure: Any, rows: tf.Tensor) -> Any:
  return tf.nest.map_structure(lambda t: tf.gather(t, rows), structure)


def _num_steps(steps: Steps) -> tf.Tensor:
  return tf.shape(steps[fields.IS_FIRST], out_type=tf.int64)[0]


def _padding_mask(steps: Steps, num: tf.Tensor) -> dict[str, Any]:
  """The projection's padding mask of the first `num` rows, when datasets were padded to one spec.

  Padding is per dataset, so the rows of o_t and o_t+1 have the same mask.
  """
  if reference.PADDING_MASK not in steps:
    return {}
  return {reference.PADDING_MASK: tf.nest.map_structure(lambda t: t[:num],
                                                        steps[reference.PADDING_MASK])}


class Unit(abc.ABC):
  """What one stream element is, cut from one episode's steps."""

  @abc.abstractmethod
  def from_steps(self, steps: Steps) -> dict[str, Any]:
    """[T, ...] step tensors of one episode -> [U, ...] unit tensors (TensorFlow, vectorised)."""

  @abc.abstractmethod
  def reference(self, steps: Steps) -> dict[str, Any]:
    """The same as `from_steps` on numpy arrays, by the numpy reference."""

  @abc.abstractmethod
  def count(self, num_steps: np.ndarray) -> np.ndarray:
    """Number of units of episodes with `num_steps` steps."""


@dataclasses.dataclass(frozen=True)
class StepUnit(Unit):
  """Single RLDS steps."""

  def from_steps(self, steps):
    return dict(steps)

  def reference(self, steps):
    return dict(steps)

  def count(self, num_steps):
    return np.asarray(num_steps)


@dataclasses.dataclass(frozen=True)
class Transitions(Unit):
  """(o_t, a_t, r_t, d_t, o_t+1, is_terminal_t+1); the last step starts none."""

  def from_steps(self, steps):
    num = _num_steps(steps) - 1
    return {
        fields.OBSERVATION: tf.nest.map_structure(lambda t: t[:num], steps[fields.OBSERVATION]),
        fields.ACTION: tf.nest.map_structure(lambda t: t[:num], steps[fields.ACTION]),
        fields.REWARD: steps[fields.REWARD][:num],
        fields.DISCOUNT: steps[fields.DISCOUNT][:num],
        fields.NEXT_OBSERVATION: tf.nest.map_structure(lambda t: t[1:], steps[fields.OBSERVATION]),
        fields.IS_TERMINAL: steps[fields.IS_TERMINAL][1:],
        **_padding_mask(steps, num),
    }

  def reference(self, steps):
    return episodes.to_transitions(steps)

  def count(self, num_steps):
    return np.maximum(np.asarray(num_steps) - 1, 0)


@dataclasses.dataclass(frozen=True)
class NStepTransitions(Unit):
  """n-step returns (see `rlds_suite.streams.reference_units.to_n_step_transitions`); scalar rewards."""
  n: int
  gamma: float = 1.0

  def __post_init__(self):
    if self.n < 1:
      raise ValueError(f'n must be >= 1, got {self.n}')

  def from_steps(self, steps):
    num = _num_steps(steps) - 1
    rewards = steps[fields.REWARD][:num]
    discounts = steps[fields.DISCOUNT][:num]
    rows = tf.range(num)[:, None] + tf.range(self.n, dtype=tf.int64)[None, :]  # [num, n]
    valid = rows < num
    safe = tf.minimum(rows, tf.maximum(num - 1, 0))
    gammas = tf.where(valid, self.gamma * tf.cast(tf.gather(discounts, safe), tf.float64),
                      tf.ones([], tf.float64))
    factors = tf.math.cumprod(gammas, axis=1, exclusive=True)
    terms = tf.where(valid, factors * tf.cast(tf.gather(rewards, safe), tf.float64), 0.0)
    lengths = tf.reduce_sum(tf.cast(valid, tf.int64), axis=1)
    ahead = tf.range(num) + lengths
    return {
        fields.OBSERVATION: tf.nest.map_structure(lambda t: t[:num], steps[fields.OBSERVATION]),
        fields.ACTION: tf.nest.map_structure(lambda t: t[:num], steps[fields.ACTION]),
        fields.REWARD: tf.cast(tf.reduce_sum(terms, axis=1), rewards.dtype),
        fields.DISCOUNT: tf.cast(tf.reduce_prod(gammas, axis=1), discounts.dtype),
        fields.NEXT_OBSERVATION: _take(steps[fields.OBSERVATION], ahead),
        fields.IS_TERMINAL: tf.gather(steps[fields.IS_TERMINAL], ahead),
        reference.NUM_STEPS: tf.cast(lengths, tf.int32),
        **_padding_mask(steps, num),
    }

  def reference(self, steps):
    return reference.to_n_step_transitions(steps, self.n, self.gamma)

  def count(self, num_steps):
    return np.maximum(np.asarray(num_steps) - 1, 0)


@dataclasses.dataclass(frozen=True)
class Windows(Unit):
  """Windows of `length` consecutive steps at every `stride`-th step (see `rlds_suite.streams.reference_units`).

  pad=True: windows past the episode's end are zero-padded with `mask` False there;
  pad=False: only windows inside the episode are kept.
  """
  length: int
  stride: int = 1
  pad: bool = True

  def __post_init__(self):
    if self.length < 1 or self.stride < 1:
      raise ValueError(f'length and stride must be >= 1, got {self.length} and {self.stride}')

  def from_steps(self, steps):
    num_steps = _num_steps(steps)
    last = num_steps if self.pad else num_steps - self.length + 1
    starts = tf.range(0, tf.maximum(last, 0), self.stride, dtype=tf.int64)
    rows = starts[:, None] + tf.range(self.length, dtype=tf.int64)[None, :]  # [U, length]
    mask = rows < num_steps

    def window(t):
      taken = tf.gather(t, tf.minimum(rows, num_steps - 1))
      keep = tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([tf.rank(t) - 1], tf.int32)], 0))
      return tf.where(keep, taken, tf.zeros([], t.dtype))

    return {**tf.nest.map_structure(window, dict(steps)), reference.MASK: mask}

  def reference(self, steps):
    return reference.to_windows(steps, self.length, self.stride, self.pad)

  def count(self, num_steps):
    num_steps = np.asarray(num_steps)
    last = num_steps if self.pad else num_steps - self.length + 1
    return np.maximum(-(-np.maximum(last, 0) // self.stride), 0)


@dataclasses.dataclass(frozen=True)
class TargetPairs(Unit):
  """{context: step t, target: step t+offset} for every t with both inside the episode."""
  offset: int

  def __post_init__(self):
    if self.offset < 0:
      raise ValueError(f'offset must be >= 0, got {self.offset}')

  def from_steps(self, steps):
    context = tf.range(tf.maximum(_num_steps(steps) - self.offset, 0))
    return {
        reference.CONTEXT: _take(dict(steps), context),
        reference.TARGET: _take(dict(steps), context + self.offset),
    }

  def reference(self, steps):
    return reference.to_target_pairs(steps, self.offset)

  def count(self, num_steps):
    return np.maximum(np.asarray(num_steps) - self.offset, 0)
