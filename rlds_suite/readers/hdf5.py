"""Reading HDF5 files (D4RL and its relatives) with typed errors that name the file and the dataset."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import h5py
import numpy as np

from rlds_suite import errors


@contextlib.contextmanager
def open_file(path: errors.PathLike) -> Iterator[h5py.File]:
  """An HDF5 file opened for reading; CorruptFileError when it is truncated or not HDF5.

  rlds_suite errors raised inside the block are attributed to `path`.
  """
  try:
    h5file = h5py.File(path, 'r')
  except FileNotFoundError as e:
    raise errors.EmptyInputError('no such file', path=path) from e
  except OSError as e:
    raise errors.CorruptFileError(f'not a readable HDF5 file (truncated or damaged?): {e}',
                                  path=path) from e
  with h5file, errors.located(path):
    yield h5file


def dataset_names(group: h5py.Group) -> list[str]:
  """Paths, relative to `group`, of every dataset below it."""
  names = []

  def visit(name: str, item: Any) -> None:
    if isinstance(item, h5py.Dataset):
      names.append(name)

  group.visititems(visit)
  return names


def read_array(group: h5py.Group, key: str, *, ranks: Sequence[int],
               kinds: str = 'biuf') -> np.ndarray:
  """The whole dataset `key` in one read, after checking its rank and dtype kind.

  `kinds` are numpy dtype kinds ('f' float, 'b' bool, 'i'/'u' integers, 'S' bytes, 'O' strings).
  Raises SchemaError naming `key` when it is missing or has the wrong rank or kind, and
  CorruptFileError when its data cannot be read.
  """
  item = group.get(key)
  if not isinstance(item, h5py.Dataset):
    raise errors.SchemaError('missing dataset' if item is None else 'expected a dataset, got a group',
                             field=key)
  if item.ndim not in ranks:
    raise errors.SchemaError(f'expected rank {" or ".join(map(str, ranks))}, got shape {item.shape}',
                             field=key)
  if item.dtype.kind not in kinds:
    raise errors.SchemaError(f'expected numpy dtype kind in {kinds!r}, got {item.dtype}', field=key)
  try:
    return item[()]
  except OSError as e:
    raise errors.CorruptFileError(f'cannot read data (truncated file?): {e}', field=key) from e
