"""Output files of exports: written beside their final name and renamed when complete, and numpy
columns spooled to disk row by row so that an export holds one episode in memory at a time."""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from typing import Any, Iterator, Mapping

import numpy as np

from rlds_suite.core import errors


@contextlib.contextmanager
def atomic_output(path: errors.PathLike) -> Iterator[str]:
  """Yields a temporary path beside `path`; renames it to `path` when the block succeeds and
  removes it when it fails, so a failed export leaves nothing that looks complete."""
  path = os.fspath(path)
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  handle, partial = tempfile.mkstemp(prefix=os.path.basename(path) + '.', suffix='.incomplete',
                                     dir=directory)
  os.close(handle)
  try:
    yield partial
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(partial, 0o666 & ~umask)  # mkstemp creates it private; give it a normal file's mode.
    os.replace(partial, path)
  finally:
    if os.path.exists(partial):
      os.remove(partial)


class ColumnSpool:
  """Rows of named arrays appended to temporary files, assembled into an .npz at the end.

  Every column keeps the dtype and row shape of its first rows; later rows must match.
  """

  def __init__(self, directory: errors.PathLike):
    self._directory = tempfile.TemporaryDirectory(dir=os.fspath(directory), prefix='.spool-')
    self._files: dict[str, Any] = {}
    self._specs: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
    self._rows: dict[str, int] = {}

  def append(self, columns: Mapping[str, np.ndarray]) -> None:
    """Appends rows (a leading axis per column) to each named column."""
    for name, values in columns.items():
      values = np.ascontiguousarray(values)
      spec = (values.dtype, values.shape[1:])
      if name not in self._files:
        self._files[name] = open(os.path.join(self._directory.name, str(len(self._files))), 'wb')
        self._specs[name], self._rows[name] = spec, 0
      elif spec != self._specs[name]:
        raise errors.SchemaError(f'rows of {self._specs[name][0]} {self._specs[name][1]} expected, '
                                 f'got {spec[0]} {spec[1]}', field=name)
      self._files[name].write(values.tobytes())
      self._rows[name] += len(values)

  def write_npz(self, path: errors.PathLike,
                constants: Mapping[str, np.ndarray] = {}) -> dict[str, tuple[int, ...]]:  # pylint: disable=dangerous-default-value
    """Writes every column as `name.npy` in an uncompressed .npz (np.load reads it), and the
    `constants` (small arrays, not rows) beside them; returns the shapes. The file is streamed
    from the spool, one MiB at a time."""
    if not any(self._rows.values()):
      raise errors.EmptyInputError('no episode has a transition to export', path=path)
    shapes = {}
    with atomic_output(path) as partial, zipfile.ZipFile(partial, 'w', allowZip64=True) as archive:
      for name, spool in self._files.items():
        spool.close()
        dtype, row_shape = self._specs[name]
        shape = (self._rows[name],) + row_shape
        shapes[name] = shape
        with archive.open(name + '.npy', 'w', force_zip64=True) as member, \
            open(spool.name, 'rb') as source:
          np.lib.format.write_array_header_2_0(
              member, {'descr': np.lib.format.dtype_to_descr(dtype), 'fortran_order': False,
                       'shape': shape})
          while chunk := source.read(1 << 20):
            member.write(chunk)
      for name, value in constants.items():
        with archive.open(name + '.npy', 'w') as member:
          np.lib.format.write_array(member, np.asarray(value), allow_pickle=False)
        shapes[name] = np.shape(value)
    return shapes

  def close(self) -> None:
    for spool in self._files.values():
      spool.close()
    self._directory.cleanup()

  def __enter__(self) -> 'ColumnSpool':
    return self

  def __exit__(self, *exc) -> None:
    self.close()
