"""tf.data iterators released before the interpreter finalizes, so that exiting with one alive
cannot hang.

An iterator still referenced at exit (a global `it = iter(stream.dataset)`, an unfinished
`as_numpy` loop) is otherwise destroyed while Python finalizes its modules. Its destructor cancels
the pipeline and waits for the map calls in flight, and a call running a Python function
(`tf.numpy_function`: a stream's ZLIB frame decode, a cached stream's block draw or read) then
never returns: once finalization has begun, Python ends every other thread that takes the GIL,
that call's TensorFlow thread included, so the destructor waits forever (seen with image streams
at both exits, cached streams' tf.data exit, and a bare `Dataset.map(numpy_function)`). An
atexit handler runs before finalization, while those threads can still take the GIL: it drops
each live iterator's resource, whose destructor (run with the GIL released) lets the calls
finish. Every tf.data iterator of the process is released, after which it raises if used:
finalization would destroy each of them anyway.

Dropping the iterator's reference is not enough when something else holds its resource handle:
a tf.function that closes over the iterator captures the handle in its concrete function, which
kept the pipeline alive into finalization (a cached stream with a block draw in flight hung at
every exit so). So each iterator's resource is first re-pointed at an empty dataset of its
element structure (tf.data's MakeIterator: the resource stays, its pipeline is destroyed in the
handler's thread, the GIL released); whatever holds the handle then holds an ended iterator.
"""

from __future__ import annotations

import atexit
import gc
import threading
from typing import Iterable, Optional

import tensorflow as tf
from tensorflow.python.framework import ops  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.ops import gen_dataset_ops  # pylint: disable=g-direct-tensorflow-import

_registered = False
_lock = threading.Lock()


def release_at_exit() -> None:
  """Has the process's tf.data iterators released when the interpreter exits (registered once,
  however often called): for modules whose ops call Python inside tf.data."""
  global _registered
  with _lock:
    if not _registered:
      atexit.register(release_iterators)
      _registered = True


def release_iterators() -> int:
  """Destroys every live tf.data iterator's pipeline (`release`); how many."""
  return release(live_iterators())


def live_iterators() -> list[tf.data.Iterator]:
  """The process's tf.data iterators (found among the objects the garbage collector tracks)."""
  objects = gc.get_objects()
  iterator_types = {kind for kind in {type(o) for o in objects}
                    if issubclass(kind, tf.data.Iterator)}
  return [o for o in objects if type(o) in iterator_types]


def release(iterators: Iterable[tf.data.Iterator]) -> int:
  """Destroys each iterator's pipeline, waiting for its calls in flight, however many hold its
  resource handle; how many it destroyed. A released iterator raises if used; a tf.function that
  captured its handle ends (OutOfRangeError)."""
  released = 0
  for iterator in iterators:
    # TensorFlow has no public way to end an iterator whose object is still referenced; its
    # resource handle owns the pipeline (OwnedIterator), and tf.functions may hold the handle too.
    resource = getattr(iterator, '_iterator_resource', None)
    if resource is not None:
      _end_pipeline(iterator, resource)
      del iterator._iterator_resource  # pylint: disable=protected-access
      released += 1
  return released


def _end_pipeline(iterator: tf.data.Iterator, resource: tf.Tensor) -> None:
  """Re-points the iterator's resource at an empty dataset of its structure, destroying its
  pipeline now (left as it was where none can be made: symbolic or foreign iterators)."""
  if not isinstance(resource, ops.EagerTensor):
    return
  empty = _empty_like(iterator)
  if empty is not None:
    try:
      gen_dataset_ops.make_iterator(empty._variant_tensor, resource)  # pylint: disable=protected-access
    except tf.errors.OpError:
      pass  # Its resource already gone; dropping the reference below is all there is to do.


def _empty_like(iterator: tf.data.Iterator) -> Optional[tf.data.Dataset]:
  """A dataset of the iterator's element structure that makes no elements and starts no input
  pipeline (Take with a count of 0 makes an empty iterator), or None."""
  dataset = getattr(iterator, '_dataset', None)  # Set where made from a dataset (OwnedIterator).
  if dataset is not None:
    return dataset.take(0)
  specs = tf.nest.flatten(iterator.element_spec)
  if not all(isinstance(spec, tf.TensorSpec) for spec in specs):
    return None
  zeros = [tf.zeros([0 if d is None else d for d in spec.shape] if spec.shape.rank is not None
                    else [], spec.dtype) for spec in specs]
  return tf.data.Dataset.from_tensors(
      tf.nest.pack_sequence_as(iterator.element_spec, zeros)).take(0)
