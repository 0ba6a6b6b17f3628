"""A DQN Replay run's episodes as add-index spans, found from the terminal streams alone (1 byte a
row), then read back span by span: the bounded work items of a parallel build.

`episode_spans` makes `dqn_replay.read_run`'s cut (episodes end at terminal rows, a gap in add
indices ends the episode in flight unfinished, an episode whose start was not logged is left out, the
last one in range is read on into the following checkpoints) without inflating a frame, so a worker
can be handed any run of whole episodes, across checkpoint files, and hold one episode at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from typing import Iterator, Optional, Sequence

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import read_ahead
from rlds_suite.readers import dqn_replay
from rlds_suite.readers import gzip_npy

AHEAD_BYTES = 64 << 20  # A longer episode (~9,500 rows) is read when it is wanted, not ahead.
ROW_BYTES = 84 * 84 + 4 + 4 + 1  # A row of dopamine's store: frame, action, reward, terminal.


@dataclasses.dataclass(frozen=True)
class Span:
  """One episode's rows (padding first): add indices [first_add, end_add)."""
  first_add: int
  end_add: int

  def __len__(self) -> int:
    return self.end_add - self.first_add


def _terminals(run: dqn_replay.Run, layout: dqn_replay.Layout) -> np.ndarray:
  """The terminal flags of a checkpoint's new rows, in add order."""
  path = dqn_replay.store_file(run.replay_logs, 'terminal', layout.checkpoint)
  with gzip_npy.GzipNpyRows(path, field='terminal') as rows:
    stored = rows.read(layout.capacity)
  rows_in_add_order = np.arange(layout.first_add, layout.add_count) % layout.capacity
  return stored[rows_in_add_order]


def episode_spans(run: dqn_replay.Run, checkpoints: Optional[Sequence[int]] = None) -> list[Span]:
  """The spans of the episodes `read_run(run, checkpoints)` yields, in add order."""
  wanted = run.select(checkpoints)
  in_range, wanted_set = dqn_replay.Selection(run, wanted), set(wanted)
  found: list[Span] = []

  def close(start: int, stop: int, started: bool) -> None:
    if started and stop > start and in_range.checkpoint_of(
        start + dqn_replay.POLICY.padding_rows) in wanted_set:
      found.append(Span(start, stop))

  open_start: Optional[int] = None  # First add index of the rows in flight.
  open_end, started = 0, False
  for checkpoint in [k for k in run.available if k >= wanted[0]]:
    past_range = checkpoint > wanted[-1]
    if past_range and (open_start is None or open_start == open_end):
      break
    layout = run.layout(checkpoint)
    if open_start is None or open_start == open_end:  # Nothing in flight.
      open_start, started = layout.first_add, bool(layout.starts_episode)
    elif open_end != layout.first_add:  # A gap: the episode in flight ends unfinished.
      close(open_start, open_end, started)
      open_start, started = layout.first_add, False
      if past_range:
        break
    open_end = layout.add_count
    for end in layout.first_add + np.flatnonzero(_terminals(run, layout)):
      close(open_start, int(end) + 1, started)
      open_start, started = int(end) + 1, True
      if past_range:
        open_start = None
        break
    if open_start is None:
      break
  if open_start is not None:
    close(open_start, open_end, started)
  return found


def work_items(spans: Sequence[Span], count: int) -> list[list[Span]]:
  """`spans` cut into at most `count` runs of consecutive spans of about equal rows."""
  total = sum(len(s) for s in spans)
  items: list[list[Span]] = [[]]
  done = 0
  for span in spans:
    if items[-1] and done >= total * len(items) / max(count, 1):
      items.append([])
    items[-1].append(span)
    done += len(span)
  return [item for item in items if item]


class SpanReader:
  """Reads spans' rows from a run's files, inflating each file forward (reopened to go back)."""

  def __init__(self, run: dqn_replay.Run):
    self._run = run
    self._layouts = {k: run.layout(k) for k in run.available}
    self._streams: dict[int, list[gzip_npy.GzipNpyRows]] = {}
    self._opened = contextlib.ExitStack()

  def __enter__(self) -> 'SpanReader':
    return self

  def __exit__(self, *exc_info) -> None:
    self._opened.close()

  def rows(self, span: Span) -> dqn_replay.Rows:
    """The span's rows, each field inflated straight into one array (across checkpoint files and
    wrap-arounds alike); the frames' array has one spare row after them (`Rows.final_slot`)."""
    columns: Optional[list[np.ndarray]] = None
    filled = 0
    for layout in self._layouts.values():
      start, stop = max(span.first_add, layout.first_add), min(span.end_add, layout.add_count)
      while start < stop:  # Split where the add range wraps around the end of the file.
        row = start % layout.capacity
        take = min(stop - start, layout.capacity - row)
        streams = self._at(layout.checkpoint, row)
        if columns is None:
          columns = [np.empty((len(span) + (field == 'observation'),) + stream.row_shape,
                              dtype=stream.dtype)
                     for field, stream in zip(dqn_replay.STORE_FIELDS, streams)]
        for column, stream in zip(columns, streams):
          stream.read_into(column[filled:filled + take])
        filled += take
        start += take
    self._close_before(span.end_add)
    if columns is None or filled != len(span):
      raise errors.EpisodeBoundaryError(
          f'add indices {span.first_add}-{span.end_add - 1}: {filled} of them are in the logs',
          path=self._run.replay_logs, field='rows')
    observation = columns[0]
    return dqn_replay.Rows(observation[:len(span)], *columns[1:], first_add=span.first_add,
                           final_slot=observation[len(span):])

  def _close_before(self, add: int) -> None:
    """Closes the files of checkpoints whose rows all lie before add index `add` (spans come in
    add order; one going back reopens them): each checkpoint's open streams hold ~6 MiB of
    buffers, which a 5-checkpoint build otherwise kept to its end."""
    for checkpoint in [k for k in self._streams if self._layouts[k].add_count <= add]:
      for stream in self._streams.pop(checkpoint):
        stream.close()

  def _at(self, checkpoint: int, row: int) -> list[gzip_npy.GzipNpyRows]:
    """The checkpoint's streams, at storage row `row`."""
    streams = self._streams.get(checkpoint)
    if streams is None or streams[0].position > row:
      for stream in streams or ():
        stream.close()
      streams = self._streams[checkpoint] = [
          self._opened.enter_context(gzip_npy.GzipNpyRows(
              dqn_replay.store_file(self._run.replay_logs, f, checkpoint), field=f))
          for f in dqn_replay.STORE_FIELDS]
    for stream in streams:
      stream.skip(row - stream.position)
    return streams


def read_spans(replay_logs: str, spans: Sequence[Span],
               checkpoints: Optional[Sequence[int]] = None) -> Iterator[episodes.Trajectory]:
  """The episodes of `spans` (from `episode_spans`), one at a time. Each episode's rows are
  inflated straight into one array per field (no blocks joined afterwards), by a thread one episode
  ahead of the caller, except an episode over AHEAD_BYTES (a 27,000-step time-out: ~190 MB of
  frames), which is read when the caller asks for it, with nothing read ahead meanwhile: at most
  two episodes of up to AHEAD_BYTES are held besides the one in use."""
  run = dqn_replay.Run(replay_logs)
  in_range = dqn_replay.Selection(run, run.select(checkpoints))
  with SpanReader(run) as reader:
    for episode_rows in _rows_read_ahead(reader, spans):
      yield dqn_replay.to_trajectory(episode_rows, in_range.checkpoint_of)


def _rows_read_ahead(reader: SpanReader, spans: Sequence[Span]) -> Iterator[dqn_replay.Rows]:
  """Each span's rows in order: runs of short spans read ahead by a thread (which ends before the
  next long span is read: the reader is used by one thread at a time), long ones here."""
  for long, run in itertools.groupby(spans, key=lambda span: len(span) * ROW_BYTES > AHEAD_BYTES):
    run = list(run)
    if long:
      yield from map(reader.rows, run)
    else:
      yield from read_ahead.read_ahead(map(reader.rows, run), depth=1, name='dqn_replay-spans')
