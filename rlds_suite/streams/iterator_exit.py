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
"""

from __future__ import annotations

import atexit
import gc
import threading
from typing import Iterable

import tensorflow as tf

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
  """Destroys each iterator's pipeline, waiting for its calls in flight; how many it destroyed. A
  released iterator raises if used."""
  released = 0
  for iterator in iterators:
    # TensorFlow has no public way to end an iterator whose object is still referenced; its
    # resource handle is the pipeline's only owner (OwnedIterator).
    if getattr(iterator, '_iterator_resource', None) is not None:
      del iterator._iterator_resource  # pylint: disable=protected-access
      released += 1
  return released
