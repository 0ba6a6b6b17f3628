"""A tf.data exit whose graph-mode `get_next` runs in the consumer's own thread.

In a tf.function, `iterator.get_next()` is tf.data's IteratorGetNext, an asynchronous kernel: each
call hands the work to a background thread and wakes the loop's thread when it is done. Those two
wake-ups cost 20-60 us a batch on this kind of machine (a held batch: 22.6 us against 5.5 us),
more than a stream's own work for a 256-step batch, so the tf.data exit ran at 0.52-0.65x the
numpy one. IteratorGetNextSync is the same iterator's synchronous kernel (what eager iteration
already runs): the batch is cut from a prefetched block in the calling thread.
`benchmarks/stream.py --quick` (3 rounds, load 0.8-1.6): the tf.data exit in a tf.function loop
at 0.99x [0.90-1.40x] `as_numpy` (cartpole_like) and 0.98x [0.96-1.19x] (d4rl_like), against
0.52-0.72x and 0.79-0.86x with the asynchronous kernel in a paired prototype.

Blocking the calling thread is safe here: the stream's producers run on tf.data's own threads
(a prefetched block feeds the rebatch), not the inter-op pool the graph runs on; a test runs the
exit with one inter-op thread. `get_next_as_optional` (Keras with steps_per_execution > 1,
autograph's `for x in iter(ds)`) keeps the asynchronous kernel: TensorFlow has no synchronous one.
Datasets derived from the exit (`stream.dataset.take(n)`) are plain tf.data datasets.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.data.ops import iterator_ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.data.util import structure  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.framework import ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.framework import type_spec_registry  # pylint: disable=g-direct-tensorflow-import,line-too-long
from tensorflow.python.ops import gen_dataset_ops  # pylint: disable=g-direct-tensorflow-import


class SyncIterator(iterator_ops.OwnedIterator):
  """A tf.data iterator whose graph-mode `get_next` is IteratorGetNextSync (eager is unchanged:
  eager iteration already runs synchronously). It saves and restores as any iterator does."""

  def _next_internal(self) -> Any:
    if tf.executing_eagerly():
      return super()._next_internal()
    with ops.colocate_with(self._iterator_resource):
      flat = gen_dataset_ops.iterator_get_next_sync(
          self._iterator_resource, output_types=self._flat_output_types,
          output_shapes=self._flat_output_shapes)
    return structure.from_compatible_tensor_list(self._element_spec, flat)

  @property
  def _type_spec(self) -> 'SyncIteratorSpec':
    return SyncIteratorSpec(self.element_spec)


@type_spec_registry.register('rlds_suite.SyncIteratorSpec')
class SyncIteratorSpec(iterator_ops.IteratorSpec):
  """The type of a SyncIterator: one passed into a tf.function (Keras passes its iterator so) is
  rebuilt there as a SyncIterator, not as a plain tf.data iterator."""

  __slots__ = []

  @property
  def value_type(self) -> type:
    return SyncIterator

  def _from_components(self, components) -> SyncIterator:
    return SyncIterator(components=components, element_spec=self._element_spec)

  @staticmethod
  def from_value(value) -> 'SyncIteratorSpec':
    return SyncIteratorSpec(value.element_spec)


class SyncExitDataset(dataset_ops.UnaryUnchangedStructureDataset):
  """A dataset (the same elements and options as `dataset`) whose iterators are SyncIterators."""

  def __init__(self, dataset: tf.data.Dataset):
    super().__init__(dataset, dataset._variant_tensor)  # pylint: disable=protected-access

  def __iter__(self) -> SyncIterator:
    if not (tf.executing_eagerly() or ops.inside_function()):
      return super().__iter__()  # TF1 graph mode: tf.data's own error.
    with ops.colocate_with(self._variant_tensor):
      return SyncIterator(self)
