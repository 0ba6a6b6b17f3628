"""Lossless encoders for recorded arrays: PNG images and ZLIB tensors, as TFDS decodes them.

Both use Intel ISA-L's deflate (`isal`, zlib-compatible streams) at level 1: on Atari and MuJoCo
frames it compresses 3-6x faster than zlib or OpenCV's libpng at their fastest settings, to the same
or smaller size (benchmarks/record_overhead.py's docstring has the numbers). It releases the GIL, so
a writer thread encodes while the environment steps.

The PNG writer is the minimal standard file: IHDR, one IDAT holding every scanline unfiltered,
IEND. Any PNG decoder reads it; `tf.io.decode_png` (TFDS's `Image` decoder) returns the array
exactly. No filter, on purpose: on Atari frames the SUB filter gains nothing and costs ~20 us of
the ~40 us per frame; on rendered MuJoCo frames it would make files ~15% smaller.
"""

from __future__ import annotations

import zlib

from isal import isal_zlib
import numpy as np

from rlds_suite.core import errors

LEVEL = 1  # ISA-L levels are 0-3; 1 is the fastest that still matches on repeated pixels.

_SIGNATURE = b'\x89PNG\r\n\x1a\n'
_COLOR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> grey, RGB, RGBA (what TFDS's Image decodes).
_NO_FILTER = 0
_IEND = b'\x00\x00\x00\x00IEND\xaeB`\x82'


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


def png_rows(images: np.ndarray) -> list[bytes]:
  """`png_bytes` of each image of `images` [n, height, width, channels]: the scanlines of the
  whole column are laid out in one numpy copy and the IHDR chunk is built once, so a frame costs
  one deflate call, one CRC and one join."""
  images = np.asarray(images)
  _check_image_shape(images.shape[1:], images.dtype)
  count, height, width, channels = images.shape
  if not count:
    return []
  depth = 8 * images.dtype.itemsize
  scanlines = np.empty((count, height, 1 + width * channels * images.dtype.itemsize), np.uint8)
  scanlines[:, :, 0] = _NO_FILTER
  scanlines[:, :, 1:] = np.ascontiguousarray(
      images, dtype=images.dtype.newbyteorder('>')).view(np.uint8).reshape(count, height, -1)
  header = (width.to_bytes(4, 'big') + height.to_bytes(4, 'big') +
            bytes((depth, _COLOR_TYPES[channels], 0, 0, 0)))
  start = _SIGNATURE + _chunk(b'IHDR', header)
  idat_crc = zlib.crc32(b'IDAT')
  out = []
  for scanline in scanlines:
    data = isal_zlib.compress(scanline, LEVEL)
    out.append(b''.join((start, len(data).to_bytes(4, 'big'), b'IDAT', data,
                         zlib.crc32(data, idat_crc).to_bytes(4, 'big'), _IEND)))
  return out


def _check_image_shape(shape: tuple[int, ...], dtype: np.dtype) -> None:
  if (len(shape) != 3 or shape[2] not in _COLOR_TYPES or dtype not in (np.uint8, np.uint16) or
      shape[0] < 1 or shape[1] < 1):
    raise errors.InvalidValueError(
        f'PNG needs a [height, width, 1, 3 or 4 channels] uint8 or uint16 image, got '
        f'{np.dtype(dtype).name}{list(shape)}')


def _chunk(kind: bytes, data: bytes) -> bytes:
  return (len(data).to_bytes(4, 'big') + kind + data +
          zlib.crc32(data, zlib.crc32(kind)).to_bytes(4, 'big'))
