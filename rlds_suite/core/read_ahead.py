"""An iterator read ahead by a thread, so that producing items (inflating, parsing: work that
releases the GIL) overlaps the consumer's work on the items before."""

from __future__ import annotations

import queue
import threading
from typing import Iterator, TypeVar

T = TypeVar('T')


def read_ahead(items: Iterator[T], depth: int = 4, name: str = 'read-ahead') -> Iterator[T]:
  """`items`, produced `depth` ahead by a thread. Errors arrive in order; stopping early ends
  the thread."""
  ahead: queue.Queue = queue.Queue(depth)
  stop = threading.Event()
  done = object()

  def put(item: object) -> bool:
    """Hands `item` over unless the caller stopped; whether it did."""
    while not stop.is_set():
      try:
        ahead.put(item, timeout=0.1)
        return True
      except queue.Full:
        continue
    return False

  def produce() -> None:
    try:
      for item in items:
        if not put(item):
          return
      put(done)
    except BaseException as e:  # pylint: disable=broad-except  # Raised in the caller instead.
      put(e)

  thread = threading.Thread(target=produce, name=name, daemon=True)
  thread.start()
  try:
    while True:
      item = ahead.get()
      if item is done:
        return
      if isinstance(item, BaseException):
        raise item
      yield item
  finally:
    stop.set()
    thread.join()
