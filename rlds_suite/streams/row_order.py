"""A block's rows taken in a given order, by a gather that XLA compiles.

tf.gather copies each element of a field on its own, through a sharded loop: ~5 ns an element and
a field, ~40 ns a step of a CartPole block (eight fields of one to four values), the costliest
stage of an uncached stream of small steps. XLA's compiled gather of the same rows costs about
half; the stream's numpy exit then ran 1.06-1.32x (median 1.23x) faster, with the same batches
(cartpole_like, 6 paired rounds, load 1.6-2.1). Measured and not kept: np.take at the numpy exit
(~8 ns a step on a warm block, 28 ns in the consumer's thread on a block just made by another
thread: no gain), np.take in a numpy_function (slower: the GIL), one gather of all fields packed
into bytes (the packing and unpacking cost more than they saved).

XLA compiles once per block shape and field dtypes (every block of a repeating stream has the same
shape); it has no strings, so string fields are gathered by tf.gather. Its compiler and code take
~55 MB of the process's memory once (a CartPole stream's peak RSS: 904 vs 849 MB), so it is used
only for small units (where the per-element cost dominates; an image's copy does not gain) and
where the stream's memory budget leaves room for it beside the stream's buffers. Where XLA is
unavailable (a TensorFlow built without it) every field is gathered by tf.gather.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import tensorflow as tf

_LOG = logging.getLogger(__name__)
COMPILED_UNIT_BYTES = 1 << 10  # Units up to this size are permuted by the compiled gather,
COMPILER_BYTES = 64 << 20  # where the budget leaves this much beside the buffers.


@tf.function(jit_compile=True, reduce_retracing=True)
def _compiled_gather(values: list[tf.Tensor], order: tf.Tensor) -> list[tf.Tensor]:
  return [tf.gather(value, order) for value in values]


@functools.cache
def xla_available() -> bool:
  """Whether this TensorFlow compiles the gather (probed once per process, on two rows)."""
  try:
    _compiled_gather([tf.constant([1.0, 2.0])], tf.constant([1, 0], tf.int64))
  except (tf.errors.OpError, NotImplementedError, ValueError) as e:
    _LOG.warning('XLA cannot compile a gather here (%s): streams permute blocks by tf.gather', e)
    return False
  return True


def worth_compiling(unit_bytes: int, budget_left: float) -> bool:
  """Whether blocks of `unit_bytes` units, with `budget_left` bytes of the memory budget beside
  the stream's buffers, are permuted by the compiled gather (XLA probed only then)."""
  return unit_bytes <= COMPILED_UNIT_BYTES and budget_left >= COMPILER_BYTES and xla_available()


def take_rows(block: Any, order: tf.Tensor, compiled: bool = True) -> Any:
  """`block` (nested tensors with a leading row axis) with its rows taken in `order`, as
  `tf.nest.map_structure(lambda t: tf.gather(t, order), block)` gives them (`compiled`: by XLA,
  but for strings)."""
  flat = tf.nest.flatten(block)
  indices = [i for i, t in enumerate(flat) if t.dtype != tf.string] if compiled else []
  taken = dict(zip(indices, _compiled_gather([flat[i] for i in indices], order))
               if indices else ())
  return tf.nest.pack_sequence_as(
      block, [taken[i] if i in taken else tf.gather(t, order) for i, t in enumerate(flat)])
