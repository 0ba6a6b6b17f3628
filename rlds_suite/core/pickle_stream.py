"""Streaming the items of a pickled list one at a time, through the restricted unpickler.

Benchmark files pickle every trajectory into one list (il-representations' Atari `arr_0` object
array, its dm_control `TrajectoryWithRew` lists). `pickle.load` builds the whole list, so memory
grows with the file. Pickle writes list items in batches (`MARK item ... APPENDS`, up to 1000)
and an item may take several stack slots while it is built (`cls, args, NEWOBJ`), so where an item
ends is only known for sure once the batch closes. One read of the stream serves two passes: the
first walks the opcodes (pickletools' table, nothing built; each numpy array's ~30 opcodes before
its data stepped over with one regex match), keeps the bytes it read, and takes an item as
complete when the next one starts after a finished value; the second runs the restricted
unpickler (`safe_pickle.RestrictedUnpickler`, with all its checks) opcode by opcode over the kept
bytes, one item behind the first, hands each completed item out and drops it (and its memo
entries). Memory holds about two items' pickled bytes and the item being built.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import pickle
import pickletools
import re
from typing import IO, Any, Callable, Iterator, Optional

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import safe_pickle

_MARK = pickletools.markobject
# Memoized objects of these types, made while an item was built, belong to it and are forgotten
# with it; globals, dtypes, strings and short byte strings (pickle refers to them again from later
# items, e.g. ndarray's b'b' reconstruct argument) are kept.
_ITEM_DATA = (np.ndarray, list, dict, tuple, set, safe_pickle.ImitationTrajectory)
_SHORT_BYTES = 64


def iter_list_items(open_stream: Callable[[], IO[bytes]], *, source: str,
                    max_bytes: Optional[int] = None) -> Iterator[Any]:
  """Yields the items of the first list in the pickle, each once it is complete.

  `open_stream` returns the pickle stream positioned at its first opcode; it is called once: the
  first pass reads it and keeps the bytes the second pass has not run yet (about one item).
  `max_bytes` bounds what one opcode may claim and what one item may take (e.g. what the
  compressed file can expand to; 1 GiB at most): a claim past it is refused before any of it
  is read. Raises UnsafePickleError for anything the restricted unpickler
  refuses and CorruptFileError for damaged data, naming `source`.
  """
  with open_stream() as f:
    yield from _StreamingUnpickler(f, source=source, max_bytes=max_bytes).items()


_SCAN_CHUNK = 1 << 17  # The first pass's reads (it keeps about two).
# It skips claims in reads this large: each is then its own mapping (glibc's largest mmap
# threshold), given back as soon as the second pass has copied it. Freed 128 KiB reads stay in the
# heap until all above them are freed too, so a claim's bytes were held twice while copied.
_SKIP_READ = 32 << 20


@dataclasses.dataclass(frozen=True)
class _Op:
  """What the first pass needs of an opcode: its stack effect and how to skip its argument."""
  name: str
  mark: int  # Index of the mark in its stack_before, or -1.
  pops: int  # Slots it pops (below the mark, for mark ops).
  pushes: int
  arg_bytes: int  # > 0: fixed size; 0: none; < 0: pickletools' length-prefixed kinds.
  arg_lines: int  # Newline-terminated argument lines (protocol 0 ops).


def _op_table() -> dict[int, _Op]:
  table = {}
  for op in pickletools.opcodes:
    before = op.stack_before
    mark = before.index(_MARK) if _MARK in before else -1
    arg = op.arg
    lines = 0 if arg is None or arg.n != pickletools.UP_TO_NEWLINE else (
        2 if arg.name == 'stringnl_noescape_pair' else 1)
    table[op.code.encode('latin-1')[0]] = _Op(
        name=op.name, mark=mark, pops=mark if mark >= 0 else len(before),
        pushes=len(op.stack_after), arg_bytes=0 if arg is None or lines else arg.n,
        arg_lines=lines)
  return table


_OPS = _op_table()
# Length-prefixed arguments: (bytes of the length, signed).
_LENGTH_PREFIX = {pickletools.TAKEN_FROM_ARGUMENT1: (1, False),
                  pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
                  pickletools.TAKEN_FROM_ARGUMENT4U: (4, False),
                  pickletools.TAKEN_FROM_ARGUMENT8U: (8, False)}


_SPECIAL = frozenset(('MARK', 'STOP', 'APPEND', 'APPENDS', 'EMPTY_LIST'))
# The first pass's table, by opcode byte: (argument kind, its size (fixed, with the opcode byte) or
# length width (prefixed) or line count, signed length, pops, pushes, special).
_FIXED_ARG, _PREFIXED_ARG, _LINE_ARG = 0, 1, 2


def _scan_table() -> dict[int, tuple[int, int, bool, int, int, bool]]:
  table = {}
  for code, op in _OPS.items():
    special = op.name in _SPECIAL or op.mark >= 0
    if op.arg_lines:
      entry = (_LINE_ARG, op.arg_lines, False)
    elif op.arg_bytes < 0:
      entry = (_PREFIXED_ARG, *_LENGTH_PREFIX[op.arg_bytes])
    else:
      entry = (_FIXED_ARG, 1 + op.arg_bytes, False)
    table[code] = (*entry, op.pops, op.pushes, special)
  return table


_SCAN = _scan_table()
_LOOKAHEAD = 16  # An opcode and its fixed argument or length prefix (at most 9 bytes) fit.


def _array_pattern() -> re.Pattern:
  """The opcodes numpy pickles an array with (protocols 2-4, with or without a memo), from
  `_reconstruct` up to the data of its state: `_reconstruct(ndarray, (0,), b'b')`, then
  MARK 1 shape dtype fortran data, with the dtype made (numpy.dtype(typestr, align, copy) and its
  BUILD) or fetched from the memo. Whatever the memo holds, these opcodes push one slot (the
  array) and open one mark level holding five, so the first pass steps over them at once."""
  def put(name: str) -> bytes:
    return rb'(?P<%s>q.|r.{4}|\x94)?' % name.encode()
  ref = rb'(?:c[^\n]{1,64}\n[^\n]{1,64}\n|h.|j.{4})'
  integer = rb'(?:K.|M..|J.{4})'
  text = rb'X\x01\x00\x00\x00.|X\x02\x00\x00\x00..|X\x03\x00\x00\x00...|\x8c\x01.|\x8c\x02..|\x8c\x03...'
  flag = rb'\x88|\x89|K[\x00\x01]'
  return re.compile(b''.join((
      ref, put('p0'), ref, put('p1'), rb'(?:(?P<zero>K\x00\x85)|h.|j.{4})', put('p2'),
      rb'(?:C\x01b|h.|j.{4})', put('p3'), rb'\x87', put('p4'), rb'R', put('p5'),
      rb'\(K\x01(?P<shape>\)|', integer, rb'\x85|', integer, rb'{2}\x86|', integer, rb'{3}\x87)',
      put('p6'),
      rb'(?:(?P<dget>h.|j.{4})|', ref, put('p7'), rb'(?:', text, rb')', put('p8'),
      rb'(?:', flag, rb')(?:', flag, rb')\x87', put('p9'), rb'R', put('p10'),
      rb'\(K\x03(?:X\x01\x00\x00\x00.|\x8c\x01.|h.|j.{4})', put('p11'),
      rb'NNN', integer, rb'{3}t', put('p12'), rb'b)',
      rb'[\x88\x89](?P<data>C.|B.{4}|\x8e.{8})')), re.DOTALL)


_ARRAY = _array_pattern()
_ARRAY_PUTS = tuple(f'p{i}' for i in range(13))
_ARRAY_START = frozenset(b'chj')  # GLOBAL, BINGET, LONG_BINGET.
_TUPLE_SIZE = {ord(')'): 0, 0x85: 1, 0x86: 2, 0x87: 3}  # EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3.


def _array_ops(match: re.Match) -> tuple[int, int]:
  """(opcodes in an `_ARRAY` match, index among them of the REDUCE that makes the array)."""
  puts = match.group(*_ARRAY_PUTS)
  reduce_at = 5 + (match.group('zero') is not None) + 5 - puts[:5].count(None)
  integers = _TUPLE_SIZE[match.group('shape')[-1]]
  dtype = 1 if match.group('dget') is not None else 17
  return reduce_at + 1 + 8 - puts[5:].count(None) + 2 + integers + 1 + dtype + 2, reduce_at


# Pickle writes a list's, dict's or set's items in batches of this many (pickle._Pickler._BATCHSIZE):
# a smaller batch is a container's last.
_BATCH = 1000
# Opcodes after which the value they leave looks complete: BUILD (an object's state comes last),
# SETITEM and APPEND (a batch of one, the last).
_FINAL = frozenset((pickle.BUILD[0], pickle.SETITEM[0], pickle.APPEND[0]))


@dataclasses.dataclass
class _Scan:
  """What the first pass has found so far, for the second pass."""
  ends: collections.deque = dataclasses.field(default_factory=collections.deque)  # In order.
  resolved: float = 0  # Whether an opcode below this index completes an item is known.
  kept: collections.deque = dataclasses.field(default_factory=collections.deque)  # Reads, in order.
  held: int = 0  # Bytes read that the second pass has not run yet.
  done: bool = False


def _item_ends(f: IO[bytes], source: str, max_bytes: Optional[int]) -> set[int]:
  """Indices of the opcodes that complete an item of the first list (the first pass alone)."""
  scan = _Scan()
  for _ in _scan(f.read, scan, source, max_bytes):
    scan.kept.clear()
    scan.held = 0
  return set(scan.ends)


def _scan(read_stream: Callable[[int], bytes], scan: _Scan, source: str,
          max_bytes: Optional[int], max_held: Optional[int] = None) -> Iterator[None]:
  """The first pass: a static stack walk over the opcodes, pausing after each read of the stream.

  Each stack slot remembers the last opcode that pushed it; the slots of the level between the
  list's MARK and APPENDS hold one item each. An item's end is known for sure only at APPENDS
  (up to 1000 items later), so an item is taken as complete when the next one starts and its
  last opcode leaves a finished value (BUILD, a container's last batch): pickle writes an item's
  opcodes one after another, and rarely takes such a value apart again. The second pass runs one
  item behind (`scan.resolved`), so the last guess can be taken back (a tuple of two finished
  values); an opcode that takes apart an item handed out (a tuple of three) is refused:
  SchemaError, never different data. Items that end otherwise (a number, a tuple, a protocol 5
  array) wait for a later finished value or the batch's end. Only opcodes and
  argument sizes are read, from large reads of the stream; every byte read is kept in
  `scan.kept` for the second pass, at most `max_held` not yet run (about one item). `max_bytes`
  bounds one opcode's claim. Nothing is built.
  """
  kept = scan.kept

  def read(size: int) -> bytes:
    data = read_stream(size)
    kept.append(data)
    scan.held += len(data)
    if max_held is not None and scan.held > max_held:
      raise errors.CorruptFileError(f'an item takes more than {max_held} bytes (the most held '
                                    f'while items are read)', path=source)
    return data

  levels: list[list[int]] = [[]]  # Per mark level: for each stack slot, the op that last pushed it.
  level = levels[-1]
  target = None  # (level, slot) of the first list.
  target_level = None
  items = None  # The level whose slots are items of the target list (between MARK and APPENDS).
  decided = 0  # Slots of `items` whose ends were given out.
  top_final = False  # Whether the top slot of `items` looks complete.
  ends = scan.ends
  table = _SCAN
  buf, pos, end = b'', 0, 0
  index = -1
  try:
    while True:
      if end - pos < _LOOKAHEAD:
        if pos > end:  # The last opcode's argument ran past the end of the data.
          raise IndexError
        if items is not None and items:  # The last decided item's last op, or the first's.
          scan.resolved = items[max(decided - 1, 0)]
        elif (target_level is not None and len(target_level) > target[1] + 1 and
              target[0] < len(levels) and levels[target[0]] is target_level):  # Before APPEND.
          scan.resolved = target_level[target[1] + 1]
        else:
          scan.resolved = index + 1
        yield
        buf = buf[pos:] + read(_SCAN_CHUNK)
        pos, end = 0, len(buf)
      index += 1
      code = buf[pos]  # IndexError at the end of the data: truncated.
      if code in _ARRAY_START:
        array = _ARRAY.match(buf, pos)
        if array is not None:  # A whole array but its data's bytes.
          ops, reduce_at = _array_ops(array)
          data = array.group('data')
          claim = int.from_bytes(data[1:], 'little')
          index += ops - 1
          if max_bytes is not None and claim > max_bytes:
            raise errors.CorruptFileError(f'opcode {index} claims {claim} bytes, more than the '
                                          f'{max_bytes} the pickle stream can hold', path=source)
          if level is items:
            if top_final and len(level) > decided:  # The item below is complete.
              ends.extend(level[decided:])
              decided = len(level)
            top_final = False
          level.append(index - ops + 1 + reduce_at)
          levels.append([index] * 5)
          level = levels[-1]
          pos = array.end() + claim
          if pos > end:
            left, buf, pos, end = pos - end, b'', 0, 0
            _skip(read, left)
          continue
      kind, size, signed, pops, pushes, special = table[code]  # KeyError: not an opcode.
      if kind == _FIXED_ARG:
        pos += size
      elif kind == _PREFIXED_ARG:
        claim = int.from_bytes(buf[pos + 1:pos + 1 + size], 'little', signed=signed)
        if max_bytes is not None and claim > max_bytes:
          raise errors.CorruptFileError(f'opcode {index} claims {claim} bytes, more than the '
                                        f'{max_bytes} the pickle stream can hold', path=source)
        pos += 1 + size + max(claim, 0)
        if pos > end:  # An argument past the buffer (up to gigabytes): skipped in chunks.
          left, buf, pos, end = pos - end, b'', 0, 0
          _skip(read, left)
      else:
        pos = _skip_lines(buf, pos + 1, size)
        if pos < 0:  # A line past the buffer: read on until it ends.
          buf, pos, end = _read_lines(buf, pos, read, size)
      closed_final = None  # For an op closing a mark level: whether it leaves a finished value.
      if special:
        op = _OPS[code]
        if op.name == 'STOP':
          break
        if op.name == 'MARK':
          if level is items and top_final and len(level) > decided:
            ends.extend(level[decided:])
            decided = len(level)
          opened: list[int] = []
          if target == (len(levels) - 1, len(level) - 1):
            items, decided, top_final = opened, 0, False
          levels.append(opened)
          level = opened
          continue
        if op.mark >= 0:
          closed = levels.pop()
          level = levels[-1]  # IndexError: a mark op without a mark.
          if closed is items:
            if op.name == 'APPENDS' and target == (len(levels) - 1, len(level) - 1):
              ends.extend(closed[decided:])
            elif decided > 1:
              raise _taken_apart(index, source)
            elif decided:
              ends.pop()  # Not handed out yet: the guess is taken back.
            items = None
          closed_final = len(closed) < (2 * _BATCH if op.name == 'SETITEMS' else _BATCH) and (
              op.name in ('APPENDS', 'SETITEMS', 'ADDITEMS'))
        if op.name == 'APPEND' and target == (len(levels) - 1, len(level) - 2):
          ends.append(level[-1])
        if op.name == 'EMPTY_LIST' and target is None:
          target, target_level = (len(levels) - 1, len(level)), level
      if pops:
        if pops > len(level):
          raise IndexError
        if level is items and len(level) - pops < decided:
          if len(level) - pops < decided - 1:
            raise _taken_apart(index, source)
          ends.pop()  # Not handed out yet: the guess is taken back.
          decided -= 1
        del level[-pops:]
      if pushes:
        if level is items:
          if closed_final is None:
            if not pops and top_final and len(level) > decided:  # A new item starts.
              ends.extend(level[decided:])
              decided = len(level)
            top_final = code in _FINAL
          else:
            top_final = closed_final
        if pushes == 1:
          level.append(index)
        else:
          level.extend([index] * pushes)
  except errors.RLDSSuiteError:
    raise
  except (IndexError, KeyError, ValueError) as e:
    raise errors.CorruptFileError(f'cannot read the pickle: damaged or truncated at opcode '
                                  f'{index}', path=source) from e
  if target is None:
    raise errors.SchemaError('expected a pickled list, found none', path=source)
  scan.resolved = float('inf')
  scan.done = True


def _taken_apart(index: int, source: str) -> errors.SchemaError:
  return errors.SchemaError(f'opcode {index} takes apart an item already handed out (items that '
                            f'are not written one after another): the items cannot be read one at '
                            f'a time', path=source)


def _skip(read, size: int) -> None:
  """Reads past `size` bytes in chunks; IndexError when the data ends first."""
  while size:
    chunk = len(read(min(size, _SKIP_READ)))
    if not chunk:
      raise IndexError
    size -= chunk


def _skip_lines(buf: bytes, pos: int, count: int) -> int:
  """The position after `count` newline-terminated lines from `pos`, or -1 - pos when a line
  does not end in `buf`."""
  for _ in range(count):
    newline = buf.find(b'\n', pos)
    if newline < 0:
      return -1 - pos
    pos = newline + 1
  return pos


def _read_lines(buf: bytes, pos: int, read, count: int) -> tuple[bytes, int, int]:
  """Reads on until the opcode's argument lines end (an opcode whose lines cross the buffer):
  (buffer from the opcode on, position after its lines, buffer end); IndexError at the end."""
  start = -1 - pos
  while True:
    more = read(_SCAN_CHUNK)
    if not more:
      raise IndexError
    buf += more
    after = _skip_lines(buf, start, count)
    if after >= 0:
      return buf, after, len(buf)


# The most pickled bytes held at once when the stream's size and `max_bytes` allow more: items
# whose end shows only at their batch's end (numbers, tuples, protocol 5 arrays) wait, and a
# zip or gzip bomb of them must not fill memory.
_MAX_HELD = 1 << 30
# The most one item may build, counted as a whole-file load counts (safe_pickle.MAX_BUILT): real
# items count ~88 a step (Atari: 44k for 500 steps, 3 arrays a step), ~11k for a dm_control
# trajectory, so the longest Atari episode (27k steps) ~2.4M: twice a whole file's cap, 3.4x that
# (~350 MiB at worst, ~44 bytes a count).
_MAX_ITEM_BUILT = 2 * safe_pickle.MAX_BUILT


class _StreamingUnpickler(safe_pickle.RestrictedUnpickler):
  """The restricted unpickler, run opcode by opcode so completed items can be handed out; it runs
  the bytes the first pass read once it knows which of their opcodes complete an item."""

  def __init__(self, file: IO[bytes], *, source: str, max_bytes: Optional[int] = None):
    super().__init__(file, source=source, max_bytes=max_bytes, max_built=_MAX_ITEM_BUILT)
    self._handed = 0
    self._memo_count = 0
    self._stream_read = file.read
    self._scan = _Scan()
    # An opcode's claim is held whole until this pass runs it, so one past what may be held is
    # refused before any of it is read: a bomb's claim costs no memory.
    self._scanner = _scan(self._stream_read, self._scan, source,
                          min(max_bytes or _MAX_HELD, _MAX_HELD),
                          min(self._max_bytes or _MAX_HELD, _MAX_HELD))
    # This pass runs only claims the first pass read whole: each is read at once.
    self._max_bytes = min(self._max_bytes or _MAX_HELD, _MAX_HELD)
    # The bytes read that this pass has not run yet, read straight from the first pass's reads.
    self._window = io.BufferedReader(_Kept(self._scan), _SCAN_CHUNK)

  def _more(self) -> bool:
    """Runs the first pass one read further (once it is done, reads the stream itself) into the
    window; False at the end of the stream."""
    if self._scan.done:
      new = self._stream_read(_SCAN_CHUNK)
      self._scan.kept.append(new)
      return bool(new)
    next(self._scanner, None)
    return True

  def _feed_read(self, size: int) -> bytes:
    data = self._window.read(size)
    while len(data) < size and self._more():
      data += self._window.read(size - len(data))
    return data

  def _feed_readline(self) -> bytes:
    line = self._window.readline()
    while not line.endswith(b'\n') and self._more():
      line += self._window.readline()
    return line

  def items(self) -> Iterator[Any]:
    self._file_read, self._file_readline = self._feed_read, self._feed_readline
    self._unframer = pickle._Unframer(self._feed_read, self._feed_readline)  # pylint: disable=protected-access
    self.read, self.readline = self._window.read, self._window.readline
    self.readinto = self._window.readinto
    self.metastack, self.stack, self.proto = [], [], 0
    self.append = self.stack.append
    dispatch = self.dispatch
    scan = self._scan
    ends = scan.ends
    memo_before: set = set()
    resolved, next_end = 0, -1  # Copies of scan.resolved and ends[0], taken after each wait.
    counted = 0  # The opcode up to which the item's opcodes were counted.
    try:
      index = 0
      while True:
        if index >= resolved:  # Not yet known whether this opcode completes an item; or a count.
          self._count(index - counted)
          counted = index
          while index >= scan.resolved:
            next(self._scanner, None)
          resolved = min(scan.resolved, index + safe_pickle.CHECK_EVERY)
          next_end = ends[0] if ends else -1
        key = self.read(1)
        if not key:
          raise EOFError('pickle data was truncated')
        try:
          dispatch[key[0]](self)
        except pickle.UnpicklingError as e:
          if 'Memo value not found' not in str(e):
            raise
          raise errors.SchemaError(f'item {self._handed} refers to an object of an earlier item '
                                   f'(or the file is damaged): the items cannot be read one at a '
                                   f'time', path=self._source) from e
        if index == next_end:  # Ends found later are past `resolved`: no need to look sooner.
          ends.popleft()
          next_end = ends[0] if ends else -1
          yield self._hand_out(memo_before)
          memo_before = set(self.memo)
          counted = index + 1
          self._built = self._bytes_copied = 0
        index += 1
    except pickle._Stop:  # pylint: disable=protected-access
      return
    except errors.RLDSSuiteError as e:
      if e.path is None:
        raise e.at(self._source) from e
      raise
    except safe_pickle.DAMAGE_ERRORS as e:
      raise errors.CorruptFileError(f'cannot unpickle: {type(e).__name__}: {e}',
                                    path=self._source) from e

  def _what(self) -> str:
    return f'item {self._handed}'

  def load_memoize(self) -> None:
    # MEMOIZE numbers entries by len(memo); counting them instead lets handed-out items' entries
    # be deleted.
    self._memo_put(self._memo_count)
    self._memo_count += 1

  def load_frame(self) -> None:
    self.read, self.readinto, self.readline = (self._unframer.read, self._unframer.readinto,
                                               self._unframer.readline)
    super().load_frame()

  dispatch = {**safe_pickle.RestrictedUnpickler.dispatch, pickle.MEMOIZE[0]: load_memoize,
              pickle.FRAME[0]: load_frame}

  def _hand_out(self, memo_before: set) -> Any:
    """Takes the completed item off the stack (leaving a None in its slot) and forgets the objects
    memoized while it was built, so nothing keeps it alive."""
    item, self.stack[-1] = self.stack[-1], None
    on_stack = {id(value) for value in self.stack}  # The list itself, and what holds it.
    # What holds the list may still await its BUILD (np.savez's object array); nothing else may.
    holders = on_stack.union(*({id(value) for value in level} for level in self.metastack))
    if not holders.issuperset(self._unbuilt):
      raise self._refuse(f'item {self._handed} holds an array or dtype made without its data')
    self._handed += 1
    for key in set(self.memo) - memo_before:
      value = self.memo[key]
      if id(value) not in on_stack and (
          isinstance(value, _ITEM_DATA) or
          isinstance(value, (bytes, bytearray)) and len(value) > _SHORT_BYTES):
        del self.memo[key]
    return item


class _Kept(io.RawIOBase):
  """The first pass's reads as one stream, each dropped (and no longer counted as held) once read
  from: a large read (an opcode's claim) is filled straight from them, never joined into a
  second copy first."""

  def __init__(self, scan: _Scan):
    super().__init__()
    self._scan = scan
    self._offset = 0  # Into scan.kept[0].

  def readable(self) -> bool:
    return True

  def readinto(self, buffer: Any) -> int:
    view = memoryview(buffer).cast('B')
    kept, filled = self._scan.kept, 0
    while filled < len(view) and kept:
      chunk = kept[0]
      count = min(len(chunk) - self._offset, len(view) - filled)
      view[filled:filled + count] = memoryview(chunk)[self._offset:self._offset + count]
      filled += count
      self._offset += count
      if self._offset == len(chunk):
        kept.popleft()
        self._offset = 0
    self._scan.held -= filled
    return filled
