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


def png_bytes(image: np.ndarray) -> bytes:
  """A PNG file of a [height, width, channels] uint8 or uint16 image with 1, 3 or 4 channels."""
  if (image.ndim != 3 or image.shape[2] not in _COLOR_TYPES or
      image.dtype not in (np.uint8, np.uint16) or image.shape[0] < 1 or image.shape[1] < 1):
    raise errors.InvalidValueError(
        f'PNG needs a [height, width, 1, 3 or 4 channels] uint8 or uint16 image, got '
        f'{image.dtype.name}{list(image.shape)}')
  height, width, channels = image.shape
  depth = 8 * image.dtype.itemsize
  scanlines = np.empty((height, 1 + width * channels * image.dtype.itemsize), np.uint8)
  scanlines[:, 0] = _NO_FILTER
  scanlines[:, 1:] = np.ascontiguousarray(
      image, dtype=image.dtype.newbyteorder('>')).view(np.uint8).reshape(height, -1)
  header = (width.to_bytes(4, 'big') + height.to_bytes(4, 'big') +
            bytes((depth, _COLOR_TYPES[channels], 0, 0, 0)))
  return b''.join((_SIGNATURE, _chunk(b'IHDR', header),
                   _chunk(b'IDAT', isal_zlib.compress(scanlines, LEVEL)), _IEND))


def _chunk(kind: bytes, data: bytes) -> bytes:
  return (len(data).to_bytes(4, 'big') + kind + data +
          zlib.crc32(data, zlib.crc32(kind)).to_bytes(4, 'big'))
