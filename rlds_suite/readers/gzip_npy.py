"""Reading a gzip-compressed `.npy` file as a stream of rows (header first, then blocks of rows).

`np.load` of a gzip'd 1M-frame array inflates all 7 GB at once; this reads the header, then as many
rows as asked, so memory is bounded by the block, not by the file.
"""

from __future__ import annotations

import math
import os
from typing import IO, Optional

import numpy as np

from rlds_suite.core import errors
from rlds_suite.readers import files


class GzipNpyRows:
  """Rows of the array in a gzip'd `.npy` file, read in order: `read(n)`, `skip(n)`.

  Use as a context manager. `shape`, `dtype` and `num_rows` come from the header. Damaged or
  truncated data raise CorruptFileError naming the file; an object or Fortran-ordered array raises
  SchemaError (np.save(allow_pickle=False) writes neither for these files).
  """

  def __init__(self, path: errors.PathLike, field: Optional[str] = None):
    self.path = os.fspath(path)
    self.field = field
    self._file: Optional[IO[bytes]] = None
    self._position = 0
    try:
      self._file = files.gzip_stream(self.path, files.DEFLATE_ROWS)
      with errors.located(self.path):
        header = files.read_npy_header(self._file, field=field)
        if header.fortran_order or header.dtype.hasobject or not header.shape:
          raise errors.SchemaError(
              f'expected a C-ordered numeric array with rows, got shape {header.shape} dtype '
              f'{header.dtype} fortran_order={header.fortran_order}', field=field)
        left = files.expansion_left(self._file)
        if header.data_bytes > left:
          raise files.size_limit_error(header.data_bytes, left, field=field,
                                       what='the .npy header declares')
    except errors.RLDSSuiteError as e:
      self.close()
      raise type(e)(e.problem, path=e.path, field=e.field or field) from e
    self.shape = header.shape
    self.dtype = header.dtype
    self.num_rows = header.shape[0]
    self.row_shape = header.shape[1:]
    self._row_bytes = math.prod(self.row_shape) * header.dtype.itemsize

  def __enter__(self) -> 'GzipNpyRows':
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
      self._file = None

  @property
  def position(self) -> int:
    """Index of the next row `read` returns."""
    return self._position

  def read(self, num_rows: int) -> np.ndarray:
    """The next `num_rows` rows (fewer at the end of the array)."""
    num_rows = max(0, min(num_rows, self.num_rows - self._position))
    rows = np.empty((num_rows,) + self.row_shape, dtype=self.dtype)
    self.read_into(rows)
    return rows

  def read_into(self, out: np.ndarray) -> None:
    """Inflates the next `len(out)` rows straight into `out` (C-contiguous, of this file's dtype
    and row shape, writable, at most the rows left): no intermediate buffer. CorruptFileError
    when the data ends before them."""
    num_rows = len(out)
    if out.dtype != self.dtype or out.shape[1:] != self.row_shape:
      raise errors.SchemaError(
          f'rows of {self.dtype} {list(self.row_shape)}, where {out.dtype} '
          f'{list(out.shape[1:])} are expected (as in the files before)', path=self.path,
          field=self.field)
    if (num_rows > self.num_rows - self._position or not out.flags.c_contiguous or
        not out.flags.writeable):
      raise ValueError(f'expected a writable C-contiguous array of at most '
                       f'{self.num_rows - self._position} rows, got {out.shape}')
    view = memoryview(out.reshape(-1).view(np.uint8))
    filled = 0
    try:
      while filled < len(view):
        count = self._file.readinto(view[filled:])
        if not count:
          break
        filled += count
      if filled == len(view) and self._position + num_rows == self.num_rows:
        files.expect_end(self._file, 'the .npy array')  # And the gzip trailer's CRC-32 is checked.
    except errors.RLDSSuiteError as e:
      raise type(e)(f'at row {self._position}: {e.problem}', path=self.path, field=self.field) from e
    if filled != len(view):
      raise errors.CorruptFileError(
          f'truncated: the header declares {self.num_rows} rows, the data ends at row '
          f'{self._position + filled // max(self._row_bytes, 1)}', path=self.path,
          field=self.field)
    self._position += num_rows

  def skip(self, num_rows: int, block_rows: int = 4096) -> None:
    """Reads past `num_rows` rows (gzip cannot seek: they are inflated and dropped)."""
    while num_rows > 0:
      taken = len(self.read(min(num_rows, block_rows)))
      if not taken:
        return
      num_rows -= taken


def load_small(path: errors.PathLike, field: Optional[str] = None) -> np.ndarray:
  """A whole (small) gzip'd `.npy` array, e.g. a 0-d counter."""
  path = os.fspath(path)
  try:
    with files.open_gzip(path) as f, errors.located(path):
      header = files.read_npy_header(f, field=field)
      if header.dtype.hasobject:
        raise errors.SchemaError(f'expected a numeric array, got {header.dtype}', field=field)
      array = files.read_npy_data(f, header, available=None, limit=files.expansion_left(f),
                                  field=field)
      files.expect_end(f, 'the .npy array', field=field)
      return array
  except errors.RLDSSuiteError as e:
    raise type(e)(e.problem, path=path, field=e.field or field) from e
