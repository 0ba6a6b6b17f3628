"""Opening native files: finding them, decompressing, with typed errors that name the file."""

from __future__ import annotations

import gzip
import os
import pathlib
import zipfile
import zlib
from typing import IO, Any

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import safe_pickle


def find_files(directory: errors.PathLike, pattern: str) -> list[pathlib.Path]:
  """Files below `directory` whose name matches `pattern`, sorted; EmptyInputError when none do."""
  root = pathlib.Path(directory)
  if not root.is_dir():
    raise errors.EmptyInputError('not a directory', path=root)
  found = sorted(p for p in root.rglob(pattern) if p.is_file())
  if not found:
    raise errors.EmptyInputError(f'no files matching {pattern!r}', path=root)
  return found


def load_gzip_pickle(path: errors.PathLike) -> Any:
  """A gzip-compressed pickle, read with the restricted unpickler."""
  try:
    with open(path, 'rb') as f:
      data = gzip.decompress(f.read())
  except (EOFError, gzip.BadGzipFile, zlib.error) as e:
    raise errors.CorruptFileError(f'damaged or truncated gzip data: {e}', path=path) from e
  except OSError as e:
    raise errors.CorruptFileError(f'cannot read: {e}', path=path) from e
  return safe_pickle.loads(data, source=os.fspath(path))


def load_npz(path: errors.PathLike) -> dict[str, np.ndarray]:
  """Every member of an .npz archive, without np.load(allow_pickle=True).

  Object arrays (e.g. arrays of info dicts) are read with the restricted unpickler, so they can only
  hold plain data and the known benchmark classes; anything else raises UnsafePickleError.
  """
  arrays = {}
  name = None
  try:
    with zipfile.ZipFile(path) as archive:
      for member in archive.namelist():
        name = member[:-len('.npy')] if member.endswith('.npy') else member
        with archive.open(member) as f:
          arrays[name] = _read_npy(f, name, source=os.fspath(path))
  except errors.RLDSSuiteError as e:
    raise type(e)(e.problem, path=path, field=e.field or name) from e
  except (zipfile.BadZipFile, zlib.error, EOFError) as e:
    raise errors.CorruptFileError(f'damaged or truncated zip (npz) archive: {e}', path=path,
                                  field=name) from e
  except OSError as e:
    raise errors.CorruptFileError(f'cannot read: {e}', path=path, field=name) from e
  return arrays


def _read_npy(f: IO[bytes], name: str, source: str) -> np.ndarray:
  """One .npy stream: numeric arrays from their raw bytes, object arrays via safe_pickle."""
  try:
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
      shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
      shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(f)
    else:
      raise errors.SchemaError(f'unsupported .npy format version {version}', field=name)
  except ValueError as e:
    raise errors.CorruptFileError(f'bad .npy header: {e}', field=name) from e
  if dtype.hasobject:
    array = safe_pickle.load(f, source=source)
    if not isinstance(array, np.ndarray) or array.shape != tuple(shape):
      raise errors.SchemaError(f'expected an object array of shape {shape}, got '
                               f'{type(array).__name__} {np.shape(array)}', field=name)
    return array
  count = int(np.prod(shape, dtype=np.int64))
  data = f.read(count * dtype.itemsize)
  if len(data) != count * dtype.itemsize:
    raise errors.CorruptFileError(
        f'truncated: expected {count * dtype.itemsize} bytes, got {len(data)}', field=name)
  return np.frombuffer(data, dtype=dtype).reshape(shape, order='F' if fortran_order else 'C')
