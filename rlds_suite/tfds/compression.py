"""Lossless encoders for recordings and builds: PNG images and ZLIB tensors, as TFDS decodes them.

Both use Intel ISA-L's deflate (`isal`, zlib-compatible streams): on Atari and MuJoCo frames it
compresses 3-6x faster than zlib or OpenCV's libpng at their fastest settings, to the same or
smaller size (benchmarks/record_overhead.py's docstring has the numbers). It releases the GIL, so
a writer thread encodes while the environment steps.

The PNG writer is the minimal standard file: IHDR, one IDAT holding every scanline, IEND. Any PNG
decoder reads it; `tf.io.decode_png` (TFDS's `Image` decoder) returns the array exactly. A
`PngEncoder` says how: recordings (`RECORDING`) deflate each frame at ISA-L level 1; builds
(`BUILD`) at level 0 with one Huffman table per episode, made from 16 of its frames
('isal-table', png_deflate), where ISA-L's C API can be called (else level 1): level 1 builds a
table for every frame, ~40% of its time on 84x84 Atari frames, so the table costs 0.70x the CPU
for PNGs 1-2% larger on the benchmark frames (12% on real Pong); plain level 0 is ~10% faster
still but its PNGs are 1.3-1.45x larger (`benchmarks/build_dqn_replay_direct.py` measures builds
with each).
Both leave scanlines unfiltered: computed in numpy
over a whole column the SUB and UP filters cost ~1 us per 84x84 frame, but on Atari frames they
make PNGs 2-29% larger at ISA-L levels 0-1 and save under 1% with libdeflate (deflate already
matches the rows above and runs of equal pixels); benchmarks/png_encoders.py has the table.
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import struct
import threading
import zlib
from typing import Callable, Optional

from isal import isal_zlib
import numpy as np

from rlds_suite.core import errors
from rlds_suite.tfds import png_deflate

LEVEL = 1  # ISA-L levels are 0-3; 1 is the fastest that still matches on repeated pixels.

_SIGNATURE = b'\x89PNG\r\n\x1a\n'
_COLOR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> grey, RGB, RGBA (what TFDS's Image decodes).
# PNG scanline filter types (the byte before each scanline) this writer computes.
FILTERS = {'none': 0, 'sub': 1, 'up': 2}
_IEND = b'\x00\x00\x00\x00IEND\xaeB`\x82'
_PNG_HEAD = struct.Struct('>33sI4s')  # Signature and IHDR, then the IDAT chunk's length and type.
_PNG_TAIL = struct.Struct('>I12s')  # The IDAT chunk's CRC, then IEND.
_PNG_BYTES = _PNG_HEAD.size + _PNG_TAIL.size  # A file's bytes besides its zlib stream.


def zlib_bytes(array: np.ndarray) -> bytes:
  """The array's bytes as one ZLIB stream (what TFDS's ZLIB-encoded `Tensor` decodes)."""
  return isal_zlib.compress(np.asarray(array).tobytes(), LEVEL)  # tobytes is C order.


def zlib_rows(rows: np.ndarray) -> list[bytes]:
  """`zlib_bytes` of each row of `rows` (rows first): one contiguous copy for the whole column,
  then one deflate call per row on a view of it."""
  rows = np.ascontiguousarray(rows)
  flat = rows.reshape(len(rows), -1).view(np.uint8) if rows.size else rows.reshape(len(rows), 0)
  return [isal_zlib.compress(row, LEVEL) for row in flat]


def png_bytes(image: np.ndarray) -> bytes:
  """A PNG file of a [height, width, channels] uint8 or uint16 image with 1, 3 or 4 channels."""
  image = np.asarray(image)
  _check_image_shape(image.shape, image.dtype)
  return png_rows(image[None])[0]


def _libdeflate():
  import deflate  # pylint: disable=g-import-not-at-top
  return deflate.zlib_compress


_COMPRESSORS = {'isal': lambda: isal_zlib.compress, 'libdeflate': _libdeflate,
                'zlib': lambda: zlib.compress}
# 'isal-table': ISA-L level 0 with one Huffman table per column (png_deflate).
_LEVELS = {'isal': range(0, 4), 'libdeflate': range(0, 13), 'zlib': range(0, 10),
           'isal-table': range(0, 1)}


@dataclasses.dataclass(frozen=True)
class PngEncoder:
  """How PNG scanlines are deflated: `library` ('isal'; 'isal-table', level 0 only: one Huffman
  table per column of images, made from a few of them, see png_deflate; 'zlib'; 'libdeflate',
  when the `deflate` package is installed, for benchmarks), its `level`, and the PNG
  `scanline_filter` applied to every scanline ('none', 'sub' or 'up')."""
  library: str = 'isal'
  level: int = LEVEL
  scanline_filter: str = 'none'

  def __post_init__(self):
    levels = _LEVELS.get(self.library, ())
    if self.level not in levels or self.scanline_filter not in FILTERS:
      raise errors.InvalidValueError(
          f'PNG encoder: library {self.library!r} (one of {sorted(_LEVELS)}) at level '
          f'{self.level} ({list(levels) or "no levels"}) with filter {self.scanline_filter!r} '
          f'(one of {sorted(FILTERS)})')
    if self.library == 'libdeflate' and importlib.util.find_spec('deflate') is None:
      raise errors.InvalidValueError(
          "PNG encoder: library 'libdeflate' needs the `deflate` package (pip install deflate)")
    if self.library == 'isal-table' and not png_deflate.available():
      raise errors.InvalidValueError(
          "PNG encoder: library 'isal-table' needs ISA-L's C API as `isal` >= 1.7 ships it")


RECORDING = PngEncoder()
# Builds: one table per column where ISA-L's C API can be called (see the module docstring).
BUILD = PngEncoder('isal-table', 0) if png_deflate.available() else PngEncoder()


def png_rows(images: np.ndarray, encoder: PngEncoder = RECORDING,
             table_images: Optional[np.ndarray] = None) -> list[bytes]:
  """`png_bytes` of each image of `images` [n, height, width, channels] (see `png_items`)."""
  data, bounds = png_items(images, encoder, table_images)
  return [data[start:end] for start, end in zip(bounds, bounds[1:])]


def png_items(images: np.ndarray, encoder: PngEncoder = RECORDING,
              table_images: Optional[np.ndarray] = None,
              item_header: Optional[Callable[[int], bytes]] = None) -> tuple[bytes, list[int]]:
  """Each image's PNG file, back to back in one bytes object, and where each begins (and the last
  ends). With `item_header`, each file follows `item_header(its length)`: e.g. the items of a
  BytesList message, which a record takes as one piece (pieces per frame, each its own bytes
  object, cost a build's workers ~4 us a frame).

  The scanlines of the whole column are laid out (and filtered) in numpy at once, in a buffer
  this thread reuses (up to `_REUSED_BYTES`: a fresh 7 MiB one per 1024 Atari frames cost its page
  faults every time), and the files are written in place into another: 'isal-table' deflates
  each frame straight to its place in its file. With 'isal-table', the Huffman table is made from
  `table_images` (default: `table_sample` of `images`), so a long episode encoded a column at a
  time gets the bytes of encoding it at once."""
  images = np.asarray(images)
  _check_image_shape(images.shape[1:], images.dtype)
  count, height, width, channels = images.shape
  if not count:
    return b'', [0]
  row_bytes = 1 + width * channels * images.dtype.itemsize
  frame = height * row_bytes
  scanlines = _scanlines(images, encoder, _reused('scanlines', count * frame).reshape(
      count, height, row_bytes))
  header = (width.to_bytes(4, 'big') + height.to_bytes(4, 'big') +
            bytes((8 * images.dtype.itemsize, _COLOR_TYPES[channels], 0, 0, 0)))
  start = _SIGNATURE + _chunk(b'IHDR', header)
  idat_crc = isal_zlib.crc32(b'IDAT')
  deflate_into = None  # 'isal-table': deflates a frame to its place (else `compress` returns it).
  if encoder.library != 'isal-table':
    compress, level = _COMPRESSORS[encoder.library](), encoder.level
  else:
    table = png_deflate.deflater()
    sample = table_sample(images) if table_images is None else np.asarray(table_images)
    table.set_table(_scanlines(sample, encoder, np.empty((len(sample),) + scanlines.shape[1:],
                                                         np.uint8)))
    deflate_into = table.compress_into
    compress, level = isal_zlib.compress, 1  # Where a frame's stream does not fit.
  bound = png_deflate.stored_bound(frame)
  # Room before each deflated frame: its item header at the largest length, and the PNG's head.
  before = (len(item_header(bound + _PNG_BYTES)) if item_header else 0) + _PNG_HEAD.size
  slot = before + bound + _PNG_TAIL.size
  out = _reused('png', count * slot)  # Room for what is left stays >= a slot per frame left.
  view = memoryview(out)
  address, base = (out.ctypes.data, scanlines.ctypes.data) if deflate_into else (0, 0)
  flat = memoryview(scanlines.reshape(-1))
  crc32, bounds, pos = isal_zlib.crc32, [0], 0
  for offset in range(0, count * frame, frame):
    at = pos + before
    length = deflate_into(base + offset, frame, address + at, bound) if deflate_into else -1
    if length < 0:
      data = compress(flat[offset:offset + frame], level)
      length = len(data)
      if at + length + _PNG_TAIL.size + (count - len(bounds)) * slot > len(out):
        out, view = _grown(out, at + length + (count - len(bounds) + 1) * slot)  # Over the bound.
        address = out.ctypes.data
      view[at:at + length] = data
    item = item_header(length + _PNG_BYTES) if item_header else b''
    head = pos + len(item)
    if head + _PNG_HEAD.size != at:  # A shorter header than the room left for it (or longer).
      if head + _PNG_BYTES + length + (count - len(bounds)) * slot > len(out):
        out, view = _grown(out, head + length + (count - len(bounds) + 1) * slot)
      address = out.ctypes.data
      ctypes.memmove(address + head + _PNG_HEAD.size, address + at, length)
      at = head + _PNG_HEAD.size
    view[pos:head] = item
    _PNG_HEAD.pack_into(out, head, start, length, b'IDAT')
    _PNG_TAIL.pack_into(out, at + length, crc32(view[at:at + length], idat_crc), _IEND)
    pos = at + length + _PNG_TAIL.size
    bounds.append(pos)
  return bytes(view[:pos]), bounds


def table_sample(images: np.ndarray) -> np.ndarray:
  """The images whose scanlines make an 'isal-table' column's Huffman table: png_deflate.SAMPLE
  of them, evenly spaced."""
  count = len(images)
  return np.asarray(images)[
      np.linspace(0, count - 1, min(count, png_deflate.SAMPLE)).round().astype(np.int64)]


def _scanlines(images: np.ndarray, encoder: PngEncoder, out: np.ndarray) -> np.ndarray:
  """`out` [n, height, 1 + row bytes] filled with the images' PNG scanlines (filter byte first)."""
  out[:, :, 0] = FILTERS[encoder.scanline_filter]
  raw = np.ascontiguousarray(
      images, dtype=images.dtype.newbyteorder('>')).view(np.uint8).reshape(out.shape[0],
                                                                           out.shape[1], -1)
  _filter(raw, out[:, :, 1:], encoder.scanline_filter, images.shape[3] * images.dtype.itemsize)
  return out


_REUSED_BYTES = 16 << 20  # Larger columns get buffers of their own, not kept.
_buffers = threading.local()


def _reused(name: str, size: int) -> np.ndarray:
  """`size` uint8 bytes: this thread's reused buffer `name` where it is small, else a fresh one."""
  if size > _REUSED_BYTES:
    return np.empty(size, np.uint8)
  kept = getattr(_buffers, name, None)
  if kept is None or kept.size < size:
    kept = np.empty(max(size, 1 << 20), np.uint8)
    setattr(_buffers, name, kept)
  return kept[:size]


def _grown(out: np.ndarray, size: int) -> tuple[np.ndarray, memoryview]:
  """A fresh buffer of `size` bytes starting with `out`'s, and a view of it."""
  grown = np.empty(size, np.uint8)
  grown[:len(out)] = out
  return grown, memoryview(grown)


def _filter(raw: np.ndarray, out: np.ndarray, name: str, pixel_bytes: int) -> None:
  """Writes the PNG filter `name` of the scanline bytes `raw` [n, height, row bytes] into `out`:
  a byte minus the one `pixel_bytes` to its left ('sub') or the one above it ('up'), modulo 256,
  where a missing neighbour counts as 0 (PNG's filter types 1 and 2)."""
  if name == 'sub':
    out[:, :, :pixel_bytes] = raw[:, :, :pixel_bytes]
    np.subtract(raw[:, :, pixel_bytes:], raw[:, :, :-pixel_bytes], out=out[:, :, pixel_bytes:])
  elif name == 'up':
    out[:, :1] = raw[:, :1]
    np.subtract(raw[:, 1:], raw[:, :-1], out=out[:, 1:])
  else:
    out[...] = raw


def _check_image_shape(shape: tuple[int, ...], dtype: np.dtype) -> None:
  if (len(shape) != 3 or shape[2] not in _COLOR_TYPES or dtype not in (np.uint8, np.uint16) or
      shape[0] < 1 or shape[1] < 1):
    raise errors.InvalidValueError(
        f'PNG needs a [height, width, 1, 3 or 4 channels] uint8 or uint16 image, got '
        f'{np.dtype(dtype).name}{list(shape)}')


def _chunk(kind: bytes, data: bytes) -> bytes:
  return (len(data).to_bytes(4, 'big') + kind + data +
          isal_zlib.crc32(data, isal_zlib.crc32(kind)).to_bytes(4, 'big'))
