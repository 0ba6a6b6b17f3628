"""Zlib streams of a declared size (a ZLIB tensor's row, a PNG's scanlines, an HDF5 chunk),
inflated by ISA-L no further than one byte past that size: a crafted file cannot make a reader
allocate more than its declared shape holds, and a stream that is short, long or unfinished is
refused (their writers always deflate the whole row, image or chunk)."""

from __future__ import annotations

from isal import isal_zlib


def inflate_exactly(data: bytes | memoryview, size: int) -> bytes:
  """The `size` bytes a zlib stream inflates to; ValueError saying how it differs otherwise
  (isal_zlib.error when it is not zlib data)."""
  inflater = isal_zlib.decompressobj()
  out = inflater.decompress(data, size + 1)
  if len(out) == size and not inflater.eof:
    raise ValueError(f'zlib data truncated after {size} bytes (its stream does not end)')
  if len(out) != size:
    raise ValueError(f'zlib data inflates to {"more than " if len(out) > size else ""}'
                     f'{len(out)} bytes, expected {size}')
  return out
