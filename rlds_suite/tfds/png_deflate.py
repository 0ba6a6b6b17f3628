"""Deflate of many small images with one Huffman table per column, through ISA-L's C API.

ISA-L's level 1 builds a Huffman table for every stream: on 84x84 Atari frames (~7 KB each) that
is about a third of its time (perf over a 1M-row DQN Replay build: 8.4 of 18.6 CPU-s). Its C API
also deflates at level 0 with a caller's table (igzip_lib.h: isal_update_histogram,
isal_create_hufftables, a custom `hufftables`, isal_deflate_stateless), which `isal`'s
Python module does not expose: this module calls it with ctypes in the library `isal` loads (its
functions are exported there). A table made from a few of a column's frames then deflates each
frame of the column as a whole zlib stream (the table travels in each stream's block header):
PNGs of the DQN Replay benchmark's frames took 14.9 vs 21.1 us of CPU each, 2,111 vs 2,078 bytes
(compression.png_rows, 4,096 frames, 7 alternating rounds at load ~5). A frame is deflated
straight into the caller's buffer (its place in the PNG file): ISA-L itself takes ~9.4 us of the
~10.2 a frame costs here; the stream's public fields are written with one struct.pack_into.

`available()` says whether it works here: the ISA-L version has the stream layout declared
below, and a self-test's streams inflate (with Python's zlib) to their input; otherwise callers
use `isal_zlib.compress`. `compress_into` says when a stream does not fit its room (never with
`stored_bound` bytes: ISA-L stores a block that deflate would not shrink); callers then deflate
the frame with `isal_zlib.compress` at level 1.
"""

from __future__ import annotations

import ctypes
import functools
import struct
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


# The head's fields in declaration order, all written by one call per stream: ten ctypes attribute
# sets cost ~0.3 us a frame.
_HEAD = struct.Struct('=QIIQIIQIIQHHHH')


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
    self._head = memoryview(self._stream).cast('B')[:_HEAD.size]
    self._table = (ctypes.c_uint8 * (256 << 10))()  # struct isal_hufftables is ~3 KB.
    self._table_address = ctypes.addressof(self._table)

  def set_table(self, samples: Sequence[np.ndarray]) -> None:
    """The table for the next streams: from the literal and match counts of `samples`."""
    histogram = _Histogram()
    for sample in samples:
      sample = np.ascontiguousarray(sample)
      self._lib.isal_update_histogram(ctypes.c_void_p(sample.ctypes.data),
                                      ctypes.c_int(sample.nbytes), ctypes.byref(histogram))
    if self._lib.isal_create_hufftables(ctypes.byref(self._table), ctypes.byref(histogram)):
      raise ValueError('ISA-L could not make a Huffman table of the samples')

  def compress_into(self, address: int, size: int, out: int, room: int) -> int:
    """Deflates the `size` bytes at `address` as one zlib stream into the `room` bytes at `out`
    (both kept alive by the caller): the stream's length, or -1 when it does not fit. It always
    fits in `stored_bound(size)` bytes (ISA-L stores a block that would not shrink)."""
    self._lib.isal_deflate_stateless_init(self._pointer)
    # Level 0, a zlib stream ending here, and the table set directly on the stream (what
    # isal_deflate_set_hufftables does for a custom table, a ctypes call less per frame).
    _HEAD.pack_into(self._head, 0, address, size, 0, out, room, 0, self._table_address, 0, 0, 0,
                    1, 0, _ZLIB, 0)
    if self._lib.isal_deflate_stateless(self._pointer):  # The output did not fit.
      return -1
    return self._stream.total_out


def stored_bound(size: int) -> int:
  """The most bytes `TableDeflater.compress_into` writes for `size` bytes: a zlib header, stored
  blocks of at most 65,535 bytes with 5-byte headers, an Adler-32 (isal_deflate_stateless)."""
  return 2 + size + 5 * max(1, -(-size // 65535)) + 4


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
  if _library() is None or _HEAD.size != _Stream.internal_state.offset:
    return False
  ramp = np.add.outer(np.arange(84), np.arange(85)).astype(np.uint8)
  noise = np.random.default_rng(0).integers(0, 256, (84, 85), dtype=np.uint8)
  buffers = [ramp, ramp // 16 * 16, noise, np.zeros((84, 85), np.uint8)]
  test = TableDeflater(_library())
  out = np.empty(stored_bound(ramp.nbytes), np.uint8)
  try:
    test.set_table(buffers[:2])
    for b in buffers:
      length = test.compress_into(b.ctypes.data, b.nbytes, out.ctypes.data, len(out))
      if not 0 < length <= len(out) or zlib.decompress(out[:length]) != b.tobytes():
        return False
  except (ValueError, zlib.error):
    return False
  return True
