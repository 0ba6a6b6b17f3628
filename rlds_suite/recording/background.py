"""One background thread that runs a writer's jobs in order, so the environment loop only queues them.

Jobs wait in a bounded queue (the caller blocks when it is full, which bounds memory). The first
job that raises stops the worker: later jobs are dropped, and the exception is raised in the
calling thread by every later `submit`, `wait` and `close`, so it is never lost. The thread is a
daemon; the owner closes it at interpreter exit (`atexit`), before daemon threads are frozen.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Optional

from rlds_suite.core import errors

Job = Callable[[], None]


class InlineWorker:
  """The same interface, running each job at once in the caller's thread. For episodes whose
  conversion is pure Python (no image encoding that releases the GIL), a thread only adds a
  hand-over per episode."""

  def __init__(self):
    self.error: Optional[BaseException] = None

  def submit(self, job: Job) -> None:
    self.raise_error()
    try:
      job()
    except BaseException as e:  # pylint: disable=broad-except
      self.error = e
      raise

  def wait(self) -> None:
    self.raise_error()

  def close(self) -> None:
    self.raise_error()

  def raise_error(self) -> None:
    if self.error is not None:
      raise self.error


class BackgroundWorker:
  """Runs submitted jobs one at a time, in submission order, on a single daemon thread."""

  def __init__(self, name: str, max_pending: int):
    self._jobs: queue.Queue[Optional[Job]] = queue.Queue(maxsize=max(1, max_pending))
    self.error: Optional[BaseException] = None
    self._thread = threading.Thread(target=self._run, name=name, daemon=True)
    self._thread.start()

  def submit(self, job: Job) -> None:
    """Queues `job` (blocking while the queue is full); raises a failed job's exception."""
    self.raise_error()
    if not self._thread.is_alive():
      raise errors.RLDSSuiteError('the background writer is closed')
    self._jobs.put(job)

  def wait(self) -> None:
    """Blocks until every submitted job has run; raises a failed job's exception."""
    self._jobs.join()
    self.raise_error()

  def close(self) -> None:
    """Runs the jobs still queued, stops the thread; raises a failed job's exception."""
    if self._thread.is_alive():
      self._jobs.put(None)
      self._thread.join()
    self.raise_error()

  def raise_error(self) -> None:
    if self.error is not None:
      raise self.error

  def _run(self) -> None:
    while True:
      job = self._jobs.get()
      try:
        if job is None:
          return
        if self.error is None:
          job()
      except BaseException as e:  # pylint: disable=broad-except
        self.error = e
      finally:
        self._jobs.task_done()
