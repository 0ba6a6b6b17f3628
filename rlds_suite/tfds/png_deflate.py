"""Deflate of many small images with one Huffman table per column, through ISA-L's C API.

ISA-L's level 1 builds a Huffman table for every stream: on 84x84 Atari frames (~7 KB each) that
is about a third of its time (perf over a 1M-row DQN Replay build: 8.4 of 18.6 CPU-s). Its C API
also deflates at level 0 with a caller's table (igzip_lib.h: isal_update_histogram,
isal_create_hufftables, a custom `hufftables`, isal_deflate_stateless), which `isal`'s
Python module does not expose: this module calls it with ctypes in the library `isal` loads (its
functions are exported there). A table made from a few of a column's frames then deflates each
frame of the column as a whole zlib stream (the table travels in each stream's block header):
PNGs of the DQN Replay benchmark's frames took 14.9 vs 21.1 us of CPU each, 2,111 vs 2,078 bytes
(compression.png_rows, 4,096 frames, 7 alternating rounds at load ~5).

`available()` says whether it works here: the ISA-L version has the stream layout declared
below, and a self-test's streams inflate (with Python's zlib) to their input; otherwise callers
use `isal_zlib.compress`. A frame whose stream does not fit the output buffer (no symbol of the
table fits it) is deflated by `isal_zlib.compress` at level 1.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import zlib
from typing import Optional, Sequence

import isal
from isal import isal_zlib
import numpy as np

SAMPLE = 16  # Frames of a column (evenly spaced) whose histogram makes its table.
_MIN_VERSION = (2, 26)  # isal_zstream with hist_bits, as declared below.
_END_VERSION = (3, 0)  # A new major version may change the struct's layout: not called there.
_ZLIB = 3  # IGZIP_ZLIB: zlib header and Adler-32 trailer.
_STATE_BYTES = 1 << 20  # Room for the stream's internal state (~90 KB in ISA-L 2.3x).


class _Stream(ctypes.Structure):
  """struct isal_zstream's public head (igzip_lib.h), then room for its internal state."""
  _fields_ = [('next_in', ctypes.c_void_p), ('avail_in', ctypes.c_uint32),
              ('total_in', ctypes.c_uint32), ('next_out', ctypes.c_void_p),
              ('avail_out', ctypes.c_uint32), ('total_out', ctypes.c_uint32),
              ('hufftables', ctypes.c_void_p), ('level', ctypes.c_uint32),
              ('level_buf_size', ctypes.c_uint32), ('level_buf', ctypes.c_void_p),
              ('end_of_stream', ctypes.c_uint16), ('flush', ctypes.c_uint16),
              ('gzip_flag', ctypes.c_uint16), ('hist_bits', ctypes.c_uint16),
              ('internal_state', ctypes.c_uint8 * _STATE_BYTES)]


class _Histogram(ctypes.Structure):
  """struct isal_huff_histogram (286 literal/length and 30 distance counts, level 0's hash table),
  with room to spare."""
  _fields_ = [('lit_len', ctypes.c_uint64 * 286), ('dist', ctypes.c_uint64 * 30),
              ('hash_table', ctypes.c_uint16 * 8192), ('spare', ctypes.c_uint8 * 65536)]


class TableDeflater:
  """Deflates buffers as zlib streams with one table, set from samples (one per thread)."""

  def __init__(self, library: ctypes.CDLL):
    self._lib = library
    self._stream = _Stream()
    self._pointer = ctypes.byref(self._stream)
    self._table = (ctypes.c_uint8 * (256 << 10))()  # struct isal_hufftables is ~3 KB.
    self._table_address = ctypes.addressof(self._table)
    self._out = ctypes.create_string_buffer(1 << 16)

  def set_table(self, samples: Sequence[np.ndarray]) -> None:
    """The table for the next streams: from the literal and match counts of `samples`."""
    histogram = _Histogram()
    for sample in samples:
      sample = np.ascontiguousarray(sample)
      self._lib.isal_update_histogram(ctypes.c_void_p(sample.ctypes.data),
                                      ctypes.c_int(sample.nbytes), ctypes.byref(histogram))
    if self._lib.isal_create_hufftables(ctypes.byref(self._table), ctypes.byref(histogram)):
      raise ValueError('ISA-L could not make a Huffman table of the samples')

  def compress(self, address: int, size: int) -> bytes:
    """The zlib stream of the `size` bytes at `address` (kept alive by the caller)."""
    if len(self._out) < 2 * size + 1024:
      self._out = ctypes.create_string_buffer(2 * size + 1024)
    stream, lib, pointer = self._stream, self._lib, self._pointer
    lib.isal_deflate_stateless_init(pointer)
    stream.level, stream.gzip_flag, stream.end_of_stream = 0, _ZLIB, 1
    # What isal_deflate_set_hufftables(stream, table, IGZIP_HUFFTABLE_CUSTOM) does; a ctypes call
    # less per frame (~7% of the frame's time).
    stream.hufftables = self._table_address
    stream.next_in, stream.avail_in = address, size
    stream.next_out, stream.avail_out = ctypes.addressof(self._out), len(self._out)
    if lib.isal_deflate_stateless(pointer):  # The output did not fit.
      return isal_zlib.compress(ctypes.string_at(address, size), 1)
    return ctypes.string_at(self._out, stream.total_out)


_local = threading.local()


def deflater() -> TableDeflater:
  """This thread's TableDeflater (check `available()` first)."""
  found = getattr(_local, 'deflater', None)
  if found is None:
    found = _local.deflater = TableDeflater(_library())
  return found


def available() -> bool:
  """Whether ISA-L's C API can be called here as this module declares it."""
  return _self_test()


@functools.lru_cache(maxsize=None)
def _library() -> Optional[ctypes.CDLL]:
  version = getattr(isal, 'ISAL_VERSION', '')
  try:
    if not _MIN_VERSION <= tuple(int(part) for part in version.split('.')[:2]) < _END_VERSION:
      return None
    library = ctypes.CDLL(isal_zlib.__file__)
    for name in ('isal_update_histogram', 'isal_create_hufftables', 'isal_deflate_stateless_init',
                 'isal_deflate_stateless'):
      getattr(library, name).restype = ctypes.c_int
  except (ValueError, OSError, AttributeError):
    return None
  return library


@functools.lru_cache(maxsize=None)
def _self_test() -> bool:
  if _library() is None:
    return False
  ramp = np.add.outer(np.arange(84), np.arange(85)).astype(np.uint8)
  noise = np.random.default_rng(0).integers(0, 256, (84, 85), dtype=np.uint8)
  buffers = [ramp, ramp // 16 * 16, noise, np.zeros((84, 85), np.uint8)]
  test = TableDeflater(_library())
  try:
    test.set_table(buffers[:2])
    return all(zlib.decompress(test.compress(b.ctypes.data, b.nbytes)) == b.tobytes()
               for b in buffers)
  except (ValueError, zlib.error):
    return False
