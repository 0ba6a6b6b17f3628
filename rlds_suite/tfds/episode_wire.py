"""Episodes -> serialized tf.train.Example bytes from a plan of flat leaves, batch per field.

The plan (`Leaf`s) is made from a TFDS FeaturesDict by `rlds_suite.tfds.writing`; this module
needs only numpy, the wire format (`example_wire`) and encoders (`compression`) it shares with the
recording, so a build's pool workers import neither TensorFlow nor TFDS (a worker is ~40 MB, not ~500 MB).
Each field of a batch of episodes is encoded once (float32 bytes, packed varints, PNG or ZLIB per
step, raw rows) and cut into per-episode entries: the bytes parse to the same example as TFDS's
own serialization (tests/test_writing.py checks it).
"""

from __future__ import annotations

import collections
import concurrent.futures
import ctypes
import dataclasses
import os
import re
import secrets
import signal
import threading
from multiprocessing import shared_memory
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from rlds_suite.tfds import compression
from rlds_suite.tfds import example_wire
from rlds_suite.tfds import tfrecord_files

# How a leaf is written: packed numbers, or a BytesList with one item per row.
FLOAT, INT, RAW, PNG, ZLIB, TEXT = 'float', 'int', 'raw', 'png', 'zlib', 'text'
STOP_SIGNALS = ('SIGTERM', 'SIGUSR1')  # A build stops at the next example on these.
# How builds deflate PNG frames (compression.BUILD: ISA-L, a table per episode). Read when a
# batch is serialized or packed for a worker, so a benchmark may set it to compare settings.
png_encoder = compression.BUILD
ENCODE_ROWS = 1024  # Rows encoded at a time (an 84x84 frame's scanlines: 7 MiB).


@dataclasses.dataclass(frozen=True)
class Leaf:
  """One flat feature: its key ('steps/observation'), how it is written, its row dtype and shape
  (per step for step leaves, per episode otherwise)."""
  key: str
  kind: str
  dtype: str
  shape: tuple[int, ...]
  per_step: bool


def worker_init(writer: Optional[int] = None) -> None:
  """A pool worker leaves Ctrl-C and the stop signals to the writer (process id `writer`), which
  ends it; it is killed when the writer dies, however (Linux)."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  for name in STOP_SIGNALS:
    signal.signal(getattr(signal, name), signal.SIG_IGN)
  _die_with_parent(writer)
  _keep_freed_heap()


_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: Optional[int]) -> None:
  """Has the kernel kill this process when its parent ends. A builder killed with SIGKILL left its
  pool's workers waiting for batches for ever (~100 MB each), and its shared-memory blocks, which
  the resource tracker unlinks only once every process that could use them is gone."""
  try:
    prctl = ctypes.CDLL(None, use_errno=True).prctl
  except (OSError, AttributeError):  # Not Linux: workers end with the pool as before.
    return
  prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
  if parent is not None and os.getppid() != parent:  # It died before the call above.
    os._exit(1)  # pylint: disable=protected-access


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h).
_HEAP_KEPT = 32 << 20  # glibc's largest mmap threshold (64-bit).


def _keep_freed_heap() -> bool:
  """Has glibc serve a worker's large buffers (a batch's records and PNG items, a few MiB each)
  from memory it freed before, not from fresh mappings: each fresh page was faulted and cleared by
  the kernel, ~1 us of a worker's ~14 per DQN Replay frame. A worker keeps what a batch needs,
  up to _HEAP_KEPT more. Whether glibc took it."""
  try:
    mallopt = ctypes.CDLL(None).mallopt
  except (OSError, AttributeError):  # Not glibc.
    return False
  mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
  return bool(mallopt(_M_MMAP_THRESHOLD, _HEAP_KEPT) and mallopt(_M_TRIM_THRESHOLD, 2 * _HEAP_KEPT))


def ready() -> int:
  """A pool worker's warm-up task: it runs once the worker has imported this module (numpy, the
  encoders); its process id."""
  return os.getpid()


def serialize(plan: Sequence[Leaf], episodes: Sequence[Mapping[str, Any]],
              png: Optional[compression.PngEncoder] = None) -> list[bytes]:
  """Each episode's tf.train.Example bytes. An episode is {leaf key: value}: for step leaves an
  array of rows (steps first), else one value; values are already checked against the plan.
  PNG frames are encoded with `png` (default: `png_encoder`)."""
  columns = {}
  for leaf in plan:
    values = [episode[leaf.key] for episode in episodes]
    if leaf.per_step:  # One episode's rows are used as they are (no copy of a long episode).
      column = values[0] if len(values) == 1 else np.concatenate(values) if values else None
      columns[leaf.key] = (column, [len(v) for v in values])
    else:
      columns[leaf.key] = (values, [1] * len(values))
  return [example_wire.example_of(parts)
          for parts in _example_pieces(plan, columns, len(episodes), png or png_encoder)]


def _example_pieces(plan: Sequence[Leaf], columns: Mapping[str, tuple[Any, Sequence[int]]],
                    count: int, png: compression.PngEncoder) -> list[list[Any]]:
  """The map entries of `count` episodes given per leaf as (every episode's rows or values in
  order, each episode's row count), as pieces to join per episode; PNG frames encoded with `png`."""
  pieces: list[list[Any]] = [[] for _ in range(count)]
  for leaf in plan:
    column, lengths = columns[leaf.key]
    for index, entry in enumerate(_entries(leaf, example_wire.key_field(leaf.key), column,
                                           lengths, png)):
      pieces[index] += entry
  return pieces


# --- Batches to pool workers through shared memory ---------------------------------------------

_SHM_DIR = '/dev/shm'
_BLOCK_PREFIX = 'rlds_suite_'  # Blocks are named rlds_suite_<creator's pid>_<random hex>.
_BLOCK_NAME = re.compile(re.escape(_BLOCK_PREFIX) + r'(\d+)_[0-9a-f]+')
_MIN_BLOCK = 16 << 20
MAX_BLOCK = 64 << 20  # A larger batch (one long episode) is serialized by the writer instead.
_ALIGN = 64
_ROOM_MIN = 1 << 16  # A batch's block has at least this room for its frames.
_ATTACHED_MAX = 8  # Blocks a worker keeps mapped (the writer reuses a few).


@dataclasses.dataclass(frozen=True)
class Packed:
  """A batch in a shared-memory block: per step leaf (byte offset, each episode's row count), and
  the episode-level values, which are small and pickled; the writer's PNG setting; where in the
  block the worker writes the batch's TFRecord frames (offset, room in bytes)."""
  block: str
  steps: dict[str, tuple[int, list[int]]]
  others: dict[str, list[Any]]
  count: int
  png: compression.PngEncoder
  out: tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Framed:
  """A worker's answer to a Packed batch: its records, framed as TFRecords, back to back in the
  block from `offset`; each record's length."""
  block: str
  offset: int
  lengths: list[int]


Serialized = Union[bytes, tfrecord_files.Frames]  # A record, or framed records in a block.


class SharedBatches:
  """Submits batches to a process pool through reusable shared-memory blocks, both ways: the
  writer copies each step column once into a block and the worker reads it in place, then writes
  the batch's TFRecord frames (checksummed) into the same block, which the writer writes to the
  shard from there. Neither the frames (~10 s of the writer's time per 1M DQN Replay rows) nor
  the serialized records (~3.6 s) are pickled through a pipe. A batch shared memory cannot take
  (a container's small /dev/shm) is pickled as before, and records that outgrow the room left for
  them come back pickled; a batch whose block would exceed MAX_BLOCK (a 27,000-step Atari
  episode: 190 MiB of frames) is serialized in the calling process from the episodes' own arrays,
  so no block outgrows MAX_BLOCK and no copy of the long episode is made for a worker."""

  def __init__(self):
    self._blocks: dict[str, shared_memory.SharedMemory] = {}
    self._free: list[str] = []
    self._lock = threading.Lock()
    remove_orphaned_blocks()

  def submit(self, pool: concurrent.futures.Executor, plan: Sequence[Leaf],
             episodes: Sequence[Mapping[str, Any]]) -> 'Submitted':
    """`serialize(plan, episodes)` run in `pool` (or here, at once, when the batch's block would
    exceed MAX_BLOCK)."""
    if _block_bytes(_step_bytes(plan, episodes)) > MAX_BLOCK:
      done: concurrent.futures.Future = concurrent.futures.Future()
      done.set_result(serialize(plan, episodes, png_encoder))
      return Submitted(done, self, None)
    packed = self._pack(plan, episodes)
    if packed is None:
      return Submitted(pool.submit(serialize, plan, episodes, png_encoder), self, None)
    return Submitted(pool.submit(serialize_packed, plan, packed), self, packed.block)

  def close(self) -> None:
    """Frees every block (call once the pool has stopped)."""
    with self._lock:
      blocks, self._blocks, self._free = self._blocks, {}, []
    for block in blocks.values():
      _closed(block)
      block.unlink()

  @property
  def block_sizes(self) -> list[int]:
    """The bytes of each shared-memory block held now."""
    with self._lock:
      return sorted(block.size for block in self._blocks.values())

  def frames(self, name: str, framed: Framed) -> tfrecord_files.Frames:
    """The records a worker framed in block `name`."""
    size = sum(framed.lengths) + len(framed.lengths) * (
        tfrecord_files.HEADER_BYTES + tfrecord_files.FOOTER_BYTES)
    return tfrecord_files.Frames(self._blocks[name].buf[framed.offset:framed.offset + size],
                                 framed.lengths)

  def _pack(self, plan: Sequence[Leaf],
            episodes: Sequence[Mapping[str, Any]]) -> Optional[Packed]:
    step_leaves = [leaf for leaf in plan if leaf.per_step]
    sizes = [_aligned(sum(episode[leaf.key].nbytes for episode in episodes))
             for leaf in step_leaves]
    block = self._take(_block_bytes(sum(sizes)))
    if block is None:
      return None
    steps, offset = {}, 0
    for leaf, size in zip(step_leaves, sizes):
      values = [episode[leaf.key] for episode in episodes]
      lengths = [len(value) for value in values]
      out = np.ndarray((sum(lengths),) + leaf.shape, np.dtype(leaf.dtype), buffer=block.buf,
                       offset=offset)
      if len(out):
        np.concatenate(values, out=out)
      del out
      steps[leaf.key] = (offset, lengths)
      offset += size
    others = {leaf.key: [episode[leaf.key] for episode in episodes]
              for leaf in plan if not leaf.per_step}
    return Packed(block.name, steps, others, len(episodes), png_encoder,
                  (offset, block.size - offset))

  def _take(self, size: int) -> Optional[shared_memory.SharedMemory]:
    """A free block of at least `size` bytes (a new one when none fits), or None when shared
    memory has not twice that room."""
    with self._lock:
      for name in self._free:
        if self._blocks[name].size >= size:
          self._free.remove(name)
          return self._blocks[name]
      if self._free:  # Too small: replaced by a larger one.
        small = self._blocks.pop(self._free.pop(0))
        _closed(small)
        small.unlink()
    size = max(_MIN_BLOCK, 1 << max(size - 1, 1).bit_length())
    try:
      room = os.statvfs(_SHM_DIR)
      if room.f_bavail * room.f_frsize < 2 * size:
        return None
      block = shared_memory.SharedMemory(
          name=f'{_BLOCK_PREFIX}{os.getpid()}_{secrets.token_hex(6)}', create=True, size=size)
    except OSError:
      return None
    with self._lock:
      self._blocks[block.name] = block
    return block

  def release(self, name: str) -> None:
    """Block `name` may take another batch."""
    with self._lock:
      if name in self._blocks:
        self._free.append(name)


def remove_orphaned_blocks(directory: str = _SHM_DIR) -> list[str]:
  """Unlinks the blocks whose creator is no longer alive, and returns their names. A builder
  killed with SIGKILL together with Python's resource tracker (its process group killed, as a
  job scheduler or `kill -9 -PGID` does) cannot unlink its own: each would hold its memory until
  the machine restarts."""
  try:
    names = os.listdir(directory)
  except OSError:
    return []
  removed = []
  for name in names:
    match = _BLOCK_NAME.fullmatch(name)
    if match is None or _alive(int(match[1])):
      continue
    try:
      os.unlink(os.path.join(directory, name))
    except OSError:
      continue
    removed.append(name)
  return removed


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # Another user's live process.
    return True
  return True


class Submitted:
  """A batch given to SharedBatches: its serialized records, in order, once they are ready."""

  def __init__(self, future: concurrent.futures.Future, shared: SharedBatches,
               block: Optional[str]):
    self._future, self._shared, self._block = future, shared, block

  def done(self) -> bool:
    return self._future.done()

  def cancel(self) -> None:
    self._future.cancel()

  def records(self) -> Iterator[Serialized]:
    """The records (bytes) or their frames in the block; the block is used again once the caller
    asks for more after the last (a Frames is written before that, never kept)."""
    result = self._future.result()
    try:
      if isinstance(result, Framed):
        yield self._shared.frames(self._block, result)
      else:
        yield from result
    finally:
      if self._block is not None:
        self._shared.release(self._block)
        self._block = None


def serialize_packed(plan: Sequence[Leaf], packed: Packed) -> Union[Framed, list[bytes]]:
  """`serialize` of a batch packed by `SharedBatches` (in a pool worker): the records framed in
  the block's room for them, or as bytes when they outgrow it."""
  block = _attached(packed.block)
  columns: dict[str, tuple[Any, Sequence[int]]] = {}
  for leaf in plan:
    if leaf.per_step:
      offset, lengths = packed.steps[leaf.key]
      columns[leaf.key] = (np.ndarray((sum(lengths),) + leaf.shape, np.dtype(leaf.dtype),
                                      buffer=block.buf, offset=offset), lengths)
    else:
      columns[leaf.key] = (packed.others[leaf.key], [1] * packed.count)
  try:
    pieces = _example_pieces(plan, columns, packed.count, packed.png)
    framed = _framed(block.buf, packed, pieces)
    return framed if framed is not None else [example_wire.example_of(p) for p in pieces]
  finally:
    columns.clear()  # No view of the block outlives the call (it may be closed later).


def _framed(buf: memoryview, packed: Packed, pieces: Sequence[Sequence[Any]]) -> Optional[Framed]:
  """Writes each example's TFRecord frame into `buf` at the batch's room for them; None when
  they do not fit. (Each record is joined first: one C-level join, checksum and copy cost a
  third of copying and checksumming its thousands of pieces one by one.)"""
  pos, end = packed.out
  end += pos
  lengths = []
  for parts in pieces:
    record = example_wire.example_of(parts)
    if pos + len(record) + tfrecord_files.HEADER_BYTES + tfrecord_files.FOOTER_BYTES > end:
      return None
    header, footer = tfrecord_files.frame_parts(record)
    for part in (header, record, footer):
      buf[pos:pos + len(part)] = part
      pos += len(part)
    lengths.append(len(record))
  return Framed(packed.block, packed.out[0], lengths)


_attached_blocks: collections.OrderedDict = collections.OrderedDict()


def _attached(name: str) -> shared_memory.SharedMemory:
  """The writer's block `name`, mapped once per worker; the least recently used beyond a few are
  unmapped."""
  if name in _attached_blocks:
    _attached_blocks.move_to_end(name)
    return _attached_blocks[name]
  block = shared_memory.SharedMemory(name=name)
  _attached_blocks[name] = block
  while len(_attached_blocks) > _ATTACHED_MAX:
    _closed(_attached_blocks.popitem(last=False)[1])
  return block


def _closed(block: shared_memory.SharedMemory) -> None:
  """Unmaps `block`, unless a view of it is still alive (in a traceback, or the caller's last
  Frames): its mapping then goes when that view does."""
  try:
    block.close()
  except BufferError:
    pass


def _step_bytes(plan: Sequence[Leaf], episodes: Sequence[Mapping[str, Any]]) -> int:
  return sum(_aligned(sum(episode[leaf.key].nbytes for episode in episodes))
             for leaf in plan if leaf.per_step)


def _block_bytes(step_bytes: int) -> int:
  """A block's bytes for a batch of `step_bytes` (aligned): its columns, and room for its frames
  (PNG frames take less; int64 varints up to 10/8; byte rows and lists a few header bytes)."""
  return step_bytes + _aligned(step_bytes // 2 + _ROOM_MIN)


def _aligned(size: int) -> int:
  return -(-size // _ALIGN) * _ALIGN


def _entries(leaf: Leaf, key: bytes, column: Any, lengths: Sequence[int],
             png: compression.PngEncoder) -> list[list[Any]]:
  """The map entry of `leaf` for each episode, as pieces to join (bytes or memoryviews);
  `column` holds every episode's rows in order."""
  bounds = np.zeros(len(lengths) + 1, dtype=np.int64)
  np.cumsum(lengths, out=bounds[1:])
  if leaf.kind == TEXT:
    items = [value.encode('utf-8') if isinstance(value, str) else bytes(value) for value in column]
    return [_bytes_entry(key, [item]) for item in items]
  rows = np.asarray(column, dtype=leaf.dtype) if not leaf.per_step else column
  rows = rows.reshape((int(bounds[-1]),) + tuple(leaf.shape))
  if leaf.kind == PNG:  # Episode by episode: a column's PNG table is its episode's.
    return [_items_entry(key, _png_items(rows[bounds[i]:bounds[i + 1]], png))
            for i in range(len(lengths))]
  if leaf.kind == ZLIB:
    return [_bytes_entry(key, _zlib_items(rows[bounds[i]:bounds[i + 1]]))
            for i in range(len(lengths))]
  if leaf.kind == RAW:  # One item of little-endian bytes per row, all rows' items at once.
    raw = np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder('<')).reshape(len(rows), -1)
    data = raw.view(np.uint8).reshape(len(rows), -1)
    header = np.frombuffer(example_wire.bytes_item_header(data.shape[1]), np.uint8)
    items = np.concatenate([np.broadcast_to(header, (len(data), len(header))), data], axis=1)
    payload, item_bytes = memoryview(items).cast('B'), items.shape[1]
    out = []
    for i in range(len(lengths)):
      part = payload[bounds[i] * item_bytes:bounds[i + 1] * item_bytes]
      out.append([example_wire.entry_prefix(key, example_wire.BYTES_LIST, len(part)), part])
    return out
  per_row = int(np.prod(leaf.shape, dtype=np.int64))
  if leaf.kind == FLOAT:
    payload = memoryview(np.ascontiguousarray(rows, dtype='<f4').reshape(-1)).cast('B')
    offsets = bounds * (per_row * 4)
    kind = example_wire.FLOAT_LIST
  else:
    values, value_offsets = example_wire.varints(rows.reshape(-1))
    payload, offsets = memoryview(values), value_offsets[bounds * per_row]
    kind = example_wire.INT64_LIST
  out = []
  for i in range(len(lengths)):
    part = payload[offsets[i]:offsets[i + 1]]
    header = example_wire.packed_header(len(part))
    out.append([example_wire.entry_prefix(key, kind, len(header) + len(part)), header, part])
  return out


def _png_items(rows: np.ndarray, png: compression.PngEncoder) -> list[bytes]:
  """Each row's PNG as a BytesList item (compression.png_items), ENCODE_ROWS rows at a time: the
  encoder's working copy of the rows (PNG's scanlines, as large as the frames) stays bounded for a
  long episode. Given one episode's rows, its bytes are the episode's alone, whichever batch or
  columns it is serialized in ('isal-table' PNGs: one table per episode, made from a sample of its
  frames)."""
  table_images = compression.table_sample(rows) if len(rows) else None
  return [compression.png_items(rows[start:start + ENCODE_ROWS], png, table_images,
                                example_wire.bytes_item_header)[0]
          for start in range(0, len(rows), ENCODE_ROWS)]


def _zlib_items(rows: np.ndarray) -> list[bytes]:
  """Each row ZLIB-encoded, ENCODE_ROWS rows at a time (a bounded contiguous copy of them)."""
  return [item for start in range(0, len(rows), ENCODE_ROWS)
          for item in compression.zlib_rows(rows[start:start + ENCODE_ROWS])]


def _items_entry(key: bytes, items: Sequence[bytes]) -> list[Any]:
  """A BytesList entry of items already framed (each piece of `items` is items back to back)."""
  return [example_wire.entry_prefix(key, example_wire.BYTES_LIST, sum(map(len, items))), *items]


def _bytes_entry(key: bytes, items: Sequence[bytes]) -> list[Any]:
  """A BytesList entry of `items` as pieces: its prefix, then each item's header and bytes."""
  pieces: list[Any] = [b'']
  size = 0
  for item in items:
    header = example_wire.bytes_item_header(len(item))
    pieces += (header, item)
    size += len(header) + len(item)
  pieces[0] = example_wire.entry_prefix(key, example_wire.BYTES_LIST, size)
  return pieces
