"""Rebuilding numpy dtypes, arrays and scalars from the arguments a pickle gives, refusing the rest.

numpy's own unpickling hooks trust their arguments: `dtype.__setstate__` copies the pickled flags
into the descriptor, so an object dtype pickled with flags 0 loses `NPY_LIST_PICKLE` and
`NPY_ITEM_IS_POINTER`; `scalar(dtype, bytes)` and `ndarray.__setstate__` then memcpy the file's
raw bytes into the item, which for an object dtype is a `PyObject *`: an object at any address the
file names (SIGSEGV, or a live object such as `os.system` for the unpickler to call).

Here a dtype is built anew by numpy's constructor from its pickled description (kind, size, byte
order, datetime unit); the pickled flags are never applied, and must equal the ones numpy gives. Raw bytes are only ever read into
dtypes without objects, and only in exactly the size the shape and dtype need, so every array's
bytes come from the file. Object arrays (benchmarks pickle lists of dicts that way) take their
items from the pickle's own list, which the restricted unpickler built from allowed classes.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

import numpy as np

from rlds_suite.core import errors

# What `dtype.__reduce__` writes as the first argument: kind and size, no byte order.
_TYPESTR = re.compile(r'^(b1|[iu][1248]|f(2|4|8|12|16)|c(8|16|24|32)|[SUV]\d{1,9}|[Mm]8|O[48])$')
_BYTE_ORDERS = ('<', '>', '|', '=')
_DATETIME_UNITS = ('Y', 'M', 'W', 'D', 'h', 'm', 's', 'ms', 'us', 'ns', 'ps', 'fs', 'as', 'generic')
_MAX_DIM = 1 << 62


class PendingDType:
  """A dtype between its REDUCE (which gives kind and size) and its BUILD (which gives the byte
  order and the rest); remembers the memo keys it was stored under so BUILD can replace it."""
  __slots__ = ('typestr', 'memo_keys')

  def __init__(self, typestr: str):
    self.typestr = typestr
    self.memo_keys: list = []


def new_dtype(typestr: Any, align: Any = False, copy: Any = True) -> PendingDType:
  """`numpy.dtype(typestr, align, copy)` as pickled; the dtype itself is made at BUILD."""
  if not isinstance(typestr, str) or not _TYPESTR.match(typestr):
    raise errors.UnsafePickleError(f'refusing dtype {typestr!r}: not a plain numpy type string')
  if not (isinstance(align, int) and isinstance(copy, int)):  # bool is an int.
    raise errors.UnsafePickleError(f'refusing dtype arguments {align!r}, {copy!r}')
  return PendingDType(typestr)


def build_dtype(pending: PendingDType, state: Any) -> np.dtype:
  """The dtype `pending` and its pickled state describe, made by numpy's constructor.

  Structured and subarray dtypes are refused (no supported format pickles them), and so is an
  object dtype with anything but the default layout. Pickles without a memo describe every
  array's dtype again: what was accepted is kept, by the exact types and values of the state.
  """
  try:
    key = (pending.typestr, state, tuple(map(type, state)))
    return _BUILT[key]
  except (KeyError, TypeError):  # Not seen, or not a tuple of hashable values.
    pass
  dtype = _build_dtype(pending.typestr, state)
  if type(state) is tuple and len(_BUILT) < _BUILT_MAX and all(
      type(value) in (int, str, type(None)) for value in state):
    _BUILT[(pending.typestr, state, tuple(map(type, state)))] = dtype
  return dtype


_BUILT: dict[tuple, np.dtype] = {}
_BUILT_MAX = 256


def _build_dtype(typestr: str, state: Any) -> np.dtype:
  if not isinstance(state, tuple) or len(state) not in (8, 9) or state[0] not in (3, 4):
    raise errors.UnsafePickleError(f'refusing dtype state {short(state)}')
  byte_order, subarray, names, fields, elsize = state[1:6]
  if byte_order not in _BYTE_ORDERS:
    raise errors.UnsafePickleError(f'refusing dtype byte order {byte_order!r}')
  if subarray is not None or names is not None or fields is not None:
    raise errors.UnsafePickleError('refusing a structured or subarray dtype: no supported format '
                                   'pickles one')
  if typestr[0] in 'Mm':
    typestr += _datetime_unit(state[8] if len(state) == 9 else None)
  dtype = np.dtype(typestr)
  if byte_order in '<>' and dtype.byteorder != '|':
    dtype = dtype.newbyteorder(byte_order)
  if not isinstance(elsize, int) or elsize not in (-1, dtype.itemsize):
    raise errors.UnsafePickleError(f'refusing dtype {dtype} with item size {elsize!r}')
  if state[7] != dtype.flags:  # Never applied; a mismatch means the dtype was crafted.
    raise errors.UnsafePickleError(f'refusing dtype {dtype} pickled with flags {short(state[7])} '
                                   f'(numpy gives it {dtype.flags})')
  return dtype


def _datetime_unit(metadata: Any) -> str:
  """'[10ms]' from the pickled datetime metadata (None, (b'ms', 10, 1, 1))."""
  try:
    unit, count = metadata[1][0].decode('ascii'), int(metadata[1][1])
  except (TypeError, IndexError, AttributeError, ValueError) as e:
    raise errors.UnsafePickleError(f'refusing datetime metadata {short(metadata)}') from e
  if unit not in _DATETIME_UNITS or not 0 < count < (1 << 31):
    raise errors.UnsafePickleError(f'refusing datetime unit {count}{unit}')
  return '' if unit == 'generic' else f'[{count}{unit}]' if count != 1 else f'[{unit}]'


def new_array(cls: Any, shape: Any, typecode: Any) -> np.ndarray:
  """`numpy.core.multiarray._reconstruct(ndarray, (0,), b'b')`, exactly as numpy pickles it: an
  empty array that BUILD fills from the file (`set_array_state`)."""
  if cls is not np.ndarray or shape != (0,) or typecode not in (b'b', 'b'):
    raise errors.UnsafePickleError(
        f'refusing _reconstruct({short(cls)}, {short(shape)}, {short(typecode)}): only numpy '
        f'arrays, as numpy pickles them')
  return np.ndarray.__new__(np.ndarray, (0,), 'b')


def set_array_state(array: np.ndarray, state: Any) -> None:
  """BUILD of an array from `new_array`: (version, shape, dtype, fortran, data), where data holds
  exactly the array's bytes (or, for an object array, a list of exactly its items)."""
  if isinstance(state, tuple) and len(state) == 5 and state[0] == 1:
    state = state[1:]
  if not isinstance(state, tuple) or len(state) != 4:
    raise errors.UnsafePickleError(f'refusing array state {short(state)}')
  shape, dtype, fortran, data = state
  size = _size(shape)
  _check_dtype(dtype)
  if not isinstance(fortran, bool):
    raise errors.UnsafePickleError(f'refusing array order flag {fortran!r}')
  if dtype.hasobject:
    if dtype != np.dtype(object) or type(data) is not list or len(data) != size:
      raise errors.UnsafePickleError(
          f'refusing an object array of shape {shape} whose items are not a list of {size} '
          f'(numpy would read them as raw pointers)')
  else:
    _check_data(data, size * dtype.itemsize, dtype)
  # Safe now: a dtype numpy made, with its own flags, and data of exactly the right size/kind.
  array.__setstate__((1, shape, dtype, fortran, data))


def from_buffer(buffer: Any, dtype: Any, shape: Any, order: Any) -> np.ndarray:
  """`numpy.core.numeric._frombuffer` (protocol 5 arrays), with the buffer's size checked."""
  size = _size(shape)
  _check_dtype(dtype)
  if dtype.hasobject:
    raise errors.UnsafePickleError('refusing an object array from a raw buffer')
  if order not in ('C', 'F'):
    raise errors.UnsafePickleError(f'refusing array order {order!r}')
  _check_data(buffer, size * dtype.itemsize, dtype)
  return np.frombuffer(buffer, dtype=dtype).reshape(shape, order=order)


def scalar(dtype: Any, data: Any = None) -> Any:
  """`numpy.core.multiarray.scalar(dtype, bytes)`: a numpy scalar from exactly its bytes."""
  _check_dtype(dtype)
  if dtype.hasobject:
    raise errors.UnsafePickleError('refusing a numpy scalar of object dtype (it would read a raw '
                                   'pointer from the file)')
  _check_data(data, dtype.itemsize, dtype)
  return np.ndarray((), dtype=dtype, buffer=data)[()]


def _check_dtype(dtype: Any) -> None:
  # Every np.dtype a restricted unpickler holds was made by build_dtype.
  if type(dtype) is PendingDType:
    raise errors.UnsafePickleError('refusing a dtype used before its state was given')
  if not isinstance(dtype, np.dtype):
    raise errors.UnsafePickleError(f'expected a numpy dtype, got {short(dtype)}')


def _size(shape: Any) -> int:
  """The number of items of `shape`: a tuple of non-negative ints."""
  if not isinstance(shape, tuple) or len(shape) > 32:
    raise errors.UnsafePickleError(f'refusing array shape {short(shape)}')
  size = 1
  for d in shape:
    if type(d) is not int or not 0 <= d < _MAX_DIM:
      raise errors.UnsafePickleError(f'refusing array shape {short(shape)}')
    size *= d
  if size >= _MAX_DIM:
    raise errors.UnsafePickleError(f'refusing array shape {shape}: too many items')
  return size


def _check_data(data: Any, nbytes: int, dtype: np.dtype) -> None:
  """Raw item bytes must be bytes-like of exactly `nbytes`; booleans 0 or 1 (numpy keeps any
  other byte as is, and it reads as True here and as the byte elsewhere)."""
  if not isinstance(data, (bytes, bytearray)):
    raise errors.UnsafePickleError(f'expected the array bytes, got {short(data)}')
  if len(data) != nbytes:
    raise errors.CorruptFileError(f'array data has {len(data)} bytes, its shape and dtype {dtype} '
                                  f'need {nbytes}')
  if dtype.kind == 'b' and nbytes and (
      data.translate(None, b'\x00\x01') if nbytes < 4096 else
      np.frombuffer(data, np.uint8).max() > 1):
    raise errors.CorruptFileError('boolean array data holds bytes other than 0 and 1')


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def short(value: Any) -> str:
  """A bounded repr for messages: a file's values may be huge or deeply nested."""
  try:
    return _REPR.repr(value)
  except Exception:  # pylint: disable=broad-except  # A repr that fails still names the type.
    return f'<{type(value).__name__}>'

