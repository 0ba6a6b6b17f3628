"""Streaming the items of a pickled list one at a time, through the restricted unpickler.

Benchmark files pickle every trajectory into one list (il-representations' Atari `arr_0` object
array, its dm_control `TrajectoryWithRew` lists). `pickle.load` builds the whole list, so memory
grows with the file. Pickle writes list items in batches (`MARK item ... APPENDS`) and an item may
take several stack slots while it is built (`cls, args, NEWOBJ`), so where an item ends is only
known once the next one has started: a first pass over the opcodes (pickletools, nothing built)
finds the opcode that completes each item of the first list in the stream, and a second pass runs
the pure-Python unpickler, hands each completed item out and drops it (and its memo entries).
Memory holds one item. Globals resolve exactly as in `safe_pickle.RestrictedUnpickler`.
"""

from __future__ import annotations

import pickle
import pickletools
from typing import IO, Any, Callable, Iterator

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import safe_pickle

_MARK = pickletools.markobject
# Memoized objects of these types, made while an item was built, belong to it and are forgotten
# with it; globals, dtypes, strings and short byte strings (pickle refers to them again from later
# items, e.g. ndarray's b'b' reconstruct argument) are kept.
_ITEM_DATA = (np.ndarray, list, dict, tuple, set, safe_pickle.ImitationTrajectory)
_SHORT_BYTES = 64


def iter_list_items(open_stream: Callable[[], IO[bytes]], *, source: str) -> Iterator[Any]:
  """Yields the items of the first list in the pickle, each once it is complete.

  `open_stream` returns the pickle stream positioned at its first opcode; it is called twice.
  Raises UnsafePickleError for a global outside the allow-list and CorruptFileError for damaged
  data, naming `source`.
  """
  with open_stream() as f:
    ends = _item_ends(f, source)
  with open_stream() as f:
    yield from _StreamingUnpickler(f, source=source).items(ends)


def _item_ends(f: IO[bytes], source: str) -> set[int]:
  """Indices of the opcodes that complete an item of the first list (a static stack walk).

  Each stack slot remembers the last opcode that pushed it; when a batch of the list's items is
  appended, the slots hold one item each, and each item was complete from that opcode on.
  """
  levels: list[list[int]] = [[]]  # Per mark level: for each stack slot, the op that last pushed it.
  target = None  # (level, slot) of the first list.
  item_level = None  # Level whose slots are items of the target list (between MARK and APPENDS).
  ends: set[int] = set()
  try:
    for index, (op, _, _) in enumerate(pickletools.genops(f)):
      before, after = op.stack_before, op.stack_after
      if op.name == 'MARK':
        if target == (len(levels) - 1, len(levels[-1]) - 1):
          item_level = len(levels)
        levels.append([])
        continue
      if _MARK in before:
        closed = levels.pop()
        if (op.name == 'APPENDS' and item_level == len(levels) and
            target == (len(levels) - 1, len(levels[-1]) - 1)):
          ends.update(closed)
        if item_level == len(levels):
          item_level = None
        before = before[:before.index(_MARK)]
      level = levels[-1]
      if op.name == 'APPEND' and target == (len(levels) - 1, len(level) - 2):
        ends.add(level[-1])
      if before:
        del level[len(level) - len(before):]
      level.extend([index] * len(after))
      if op.name == 'EMPTY_LIST' and target is None:
        target = (len(levels) - 1, len(level) - 1)
  except (ValueError, EOFError, IndexError) as e:
    raise errors.CorruptFileError(f'cannot read the pickle: {e}', path=source) from e
  if target is None:
    raise errors.SchemaError('expected a pickled list, found none', path=source)
  return ends


class _StreamingUnpickler(pickle._Unpickler):  # pylint: disable=protected-access
  """The pure-Python unpickler, run opcode by opcode so completed items can be handed out."""

  def __init__(self, file: IO[bytes], *, source: str):
    super().__init__(file)
    self._source = source
    self._classes = dict(safe_pickle.KNOWN_CLASSES)
    self._handed = 0

  find_class = safe_pickle.RestrictedUnpickler.find_class

  def persistent_load(self, pid: Any) -> Any:
    raise errors.UnsafePickleError(f'refusing persistent id {pid!r}', path=self._source)

  def items(self, ends: set[int]) -> Iterator[Any]:
    self._unframer = pickle._Unframer(self._file_read, self._file_readline)  # pylint: disable=protected-access
    self.read, self.readinto, self.readline = (self._unframer.read, self._unframer.readinto,
                                               self._unframer.readline)
    self.metastack, self.stack, self.proto = [], [], 0
    self.append = self.stack.append
    # MEMOIZE numbers entries by len(memo); counting them instead lets handed-out items' entries
    # be deleted.
    dispatch = {**self.dispatch, pickle.MEMOIZE[0]: _StreamingUnpickler._load_memoize}
    read = self.read
    self._memo_count = 0
    memo_before: set = set()
    try:
      index = 0
      while True:
        key = read(1)
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
        if index in ends:
          yield self._hand_out(memo_before)
          memo_before = set(self.memo)
        index += 1
    except pickle._Stop:  # pylint: disable=protected-access
      return
    except errors.RLDSSuiteError:
      raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, OSError) as e:
      raise errors.CorruptFileError(f'cannot unpickle: {type(e).__name__}: {e}',
                                    path=self._source) from e

  def _load_memoize(self) -> None:
    self.memo[self._memo_count] = self.stack[-1]
    self._memo_count += 1

  def _hand_out(self, memo_before: set) -> Any:
    """Takes the completed item off the stack (leaving a None in its slot) and forgets the objects
    memoized while it was built, so nothing keeps it alive."""
    item, self.stack[-1] = self.stack[-1], None
    self._handed += 1
    on_stack = {id(value) for value in self.stack}  # The list itself, and what holds it.
    for key in set(self.memo) - memo_before:
      value = self.memo[key]
      if id(value) not in on_stack and (
          isinstance(value, _ITEM_DATA) or
          isinstance(value, (bytes, bytearray)) and len(value) > _SHORT_BYTES):
        del self.memo[key]
    return item
