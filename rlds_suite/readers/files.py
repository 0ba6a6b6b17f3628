"""Opening native files: finding them, decompressing, with typed errors that name the file."""

from __future__ import annotations

import gzip
import os
import pathlib
import zlib
from typing import Any

from rlds_suite import errors
from rlds_suite import safe_pickle


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
