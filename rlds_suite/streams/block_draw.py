"""Cached row blocks' unit rows, drawn in numpy (streams.row_blocks), here or ahead in a worker.

A block's draw (its units' first rows, dataset and pass tags, permuted by numpy's Fisher-Yates
seeded by the block) is index work, ~half a cached CartPole step's CPU (the shuffle alone ~9 ns
a unit, numpy's floor). By default on two cores or more (`as_numpy(stream)`), a worker process draws
blocks ahead (`drawn_ahead`) into memory shared with the consumer, whose thread then only gathers
and cuts. A thread would not do: it needs the GIL to start and to end every numpy call, which
the consumer's loop holds, so every hand-off waits on the consumer and costs it a wake-up
(measured on 2 idle cores: no gain). The worker barely makes the consumer wait: a block it has
not begun when the consumer reaches it is drawn in the consumer's thread (and skipped by the
worker), so a worker still starting or starved costs a non-blocking read and a write a block; one
it is drawing is not drawn twice: the consumer draws the furthest block requested that the worker
has not begun (stolen, kept for its turn), then waits for the worker's at most `WAIT` (issue 21,
paired on cartpole_like at load 0.4-0.9: 51.1M steps/s [50.2..51.8] vs 45.0M [39.3..45.8],
19.5 vs 22.2 ns of the consumer's CPU a step, 24% vs 41% of blocks drawn by the consumer; even
with two busy loops: 1.01x [0.92..1.03]); once it has missed `depth` blocks in a row it is sent
no requests for a while (`PAUSE`), since a starved worker woken every block slowed the consumer
(0.59x vs 0.74x inline at load ~3.9; with the pause 0.69x vs 0.73x at load ~3.5). It runs at
nice 19 in its own session (autogroup niced too), to take idle cores only. A process per
iterator (~29 MB resident, 15 of them its own), measured on this 2-core machine only
(streams.row_blocks has the numbers). This module imports numpy and the standard library only:
the worker loads it by path, without TensorFlow.
"""

from __future__ import annotations

import atexit
import mmap
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import weakref
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np

# A block's units from several parts (datasets, passes) carry their part above this bit of their
# row while permuted: rows stay below 2**40 (a trillion cached steps), parts below 2**22.
PART_SHIFT = 40
# Blocks a worker draws ahead of the consumer (each a slot of shared memory: 24 bytes a unit).
DEPTH = 4
# Blocks without requests after a worker missed `depth` in a row (starved: the cores busy), first
# and at most: then it sleeps, woken by no request, until a request finds it in time again.
PAUSE = (16, 1024)
# Seconds the consumer waits for a block the worker is drawing, after drawing one ahead meanwhile.
WAIT = 0.001
_MESSAGE = struct.Struct('<qq')  # Request (block, slot); reply (block, units or -1 if skipped).
# Starts a worker: this file loaded by path (not as part of rlds_suite, which imports TensorFlow).
_BOOT = ('import importlib.util, sys\n'
         'spec = importlib.util.spec_from_file_location("rlds_suite_block_draw", sys.argv[1])\n'
         'module = importlib.util.module_from_spec(spec)\n'
         'spec.loader.exec_module(module)\n'
         'module.serve(*map(int, sys.argv[2:]))\n')


class BlockDraw:
  """Block index -> (first row, dataset, pass) of each of its units, permuted: a pure function
  of the block index (see streams.row_blocks, which checks the arguments)."""

  def __init__(self, row_starts: Sequence[np.ndarray], unit_splits: Sequence[np.ndarray],
               schedule: np.ndarray, *, repeat: bool, stop: bool, totals: Sequence[Optional[int]],
               epoch_seeds: Sequence[int], permute_seed: Optional[int], shuffle: bool):
    self.arguments = dict(row_starts=list(row_starts), unit_splits=list(unit_splits),
                          schedule=schedule, repeat=repeat, stop=stop, totals=list(totals),
                          epoch_seeds=list(epoch_seeds), permute_seed=permute_seed,
                          shuffle=shuffle)  # Plain values: what a worker is sent.
    self._row_starts, self._unit_splits = tuple(row_starts), tuple(unit_splits)
    self._schedule = np.asarray(schedule, np.int64)  # [cycle blocks, datasets]
    self._starts = np.concatenate([np.zeros((1, len(row_starts)), np.int64),
                                   np.cumsum(self._schedule, axis=0)])  # [cycle + 1, datasets]
    self._repeat, self._stop = repeat, stop
    self._totals = list(totals)  # Units each dataset can give (None: repeated without end).
    self._epoch_seeds = tuple(epoch_seeds)
    self._permute_seed = permute_seed
    self._shuffle = shuffle
    self._orders: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    self.num_blocks = None if repeat else self._count_blocks()
    self.max_units = int(self._schedule.sum(axis=1).max(initial=0))

  def _start(self, block: int) -> np.ndarray:
    """[datasets] units each dataset gave before `block` (scheduled, not cut by exhaustion)."""
    cycles, within = divmod(block, len(self._schedule))
    return cycles * self._starts[-1] + self._starts[within]

  def _last_block(self, i: int) -> int:
    """The first block at whose end dataset i has given all its units (-1 when it has none)."""
    total, per_cycle = self._totals[i], int(self._starts[-1, i])
    if total == 0:
      return -1
    if per_cycle == 0:
      return np.iinfo(np.int64).max  # Never scheduled: it never runs out.
    base = max(total // per_cycle - 1, 0)
    ends = base * per_cycle + np.concatenate([self._starts[1:, i], per_cycle + self._starts[1:, i]])
    return base * len(self._schedule) + int(np.searchsorted(ends, total, side='left'))

  def _count_blocks(self) -> int:
    lasts = [self._last_block(i) for i in range(len(self._row_starts))]
    if self._stop:  # The stream ends with the block in which the first dataset runs out.
      return 0 if min(lasts) < 0 else min(lasts) + 1
    return max([last for last in lasts if last < np.iinfo(np.int64).max], default=-1) + 1  # DROP.

  def _epoch_order(self, i: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    """Dataset i's pass `epoch`: (the first row of its units, in the pass's order, minus the
    unit's position in the pass, per episode; [episodes + 1] units before each episode of the
    pass). Whole episodes in a seeded random order per pass; per episode, not per unit."""
    key = (i, epoch)
    if key not in self._orders:
      splits = self._unit_splits[i]
      episodes = len(splits) - 1
      order = (np.random.default_rng([self._epoch_seeds[i], epoch]).permutation(episodes)
               if self._shuffle else np.arange(episodes))
      counts = splits[order + 1] - splits[order]
      before = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
      # Keep this pass and the one before it: the next block reads on from where this one ended.
      self._orders = {**{k: v for k, v in self._orders.items() if k[0] != i or k[1] == epoch - 1},
                      key: (self._row_starts[i][order] - before[:-1], before)}
    return self._orders[key]

  def _piece(self, i: int, start: int, count: int) -> list[tuple[np.ndarray, int]]:
    """Dataset i's units [start, start + count), per pass they fall in: (the first row of each
    unit, as a fresh intp array (permuted in place, then indexed with), the pass)."""
    per_epoch = int(self._unit_splits[i][-1])
    parts = []
    while count > 0:
      epoch, offset = divmod(start, per_epoch)
      take = min(count, per_epoch - offset)
      shifts, before = self._epoch_order(i, epoch)
      # Array methods, not np.* wrappers: a block's fixed cost is microseconds of Python.
      lo = int(before.searchsorted(offset, side='right')) - 1
      hi = int(before.searchsorted(offset + take, side='left'))
      base = shifts[lo:hi].repeat(before[lo + 1:hi + 1] - before[lo:hi])
      within = offset - int(before[lo])
      rows = base[within:within + take].astype(np.intp, copy=False)
      rows += np.arange(offset, offset + take, dtype=np.intp)
      parts.append((rows, epoch))
      start, count = start + take, count - take
    return parts

  def _counts(self, block: int, start: np.ndarray) -> np.ndarray:
    wanted = self._schedule[block % len(self._schedule)]
    if self._repeat:
      return wanted
    given = np.array([max(min(w, total - s), 0)
                      for w, s, total in zip(wanted, start, self._totals)], np.int64)
    if self._stop and np.any(given < wanted):  # The last block, cut pro rata.
      fraction = min(g / w for g, w in zip(given, wanted) if w > 0)
      given = np.minimum(given, np.ceil(fraction * wanted.astype(np.float64)).astype(np.int64))
    return given

  def __call__(self, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Block `block` as ([units] first row (intp), dataset (int32), pass (int64)), in the block's
    order: a permutation seeded by the block, uniform over all orders (numpy's Fisher-Yates,
    `Generator.shuffle`), applied in place to the rows themselves (as `rows[permutation(n)]` with
    the same generator, without the index array and its take)."""
    block = int(block)
    start = self._start(block)
    parts = [(i, rows, epoch) for i, (s, c) in enumerate(zip(start, self._counts(block, start)))
             for rows, epoch in self._piece(i, int(s), int(c))]
    generator = (np.random.default_rng([self._permute_seed, block])
                 if self._permute_seed is not None else None)
    if len(parts) == 1:  # One dataset and one pass: constant tags, only the rows permuted.
      (dataset, first, epoch), = parts
      if generator is not None:
        generator.shuffle(first)
      return first, np.full(len(first), dataset, np.int32), np.full(len(first), epoch, np.int64)
    if not parts:
      return np.zeros(0, np.intp), np.zeros(0, np.int32), np.zeros(0, np.int64)
    # Each unit's part in the high bits of its row, so one shuffle permutes both.
    codes = np.concatenate([rows + (k << PART_SHIFT) for k, (_, rows, _) in enumerate(parts)])
    if generator is not None:
      generator.shuffle(codes)
    part = codes >> PART_SHIFT
    first = codes & ((1 << PART_SHIFT) - 1)
    return (first, np.array([i for i, _, _ in parts], np.int32)[part],
            np.array([epoch for _, _, epoch in parts], np.int64)[part])


class _Worker:
  """A worker process drawing requested blocks into slots of memory shared with this one."""

  def __init__(self, draw: BlockDraw, depth: int):
    self._process: Optional[subprocess.Popen] = None
    self._fds: list[int] = []
    self._pending = b''
    capacity = max(draw.max_units, 1)
    shared_fd = os.memfd_create('rlds_suite_block_draw')
    self._fds.append(shared_fd)
    size = _header(depth) + depth * 24 * capacity
    os.ftruncate(shared_fd, size)
    self._shared = mmap.mmap(shared_fd, size)
    self._position, self._begun, self._stolen, self.slots = _shared_arrays(
        self._shared, depth, capacity)
    self._begun[0], self._stolen[:] = -1, -1
    request_read, self._requests = os.pipe()
    self._replies, reply_write = os.pipe()
    self._fds += [self._requests, self._replies]
    try:
      self._process = subprocess.Popen(
          [sys.executable, '-c', _BOOT, os.path.abspath(__file__), str(request_read),
           str(reply_write), str(shared_fd), str(size)],
          pass_fds=(request_read, reply_write, shared_fd), stdin=subprocess.DEVNULL,
          stdout=subprocess.DEVNULL, start_new_session=True)
      _live.add(self)
      os.set_blocking(self._replies, False)
      state = pickle.dumps({'arguments': draw.arguments, 'depth': depth, 'capacity': capacity})
      self._write(struct.pack('<q', len(state)) + state)
    except BaseException:
      self.close()
      raise
    finally:
      os.close(request_read)
      os.close(reply_write)

  def _write(self, data: bytes) -> None:
    view = memoryview(data)
    while view:
      view = view[os.write(self._requests, view):]

  def claim(self, block: int) -> None:
    """Has the worker skip the blocks before `block`, unless it has begun drawing them."""
    self._position[0] = block

  def begun(self) -> int:
    """The last block the worker began (drawing or skipping it); -1 before its first."""
    return int(self._begun[0])

  def steal(self, block: int, slot: int) -> bool:
    """Has the worker skip requested `block` (in `slot`), to be drawn here; False where it has
    begun it already (then either may draw it, or neither: a block not served is drawn inline).
    Each side writes its word, then reads the other's, so at most a race draws it twice."""
    self._stolen[slot] = block
    return self.begun() < block

  def wait(self, seconds: float) -> None:
    """Until a reply arrives (or the worker ends), at most `seconds`."""
    select.select([self._replies], [], [], seconds)

  def request(self, block: int, slot: int) -> None:
    self._write(_MESSAGE.pack(block, slot))

  def replies(self) -> Optional[list[tuple[int, int]]]:
    """The (block, units or -1) replies arrived so far; None once the worker has ended."""
    try:
      data = os.read(self._replies, 1 << 16)
    except BlockingIOError:
      return []
    if not data:
      return None
    data, self._pending = self._pending + data, b''
    whole = len(data) // _MESSAGE.size * _MESSAGE.size
    self._pending = data[whole:]
    return [_MESSAGE.unpack_from(data, k) for k in range(0, whole, _MESSAGE.size)]

  def close(self) -> None:
    """Ends the worker (it also ends by itself once its requests pipe closes); once."""
    fds, self._fds = self._fds, []
    process, self._process = self._process, None
    if not fds and process is None:  # Closed already (at exit: this may run in finalization).
      return
    _live.discard(self)
    for fd in fds:
      os.close(fd)
    if process is not None:
      process.kill()
      process.wait()


# Workers of iterators still open at exit, ended before the interpreter finalizes its modules
# (an iterator's own `finally` may run only then, with `signal` and `subprocess` torn down).
_live: 'weakref.WeakSet[_Worker]' = weakref.WeakSet()
atexit.register(lambda: [worker.close() for worker in list(_live)])


def _header(depth: int) -> int:
  """Bytes of shared memory before the slots: the position, the block begun, each slot's steal."""
  return 16 + 8 * depth


def _shared_arrays(memory: mmap.mmap, depth: int, capacity: int) -> tuple[np.ndarray, ...]:
  """Views of the shared memory: the first block still wanted (the worker skips those below
  it: drawn by the consumer), the last block the worker began, per slot the block stolen from it
  (the consumer draws it; -1 none), and the slots ([depth, 3, capacity]: first rows, datasets,
  passes)."""
  words = np.frombuffer(memory, np.int64, 2 + depth, 0)
  slots = np.frombuffer(memory, np.int64, 3 * depth * capacity, _header(depth))
  return words[0:1], words[1:2], words[2:], slots.reshape(depth, 3, capacity)


def drawn_ahead(draw: BlockDraw, blocks: Iterable[int],
                depth: int = DEPTH) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
  """`draw(block)` for each of `blocks` (consecutive, from 0), drawn ahead by a worker process
  where it has finished one in time, else here. A block's first rows may be a view of shared
  memory, valid until the next block is asked for; its tags are the caller's own arrays.

  A block the worker is drawing when it is reached is not drawn twice: the consumer steals the
  furthest block requested that the worker has not begun, draws it (kept for its turn), then
  waits for the worker's (at most `WAIT`, then draws it too: the worker starved or gone)."""
  try:
    worker: Optional[_Worker] = _Worker(draw, depth)
  except (OSError, AttributeError, subprocess.SubprocessError):  # No memfd, no interpreter.
    worker = None
  free, ready, requested, ahead = list(range(depth)), {}, {}, 0
  kept = {}  # Blocks stolen from the worker's requests, drawn here ahead of their turn.
  misses, pause, resume = 0, PAUSE[0], 0  # Blocks it missed in a row; no requests before resume.

  def receive(block: int) -> bool:
    """Takes the replies arrived; False once the worker has ended."""
    replies = worker.replies()
    if replies is None:
      return False
    for done, units in replies:
      slot = requested.pop(done)
      if units < 0 or done < block or done in kept:  # Skipped, or drawn here meanwhile.
        free.append(slot)
      else:
        ready[done] = (slot, units)
    return True

  def share(block: int) -> bool:
    """Requested `block`, not yet replied: the worker's, where it has begun it (drawing one
    ahead here meanwhile), else claimed to be drawn here. False once the worker has ended."""
    if worker.begun() < block:
      worker.claim(block + 1)
      if worker.begun() < block:  # Read after the claim: it skips `block`.
        return True
    furthest = max((b for b in requested if b > block and b not in kept), default=None)
    if furthest is not None and worker.steal(furthest, requested[furthest]):
      kept[furthest] = draw(furthest)
    if not receive(block):
      return False
    if block in requested:
      worker.wait(WAIT)
      return receive(block)
    return True

  try:
    for block in blocks:
      if worker is not None:
        try:
          alive = receive(block)
          if alive:
            worker.claim(block)
            if block in requested and block not in kept:
              alive = share(block)
          if alive:
            if block in requested and block not in kept:  # Not drawn in time: after `depth`
              worker.claim(block + 1)  # such, a pause.
              misses += 1
              if misses >= depth:
                misses, pause, resume = 0, min(2 * pause, PAUSE[1]), block + pause
            ahead = max(ahead, block + 1)
            while free and block >= resume and ahead <= block + depth and (
                draw.num_blocks is None or ahead < draw.num_blocks):
              slot = free.pop()
              worker.request(ahead, slot)
              requested[ahead] = slot
              ahead += 1
        except BrokenPipeError:
          alive = False
        if not alive:  # It ended (killed, out of memory): drawn here from now on.
          worker.close()
          worker = None
          ready.clear()
      if block in kept:
        yield kept.pop(block)
      elif block in ready:
        misses, pause = 0, PAUSE[0]
        slot, units = ready.pop(block)
        first, datasets, epochs = worker.slots[slot, :, :units]
        yield first, datasets.astype(np.int32), epochs.copy()
        free.append(slot)
      else:
        yield draw(block)
  finally:
    if worker is not None:
      worker.close()


def serve(requests: int, replies: int, shared: int, size: int) -> None:
  """The worker: draws each requested block not yet skipped into its slot, until the requests
  pipe closes (the consumer done, or gone)."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # A Ctrl-C is the consumer's to handle.
  os.nice(19)  # Idle cores only: under load, its share of the session's CPU is ~1/70.
  try:
    with open('/proc/self/autogroup', 'w') as f:
      f.write('19')
  except OSError:
    pass
  with open(requests, 'rb', buffering=0) as inbox, open(replies, 'wb', buffering=0) as outbox:

    def read(count: int) -> Optional[bytes]:
      data = b''
      while len(data) < count:
        chunk = inbox.read(count - len(data))
        if not chunk:
          return None
        data += chunk
      return data

    header = read(8)
    state = header and read(struct.unpack('<q', header)[0])
    if not state:
      return
    state = pickle.loads(state)
    draw = BlockDraw(**state['arguments'])
    memory = mmap.mmap(shared, size)
    position, begun, stolen, slots = _shared_arrays(memory, state['depth'], state['capacity'])
    while (message := read(_MESSAGE.size)) is not None:
      block, slot = _MESSAGE.unpack(message)
      units = -1
      begun[0] = block  # Written before reading the consumer's words (see _Worker.steal).
      if block >= position[0] and stolen[slot] != block:
        first, datasets, epochs = draw(block)
        units = len(first)
        slots[slot, 0, :units] = first
        slots[slot, 1, :units] = datasets
        slots[slot, 2, :units] = epochs
      try:
        outbox.write(_MESSAGE.pack(block, units))
      except BrokenPipeError:
        return
