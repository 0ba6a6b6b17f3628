"""Reading HDF5 files (D4RL and its relatives) with typed errors that name the file and the dataset."""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import os
import zlib
from typing import Any, Iterator, Optional, Sequence

import h5py
from isal import isal_zlib
import numpy as np

from rlds_suite.core import errors

# Below this many bytes a dataset is read by h5py in one call; above, its chunks are inflated in
# parallel: h5py reads and decompresses chunk after chunk in one thread, while ISA-L's inflate
# (~2.5x zlib's speed) releases the GIL.
PARALLEL_READ_BYTES = 1 << 22


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
    array = _read_deflated(item)
    return item[()] if array is None else array
  except (OSError, zlib.error, isal_zlib.error) as e:
    raise errors.CorruptFileError(f'cannot read data (truncated file?): {e}', field=key) from e


def _read_deflated(item: h5py.Dataset) -> Optional[np.ndarray]:
  """A gzip-only chunked numeric dataset, its chunks read raw and inflated in a thread pool.

  None when the dataset does not qualify (small, contiguous, other filters, unwritten chunks): the
  caller then reads it through h5py. D4RL's writers use exactly gzip, so their files qualify.
  """
  if (item.chunks is None or item.dtype.kind not in 'biufc' or item.nbytes < PARALLEL_READ_BYTES
      or item.compression != 'gzip' or item.shuffle or item.fletcher32 or item.scaleoffset
      or item.id.get_create_plist().get_nfilters() != 1):
    return None
  expected = math.prod(math.ceil(n / c) for n, c in zip(item.shape, item.chunks))
  if item.id.get_num_chunks() != expected:
    return None
  chunks = []
  item.id.chunk_iter(chunks.append)
  if len(chunks) != expected or any(chunk.filter_mask for chunk in chunks):
    return None
  out = np.empty(item.shape, dtype=item.dtype)
  chunk_bytes = math.prod(item.chunks) * item.dtype.itemsize
  with open(item.file.filename, 'rb') as f:
    fd = f.fileno()

    def inflate(chunk) -> None:
      raw = isal_zlib.decompress(os.pread(fd, chunk.size, chunk.byte_offset))
      if len(raw) != chunk_bytes:
        raise zlib.error(f'chunk at {chunk.chunk_offset} inflates to {len(raw)} bytes, not '
                         f'{chunk_bytes}')
      data = np.frombuffer(raw, dtype=item.dtype).reshape(item.chunks)
      region = tuple(slice(o, min(o + c, n))
                     for o, c, n in zip(chunk.chunk_offset, item.chunks, item.shape))
      out[region] = data[tuple(slice(0, r.stop - r.start) for r in region)]

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
      list(pool.map(inflate, chunks))
  return out
