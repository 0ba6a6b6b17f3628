"""Reading a gzip-compressed `.npy` file as a stream of rows (header first, then blocks of rows).

`np.load` of a gzip'd 1M-frame array inflates all 7 GB at once; this reads the header, then as many
rows as asked, so memory is bounded by the block, not by the file.
"""

from __future__ import annotations

import gzip
import os
import zlib
from typing import IO, Optional

import numpy as np

from rlds_suite.core import errors


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
      self._file = gzip.open(self.path, 'rb')
      version = np.lib.format.read_magic(self._file)
      if version == (1, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(self._file)
      elif version == (2, 0):
        shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(self._file)
      else:
        raise errors.SchemaError(f'unsupported .npy format version {version}', path=self.path,
                                 field=field)
    except FileNotFoundError as e:
      raise errors.SchemaError('file is missing', path=self.path, field=field) from e
    except (EOFError, gzip.BadGzipFile, zlib.error, ValueError) as e:
      self.close()
      raise errors.CorruptFileError(f'damaged or truncated gzip .npy header: {e}', path=self.path,
                                    field=field) from e
    if fortran_order or dtype.hasobject or not shape:
      self.close()
      raise errors.SchemaError(f'expected a C-ordered numeric array with rows, got shape {shape} '
                               f'dtype {dtype} fortran_order={fortran_order}', path=self.path,
                               field=field)
    self.shape = tuple(shape)
    self.dtype = dtype
    self.num_rows = shape[0]
    self.row_shape = tuple(shape[1:])
    self._row_bytes = int(np.prod(self.row_shape, dtype=np.int64)) * dtype.itemsize

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
    wanted = num_rows * self._row_bytes
    try:
      data = self._file.read(wanted)
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as e:
      raise errors.CorruptFileError(f'damaged or truncated gzip data at row {self._position}: {e}',
                                    path=self.path, field=self.field) from e
    if len(data) != wanted:
      raise errors.CorruptFileError(
          f'truncated: the header declares {self.num_rows} rows, the data ends at row '
          f'{self._position + len(data) // max(self._row_bytes, 1)}', path=self.path,
          field=self.field)
    self._position += num_rows
    return np.frombuffer(data, dtype=self.dtype).reshape((num_rows,) + self.row_shape)

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
    with gzip.open(path, 'rb') as f:
      return np.load(f, allow_pickle=False)
  except FileNotFoundError as e:
    raise errors.SchemaError('file is missing', path=path, field=field) from e
  except (EOFError, gzip.BadGzipFile, zlib.error, ValueError, OSError) as e:
    raise errors.CorruptFileError(f'damaged or truncated gzip .npy: {e}', path=path,
                                  field=field) from e
