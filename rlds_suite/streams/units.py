"""Stream units, vectorised over whole episodes: concatenated [N, ...] step tensors of a group of
episodes (with their row splits) -> [U, ...] units.

Each unit is the TensorFlow twin of a numpy reference (`rlds_suite.core.episodes.to_transitions`,
`rlds_suite.streams.reference_units`) and is tested against it. Units never cross an episode: every
unit's rows are checked against its episode's end. Cutting many episodes in one op keeps the
per-element cost of tf.data off the per-episode path.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from rlds_suite.core import episodes
from rlds_suite.core import fields
from rlds_suite.streams import reference_units as reference

Steps = Mapping[str, Any]  # Field -> (nested) tensor with one row per step.


def _take(structure: Any, rows: tf.Tensor) -> Any:
  return tf.nest.map_structure(lambda t: tf.gather(t, rows), structure)


def episode_of_rows(row_splits: tf.Tensor) -> tf.Tensor:
  """[N] index of each row's episode, from int64 row splits [k + 1] (empty episodes hold no row):
  one binary search per row, where tf.repeat masks an [episodes, longest] matrix (~20 ns a
  CartPole step in groups of 200 episodes)."""
  rows = tf.range(row_splits[0], row_splits[-1], dtype=tf.int64)
  return tf.searchsorted(row_splits[1:], rows, side='right', out_type=tf.int64)


def tag_epochs(units: Mapping[str, Any], epochs: tf.Tensor,
               unit_episodes: Callable[[], tf.Tensor]) -> tf.Tensor:
  """[U] epoch of each unit of a group, from the [k] epochs of its episodes: filled where they
  are one (a group read from files holds one pass), else gathered by each unit's episode
  (`unit_episodes()`, built in that branch only, so the common path searches no row's episode:
  ~30 ns a CartPole step on a loaded machine)."""
  count = tf.shape(tf.nest.flatten(units)[0], out_type=tf.int64)[:1]
  return tf.cond(tf.reduce_min(epochs) == tf.reduce_max(epochs),
                 lambda: tf.fill(count, epochs[0]),
                 lambda: tf.gather(epochs, unit_episodes()))


@dataclasses.dataclass(frozen=True)
class Rows:
  """Where each step row of a group of concatenated episodes lies: its episode and that episode's
  end (one past its last row), so that units can be cut from many episodes at once."""
  episode: tf.Tensor  # [N] index of the row's episode in the group.
  end: tf.Tensor  # [N] first row after the row's episode.
  start: tf.Tensor  # [N] first row of the row's episode.

  @classmethod
  def from_row_splits(cls, row_splits: tf.Tensor) -> 'Rows':
    row_splits = tf.cast(row_splits, tf.int64)
    episode = episode_of_rows(row_splits)
    return cls(episode, tf.gather(row_splits[1:], episode), tf.gather(row_splits, episode))

  @property
  def index(self) -> tf.Tensor:
    return tf.range(tf.size(self.episode, out_type=tf.int64))


def _padding_mask(steps: Steps, rows: tf.Tensor) -> dict[str, Any]:
  """The projection's padding mask of `rows`, when datasets were padded to one spec.

  Padding is per dataset, so the rows of o_t and o_t+1 have the same mask.
  """
  if reference.PADDING_MASK not in steps:
    return {}
  return {reference.PADDING_MASK: _take(steps[reference.PADDING_MASK], rows)}


class Unit(abc.ABC):
  """What one stream element is, cut from the steps of whole episodes."""

  # Every unit field is some step field's row (no arithmetic, no padding): a cached stream can cut
  # such units from row indices and gather the values once, at the exit (streams.cache.RowGather).
  SELECTS_ROWS = False

  def from_steps(self, steps: Steps) -> dict[str, Any]:
    """[T, ...] step tensors of one episode -> [U, ...] unit tensors (TensorFlow, vectorised)."""
    num = tf.shape(steps[fields.IS_FIRST], out_type=tf.int64)[0]
    return self.from_episodes(steps, tf.stack([tf.constant(0, tf.int64), num]))[0]

  def from_episodes(self, steps: Steps, row_splits: tf.Tensor) -> tuple[dict[str, Any], tf.Tensor]:
    """Concatenated [N, ...] steps of episodes [row_splits[i], row_splits[i+1]) -> ([U, ...] units
    in episode order, [U] episode index of each unit). Units never cross an episode."""
    rows = Rows.from_row_splits(row_splits)
    units, first_rows = self.cut(steps, rows)
    return units, tf.gather(rows.episode, first_rows)

  @abc.abstractmethod
  def cut(self, steps: Steps, rows: Rows) -> tuple[dict[str, Any], tf.Tensor]:
    """Units of concatenated episodes and the first step row of each unit."""

  @abc.abstractmethod
  def reference(self, steps: Steps) -> dict[str, Any]:
    """The same as `from_steps` on numpy arrays, by the numpy reference."""

  @abc.abstractmethod
  def count(self, num_steps: np.ndarray) -> np.ndarray:
    """Number of units of episodes with `num_steps` steps."""


@dataclasses.dataclass(frozen=True)
class StepUnit(Unit):
  """Single RLDS steps."""
  SELECTS_ROWS = True

  def from_episodes(self, steps, row_splits):
    # Every row is a unit: only each row's episode is needed (no per-row ends and starts).
    return dict(steps), episode_of_rows(tf.cast(row_splits, tf.int64))

  def cut(self, steps, rows):
    return dict(steps), rows.index

  def reference(self, steps):
    return dict(steps)

  def count(self, num_steps):
    return np.asarray(num_steps)


def _starting_transitions(rows: Rows) -> tf.Tensor:
  """Rows that start a transition: every step but the last of its episode."""
  return tf.boolean_mask(rows.index, rows.index + 1 < rows.end)


@dataclasses.dataclass(frozen=True)
class Transitions(Unit):
  """(o_t, a_t, r_t, d_t, o_t+1, is_terminal_t+1); the last step starts none."""
  SELECTS_ROWS = True

  def cut(self, steps, rows):
    first = _starting_transitions(rows)
    return {
        fields.OBSERVATION: _take(steps[fields.OBSERVATION], first),
        fields.ACTION: _take(steps[fields.ACTION], first),
        fields.REWARD: tf.gather(steps[fields.REWARD], first),
        fields.DISCOUNT: tf.gather(steps[fields.DISCOUNT], first),
        fields.NEXT_OBSERVATION: _take(steps[fields.OBSERVATION], first + 1),
        fields.IS_TERMINAL: tf.gather(steps[fields.IS_TERMINAL], first + 1),
        **_padding_mask(steps, first),
    }, first

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

  def cut(self, steps, rows):
    first = _starting_transitions(rows)
    rewards, discounts = steps[fields.REWARD], steps[fields.DISCOUNT]
    ahead_rows = first[:, None] + tf.range(self.n, dtype=tf.int64)[None, :]  # [U, n]
    # An action t+k counts while it is one of the episode's transitions (t+k+1 inside it).
    valid = ahead_rows + 1 < tf.gather(rows.end, first)[:, None]
    safe = tf.where(valid, ahead_rows, first[:, None])
    gammas = tf.where(valid, self.gamma * tf.cast(tf.gather(discounts, safe), tf.float64),
                      tf.ones([], tf.float64))
    factors = tf.math.cumprod(gammas, axis=1, exclusive=True)
    terms = tf.where(valid, factors * tf.cast(tf.gather(rewards, safe), tf.float64), 0.0)
    lengths = tf.reduce_sum(tf.cast(valid, tf.int64), axis=1)
    ahead = first + lengths
    return {
        fields.OBSERVATION: _take(steps[fields.OBSERVATION], first),
        fields.ACTION: _take(steps[fields.ACTION], first),
        fields.REWARD: tf.cast(tf.reduce_sum(terms, axis=1), rewards.dtype),
        fields.DISCOUNT: tf.cast(tf.reduce_prod(gammas, axis=1), discounts.dtype),
        fields.NEXT_OBSERVATION: _take(steps[fields.OBSERVATION], ahead),
        fields.IS_TERMINAL: tf.gather(steps[fields.IS_TERMINAL], ahead),
        reference.NUM_STEPS: tf.cast(lengths, tf.int32),
        **_padding_mask(steps, first),
    }, first

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

  def cut(self, steps, rows):
    position = rows.index - rows.start
    fits = rows.index < rows.end if self.pad else rows.index + self.length <= rows.end
    first = tf.boolean_mask(rows.index, tf.logical_and(position % self.stride == 0, fits))
    window_rows = first[:, None] + tf.range(self.length, dtype=tf.int64)[None, :]  # [U, length]
    end = tf.gather(rows.end, first)[:, None]
    mask = window_rows < end
    safe = tf.minimum(window_rows, end - 1)

    def window(t):
      taken = tf.gather(t, safe)
      keep = tf.reshape(mask, tf.concat([tf.shape(mask), tf.ones([tf.rank(t) - 1], tf.int32)], 0))
      return tf.where(keep, taken, tf.zeros([], t.dtype))

    return {**tf.nest.map_structure(window, dict(steps)), reference.MASK: mask}, first

  def reference(self, steps):
    return reference.to_windows(steps, self.length, self.stride, self.pad)

  def count(self, num_steps):
    num_steps = np.asarray(num_steps)
    last = num_steps if self.pad else num_steps - self.length + 1
    return np.maximum(-(-np.maximum(last, 0) // self.stride), 0)


@dataclasses.dataclass(frozen=True)
class TargetPairs(Unit):
  """{context: step t, target: step t+offset} for every t with both inside the episode."""
  SELECTS_ROWS = True
  offset: int

  def __post_init__(self):
    if self.offset < 0:
      raise ValueError(f'offset must be >= 0, got {self.offset}')

  def cut(self, steps, rows):
    context = tf.boolean_mask(rows.index, rows.index + self.offset < rows.end)
    return {
        reference.CONTEXT: _take(dict(steps), context),
        reference.TARGET: _take(dict(steps), context + self.offset),
    }, context

  def reference(self, steps):
    return reference.to_target_pairs(steps, self.offset)

  def count(self, num_steps):
    return np.maximum(np.asarray(num_steps) - self.offset, 0)
