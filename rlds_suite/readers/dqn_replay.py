"""DQN Replay (batch_rl) logs -> trajectories, streamed: memory is a few episodes, not a checkpoint.

Each checkpoint N of a run is `replay_logs/$store$_{observation,action,reward,terminal}_ckpt.N.gz`
(gzip of `np.save` of dopamine's circular buffer: (capacity, 84, 84) uint8 single frames, int32
actions, float32 rewards clipped to [-1, 1], uint8 terminals) and `add_count_ckpt.N.gz`, the number
of rows ever added. batch_rl's logged buffer writes a checkpoint each time the add count reaches
capacity - 1 modulo capacity, and a last one at the end of training with the add count set to the
cursor.

Rows form one stream over the run, in add order. Checkpoint N holds the rows added since checkpoint
N - 1 (add indices [add_count(N - 1), add_count(N))), at storage row `add index % capacity`; when
that range wraps, its oldest part lies at the end of the file. Dopamine writes stack_size - 1
all-zero rows before each episode, never stores the observation after the last action, and (in the
runner that made these logs) stores a 27,000-step time-out with terminal=1. `POLICY` declares all of
that; episodes are cut at terminal rows and can continue into the next checkpoint.

`checkpoint_pieces` reads one checkpoint into the episodes that lie wholly inside it and the
fragments at its edges; `stitch` joins fragments across a checkpoint boundary. The sequential
reader (`read_run`) and the Beam pipeline of the dqn_replay builder use both, so they cut episodes
identically.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import logging
import os
import pathlib
import re
from typing import Callable, Iterable, Iterator, Optional, Sequence

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import read_ahead
from rlds_suite.readers import gzip_npy

STORE_FIELDS = ('observation', 'action', 'reward', 'terminal')
STACK_SIZE = 4
# dopamine's Atari runner: max_steps_per_episode = 27000 agent steps (108k frames).
TIME_LIMIT = 27_000
POLICY = episodes.BoundaryPolicy(
    final_observation=episodes.FinalObservation.NOT_STORED,
    reward_timing=episodes.RewardTiming.EARNED,
    ending_rule=episodes.EndingRule.TIME_LIMIT,
    time_limit=TIME_LIMIT,
    padding_rows=STACK_SIZE - 1)
BLOCK_ROWS = 1024  # Rows inflated at a time: ~7 MB of 84x84 frames.

# The 60 games of the DQN Replay Dataset (gs://atari-replay-datasets/dqn/GAME/RUN/replay_logs).
GAMES = (
    'AirRaid', 'Alien', 'Amidar', 'Assault', 'Asterix', 'Asteroids', 'Atlantis', 'BankHeist',
    'BattleZone', 'BeamRider', 'Berzerk', 'Bowling', 'Boxing', 'Breakout', 'Carnival', 'Centipede',
    'ChopperCommand', 'CrazyClimber', 'DemonAttack', 'DoubleDunk', 'ElevatorAction', 'Enduro',
    'FishingDerby', 'Freeway', 'Frostbite', 'Gopher', 'Gravitar', 'Hero', 'IceHockey', 'Jamesbond',
    'JourneyEscape', 'Kangaroo', 'Krull', 'KungFuMaster', 'MontezumaRevenge', 'MsPacman',
    'NameThisGame', 'Phoenix', 'Pitfall', 'Pong', 'Pooyan', 'PrivateEye', 'Qbert', 'Riverraid',
    'RoadRunner', 'Robotank', 'Seaquest', 'Skiing', 'Solaris', 'SpaceInvaders', 'StarGunner',
    'Tennis', 'TimePilot', 'Tutankham', 'UpNDown', 'Venture', 'VideoPinball', 'WizardOfWor',
    'YarsRevenge', 'Zaxxon')
RUNS = (1, 2, 3, 4, 5)
NUM_CHECKPOINTS = 51  # ckpt.0 ... ckpt.50 per run.
BUCKET_URL = 'https://storage.googleapis.com/atari-replay-datasets/dqn'


def store_file(replay_logs: errors.PathLike, field: str, checkpoint: int) -> pathlib.Path:
  return pathlib.Path(replay_logs) / f'$store${"_"}{field}_ckpt.{checkpoint}.gz'


def add_count_file(replay_logs: errors.PathLike, checkpoint: int) -> pathlib.Path:
  return pathlib.Path(replay_logs) / f'add_count_ckpt.{checkpoint}.gz'


def urls(game: str, run: int, checkpoint: int) -> list[str]:
  """Public URLs of one checkpoint's files ('$' escaped)."""
  base = f'{BUCKET_URL}/{game}/{run}/replay_logs'
  names = [store_file('', f, checkpoint).name for f in STORE_FIELDS]
  names.append(add_count_file('', checkpoint).name)
  return [f'{base}/{name.replace("$", "%24")}' for name in names]


def checkpoints_in(replay_logs: errors.PathLike) -> list[int]:
  """Checkpoint numbers in `replay_logs`, sorted; SchemaError naming any of a checkpoint's store or
  add_count files that is missing."""
  directory = pathlib.Path(replay_logs)
  if not directory.is_dir():
    raise errors.EmptyInputError('not a directory', path=directory)
  pattern = re.compile(r'(\$store\$_(?:observation|action|reward|terminal)|add_count)_ckpt\.(\d+)\.gz$')
  names = set(os.listdir(directory))
  found = sorted({int(m.group(2)) for m in map(pattern.match, names) if m})
  if not found:
    raise errors.EmptyInputError('no $store$_*_ckpt.N.gz files', path=directory)
  for checkpoint in found:
    for path in [store_file(directory, f, checkpoint) for f in STORE_FIELDS] + [
        add_count_file(directory, checkpoint)]:
      if path.name not in names:
        raise errors.SchemaError(f'checkpoint {checkpoint} has other files but not this one',
                                 path=path)
  return found


@dataclasses.dataclass
class Rows:
  """Consecutive rows of the add stream; row i has add index `first_add + i`.

  `final_slot`, when given, is one free row right after `observation` in the same array, where
  `to_trajectory` puts the final observation, so that `episodes.to_episode` takes the frames and
  it as one view instead of copying them into a new column (rows cut or joined have none).
  """
  observation: np.ndarray
  action: np.ndarray
  reward: np.ndarray
  terminal: np.ndarray
  first_add: int
  final_slot: Optional[np.ndarray] = None

  def __len__(self) -> int:
    return len(self.terminal)

  @property
  def end_add(self) -> int:
    return self.first_add + len(self)

  def take(self, start: int, stop: int) -> 'Rows':
    return Rows(self.observation[start:stop], self.action[start:stop], self.reward[start:stop],
                self.terminal[start:stop], self.first_add + start)

  @staticmethod
  def concat(parts: Sequence['Rows']) -> 'Rows':
    parts = [p for p in parts if len(p)]
    if len(parts) == 1:
      return parts[0]
    return Rows(*(np.concatenate([getattr(p, f) for p in parts]) for f in STORE_FIELDS),
                first_add=parts[0].first_add)


class Kind(enum.Enum):
  """Where a piece of a checkpoint lies relative to its episode ends."""
  PREFIX = 'prefix'  # Oldest rows of a wrapped range (end of the file): before HEAD in add order.
  HEAD = 'head'  # Rows up to and including the first episode end (all rows when there is none).
  EPISODE = 'episode'  # A whole episode: padding rows, steps, its terminal row.
  TAIL = 'tail'  # Rows after the last episode end: an episode that goes on in the next checkpoint.


@dataclasses.dataclass
class Piece:
  kind: Kind
  checkpoint: int
  rows: Rows
  closed: bool  # Ends with a terminal row.


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where checkpoint `checkpoint`'s new rows lie: add indices [first_add, add_count)."""
  checkpoint: int
  capacity: int
  first_add: int
  add_count: int
  # Whether the row before first_add ended an episode (None: that row is not in the given files).
  starts_episode: Optional[bool]


class Run:
  """The checkpoints of one run in `replay_logs`, with their add counts."""

  def __init__(self, replay_logs: errors.PathLike):
    self.replay_logs = pathlib.Path(replay_logs)
    self.available = checkpoints_in(self.replay_logs)

  @functools.lru_cache(maxsize=None)
  def capacity(self, checkpoint: int) -> int:
    """Rows in the checkpoint's files, which must agree."""
    counts = {}
    for field in STORE_FIELDS:
      path = store_file(self.replay_logs, field, checkpoint)
      with gzip_npy.GzipNpyRows(path, field=field) as rows:
        counts[path] = rows.num_rows
    first_path, first = next(iter(counts.items()))
    for path, count in counts.items():
      if count != first:
        raise errors.EpisodeBoundaryError(
            f'{count} rows, but {first_path.name} has {first}: checkpoint files of different '
            'lengths', path=path, field='rows')
    return first

  def _stored_add_count(self, checkpoint: int) -> int:
    path = add_count_file(self.replay_logs, checkpoint)
    value = gzip_npy.load_small(path, field='add_count')
    if value.shape != () or value.dtype.kind not in 'iu' or int(value) < 0:
      raise errors.SchemaError(f'expected a non-negative integer, got {value!r}', path=path,
                               field='add_count')
    return int(value)

  @functools.lru_cache(maxsize=None)
  def add_count(self, checkpoint: int) -> int:
    """Rows ever added when the checkpoint was written.

    batch_rl's last log stores the cursor instead (add_count % capacity); it is resolved against
    the previous checkpoint's count.
    """
    stored, capacity = self._stored_add_count(checkpoint), self.capacity(checkpoint)
    previous = checkpoint - 1
    if stored >= capacity or previous not in self.available:
      return stored
    before = self.add_count(previous)
    return before + (stored - before) % capacity

  def select(self, checkpoints: Optional[Sequence[int]]) -> list[int]:
    """`checkpoints` (default: every one present), sorted; SchemaError naming a missing one."""
    wanted = sorted(checkpoints) if checkpoints is not None else list(self.available)
    for k in wanted:
      if k not in self.available:
        raise errors.SchemaError(f'checkpoint {k} is missing',
                                 path=store_file(self.replay_logs, 'terminal', k))
    if not wanted:
      raise errors.EmptyInputError('no checkpoints selected', path=self.replay_logs)
    return wanted

  def layout(self, checkpoint: int) -> Layout:
    capacity, add_count = self.capacity(checkpoint), self.add_count(checkpoint)
    previous = checkpoint - 1
    oldest = max(0, add_count - capacity)
    if previous in self.available:
      before = self.add_count(previous)
      if before > add_count:
        raise errors.EpisodeBoundaryError(
            f'add count {add_count} is below checkpoint {previous}\'s {before}',
            path=add_count_file(self.replay_logs, checkpoint), field='add_count')
      first_add = max(oldest, before)
      if first_add > before:
        logging.warning('%s: rows %d-%d were never logged (the buffer lapped between '
                        'checkpoints); the episode in flight ends there', self.replay_logs,
                        before, first_add - 1)
        starts = None
      elif first_add == 0:
        starts = True
      else:
        starts = self._terminal_at(previous, first_add - 1)
    else:
      first_add = oldest
      starts = True if first_add == 0 else None
    return Layout(checkpoint, capacity, first_add, add_count, starts)

  def _terminal_at(self, checkpoint: int, add_index: int) -> bool:
    """The terminal flag of one row (the terminal file is 1 byte a row: read whole)."""
    path = store_file(self.replay_logs, 'terminal', checkpoint)
    row = add_index % self.capacity(checkpoint)
    with gzip_npy.GzipNpyRows(path, field='terminal') as rows:
      rows.skip(row, block_rows=1 << 20)
      return bool(rows.read(1)[0])


def checkpoint_pieces(run: Run, checkpoint: int, block_rows: int = BLOCK_ROWS) -> Iterator[Piece]:
  """Checkpoint `checkpoint`'s new rows as pieces in add order: PREFIX, HEAD, EPISODE..., TAIL.

  When the new rows wrap around the end of the file, PREFIX (the oldest rows, at the end of the
  file: in batch_rl's logs one row) is read first: the rows before it are inflated twice (gzip
  cannot seek) rather than holding the checkpoint's episodes until PREFIX is known.
  """
  layout = run.layout(checkpoint)
  capacity = layout.capacity
  start_row = layout.first_add % capacity
  wrapped = layout.add_count - layout.first_add > capacity - start_row
  # Storage rows in file order: [0, newest_stop) newest (when wrapped), [start_row, stop) oldest.
  newest_stop = layout.add_count % capacity if wrapped else 0
  oldest_stop = capacity if wrapped else start_row + layout.add_count - layout.first_add
  newest_first_add = layout.add_count - newest_stop
  with contextlib.ExitStack() as opened:

    def open_streams() -> list[gzip_npy.GzipNpyRows]:
      return [opened.enter_context(gzip_npy.GzipNpyRows(store_file(run.replay_logs, f, checkpoint),
                                                        field=f)) for f in STORE_FIELDS]

    streams = open_streams()

    def read_range(stop: int, base: int) -> Iterator[Rows]:
      """Storage rows up to `stop`; storage row p has add index base + p."""

      def blocks() -> Iterator[Rows]:
        while streams[0].position < stop:
          first = streams[0].position
          columns = [s.read(min(block_rows, stop - first)) for s in streams]
          yield Rows(*columns, first_add=base + first)

      return read_ahead.read_ahead(blocks(), name='dqn_replay-read-ahead')

    if wrapped:
      for s in streams:
        s.skip(start_row)
      prefix = Rows.concat(list(read_range(oldest_stop, layout.first_add - start_row)))
      yield Piece(Kind.PREFIX, checkpoint, prefix, bool(len(prefix) and prefix.terminal[-1]))
      for s in streams:
        s.close()
      streams[:] = open_streams()
      yield from _cut(read_range(newest_stop, newest_first_add), checkpoint)
    else:
      for s in streams:
        s.skip(start_row)
      yield from _cut(read_range(oldest_stop, layout.first_add - start_row), checkpoint)


def _cut(blocks: Iterable[Rows], checkpoint: int) -> Iterator[Piece]:
  """Rows in add order -> HEAD (up to the first end), EPISODEs, TAIL (after the last end)."""
  pending: list[Rows] = []
  kind = Kind.HEAD
  for block in blocks:
    ends = np.flatnonzero(block.terminal)
    start = 0
    for end in ends:
      pending.append(block.take(start, end + 1))
      yield Piece(kind, checkpoint, Rows.concat(pending), closed=True)
      pending, kind, start = [], Kind.EPISODE, end + 1
    if start < len(block):
      pending.append(block.take(start, len(block)))
  if pending:  # Rows after the last end; all rows (HEAD) when there was no end.
    yield Piece(Kind.HEAD if kind is Kind.HEAD else Kind.TAIL, checkpoint, Rows.concat(pending),
                closed=False)


@dataclasses.dataclass
class Stitched:
  """Episodes closed by joining rows across a checkpoint boundary, and the rows left open.

  `closed` pairs each episode's rows with whether they begin at an episode start (rows after a gap
  in add indices, or before the first known start, do not).
  """
  closed: list[tuple[Rows, bool]]
  open: Optional[Rows]
  open_started: bool


def stitch(parts: Sequence[Optional[Rows]], started: bool) -> Stitched:
  """Rows in add order (the tail before a boundary, the prefix and head after it) -> the episodes
  they close and the rows still open. `started`: whether the first rows begin an episode. A gap in
  add indices ends the episode before it, unfinished."""
  closed: list[tuple[Rows, bool]] = []
  open_parts: list[Rows] = []
  for part in (p for p in parts if p is not None and len(p)):
    if open_parts and open_parts[-1].end_add != part.first_add:
      closed.append((Rows.concat(open_parts), started))
      open_parts, started = [], False
    ends = np.flatnonzero(part.terminal)
    start = 0
    for end in ends:
      closed.append((Rows.concat(open_parts + [part.take(start, end + 1)]), started))
      open_parts, start, started = [], end + 1, True
    if start < len(part):
      open_parts.append(part.take(start, len(part)))
  return Stitched(closed, Rows.concat(open_parts) if open_parts else None, started)


def to_trajectory(rows: Rows, checkpoint_of: Callable[[int], int]) -> episodes.Trajectory:
  """One episode's rows (padding first) -> a Trajectory; unfinished rows end truncated."""
  trajectory = POLICY.trajectory(
      rows.observation, rows.action, rows.reward,
      terminal_flag=bool(rows.terminal[-1]),
      metadata={'checkpoint': int(checkpoint_of(rows.first_add + POLICY.padding_rows)),
                'first_add_index': int(rows.first_add + POLICY.padding_rows)})
  if rows.final_slot is None:
    return trajectory
  rows.final_slot[0] = trajectory.final_observation  # NOT_STORED: a copy of the last frame.
  return dataclasses.replace(trajectory, final_observation=rows.final_slot[0])


class Selection:
  """Which episodes a checkpoint range holds: those whose first step was added in one of its
  checkpoints (a checkpoint holds the add indices below its add count and at or above the one
  before's)."""

  def __init__(self, run: Run, checkpoints: Sequence[int]):
    self._wanted = set(checkpoints)
    self._available = list(run.available)
    self._ends = [run.add_count(k) for k in self._available]

  def checkpoint_of(self, add_index: int) -> int:
    index = int(np.searchsorted(self._ends, add_index, side='right'))
    return self._available[min(index, len(self._available) - 1)]

  def __call__(self, rows: Rows) -> bool:
    return self.checkpoint_of(rows.first_add + POLICY.padding_rows) in self._wanted


def _closed(joined: Stitched, in_range: Selection) -> Iterator[episodes.Trajectory]:
  """The episodes `stitch` closed that began at an episode start in the range."""
  for rows, is_start in joined.closed:
    if is_start and in_range(rows):
      yield to_trajectory(rows, in_range.checkpoint_of)


def read_run(replay_logs: errors.PathLike, checkpoints: Optional[Sequence[int]] = None,
             block_rows: int = BLOCK_ROWS) -> Iterator[episodes.Trajectory]:
  """The episodes that start in `checkpoints` (default: all present), in one pass over the files.

  An episode still open after the last checkpoint is read on into the following checkpoints
  present; when none is left it ends truncated. Episodes that started before the first
  checkpoint are left out (their start is not in the range).
  """
  run = Run(replay_logs)
  wanted = run.select(checkpoints)
  in_range = Selection(run, wanted)
  open_rows: Optional[Rows] = None
  open_started = False
  for checkpoint in [k for k in run.available if k >= wanted[0]]:
    past_range = checkpoint > wanted[-1]  # Only the episode in flight continues here.
    if past_range and open_rows is None:
      break
    if open_rows is None:
      open_started = bool(run.layout(checkpoint).starts_episode)
    prefix = tail = joined = None
    for piece in checkpoint_pieces(run, checkpoint, block_rows):
      if piece.kind is Kind.PREFIX:
        prefix = piece.rows
        continue
      if joined is None:  # The episode in flight ends before this checkpoint's own episodes.
        joined = stitch([open_rows, prefix, piece.rows if piece.kind is Kind.HEAD else None],
                        open_started)
        yield from _closed(joined, in_range)
        if past_range:
          break
      if piece.kind is Kind.EPISODE and in_range(piece.rows):
        yield to_trajectory(piece.rows, in_range.checkpoint_of)
      elif piece.kind is Kind.TAIL:
        tail = piece.rows
    if joined is None:  # No HEAD: the checkpoint's new rows are all in PREFIX (or none).
      joined = stitch([open_rows, prefix], open_started)
      yield from _closed(joined, in_range)
    if past_range:
      open_rows = None if joined.closed else joined.open
    elif tail is not None:
      open_rows, open_started = tail, True
    else:
      open_rows, open_started = joined.open, joined.open_started
  if open_rows is not None and open_started and in_range(open_rows):
    yield to_trajectory(open_rows, in_range.checkpoint_of)
