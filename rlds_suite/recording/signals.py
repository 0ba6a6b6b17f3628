"""Pre-emption handling for a recording writer.

  * SIGUSR1 (e.g. SLURM's `--signal=USR1@60` warning): complete the open shard and write metadata,
    then keep recording. The episode in flight stays in flight and lands in a later shard.
  * SIGTERM: write the episode in flight as a *truncated* episode (the recording, not the
    environment, ended it; an episode with no action yet is dropped), complete the shard, write
    metadata, close the writer, then terminate as the previous handler would have (by default:
    re-raise SIGTERM with the default action).

  * SIGINT (Ctrl-C): KeyboardInterrupt, raised only between the writer's operations, so that the
    recording loop can close the writer (`record` does); further SIGINTs meanwhile are ignored.

Python runs handlers in the main thread between bytecodes; a signal arriving inside the writer's
own bookkeeping is handled as soon as that returns (`run_when_idle`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator, Protocol


class Checkpointable(Protocol):

  def checkpoint(self, include_episode_in_flight: bool = False) -> None:
    ...

  def run_when_idle(self, fn: Callable[[], None]) -> None:
    ...

  def close(self) -> None:
    ...


@contextlib.contextmanager
def preemption_handlers(writer: Checkpointable) -> Iterator[None]:
  """Installs the SIGUSR1/SIGTERM/SIGINT handlers above for the block (main thread only; elsewhere
  a no-op)."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return

  previous: dict[int, Any] = {}

  def on_usr1(signum, frame):  # pylint: disable=unused-argument
    writer.run_when_idle(lambda: writer.checkpoint(include_episode_in_flight=False))

  def on_term(signum, frame):

    def finish_and_terminate():
      writer.checkpoint(include_episode_in_flight=True)
      writer.close()
      handler = previous.get(signum)
      if callable(handler):
        handler(signum, frame)
      elif handler != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    writer.run_when_idle(finish_and_terminate)

  interrupted = []

  def on_int(signum, frame):  # pylint: disable=unused-argument
    if not interrupted:
      interrupted.append(signum)
      writer.run_when_idle(_raise_keyboard_interrupt)

  previous[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, on_usr1)
  previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_term)
  previous[signal.SIGINT] = signal.signal(signal.SIGINT, on_int)
  try:
    yield
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _raise_keyboard_interrupt() -> None:
  raise KeyboardInterrupt
