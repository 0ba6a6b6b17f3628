"""Reading HDF5 files (D4RL and its relatives) with typed errors that name the file and the
dataset."""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import os
import re
import zlib
from typing import Any, Iterator, Optional, Sequence

import h5py
from isal import isal_zlib
import numpy as np

from rlds_suite.core import errors
from rlds_suite.readers import bounded_inflate
from rlds_suite.readers import files

# Below this many bytes a chunked dataset's chunks are inflated one after the other; above, in a
# thread pool.
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
  try:
    with h5file, errors.located(path):
      yield h5file
  except errors.RLDSSuiteError:
    raise
  except _DAMAGE_ERRORS as e:
    if not (_raised_by_h5py(e) or isinstance(e, UnicodeDecodeError)):
      raise  # Our own code's error (a bug), not the file's (text is decoded from the file only).
    missing = _MISSING_OBJECT.search(str(e)) if isinstance(e, KeyError) else None
    if missing:
      raise errors.SchemaError(f'missing from the file ({e.args[0] if e.args else e})', path=path,
                               field=missing.group(1)) from e
    raise errors.CorruptFileError(f'damaged HDF5 file: {type(e).__name__}: {e}', path=path) from e


# What h5py raises on damaged metadata (object headers, B-trees, names, attributes), besides
# OSError.
_DAMAGE_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError, UnicodeDecodeError)
# h5py's KeyError for a name the file does not hold (not damage).
_MISSING_OBJECT = re.compile(r"object '([^']*)' doesn't exist|component not found")


def _raised_by_h5py(error: BaseException) -> bool:
  """Whether `error` was raised inside h5py (its Python or Cython modules): only those speak of
  the file; the same types raised by our code are bugs, shown as they are."""
  frame = error.__traceback__
  while frame is not None and frame.tb_next is not None:
    frame = frame.tb_next
  return frame is not None and str(frame.tb_frame.f_globals.get('__name__', '')).startswith('h5py')


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
  """The whole dataset `key`, after checking its rank, dtype kind and declared size.

  `kinds` are numpy dtype kinds ('f' float, 'b' bool, 'i'/'u' integers, 'S' bytes, 'O' strings).
  Raises SchemaError naming `key` when it is missing or has the wrong rank or kind,
  SizeLimitError when it declares more data than the file can hold (checked before anything is
  read), and CorruptFileError when its data cannot be read.
  """
  item = group.get(key)
  if not isinstance(item, h5py.Dataset):
    raise errors.SchemaError(
        'missing dataset' if item is None else 'expected a dataset, got a group', field=key)
  if item.ndim not in ranks:
    raise errors.SchemaError(
        f'expected rank {" or ".join(map(str, ranks))}, got shape {item.shape}', field=key)
  if item.dtype.kind not in kinds:
    raise errors.SchemaError(f'expected numpy dtype kind in {kinds!r}, got {item.dtype}', field=key)
  check_declared_size(item)
  try:
    array = _read_chunks(item)
    return item[()] if array is None else array
  except (OSError, zlib.error, isal_zlib.error) as e:
    raise errors.CorruptFileError(f'cannot read data (truncated file?): {e}',
                                  field=_name(item)) from e


def check_declared_size(item: h5py.Dataset) -> None:
  """Refuses a dataset whose declared shape holds more bytes than its stored data can expand to
  (files.expansion_limit of its storage, deflate's ratio), or whose storage runs past the end of
  the file: e.g. 1e9 x 17 floats declared with no data written, which h5py would allocate whole."""
  stored = item.id.get_storage_size()
  file_size = os.path.getsize(item.file.filename)
  if stored > file_size:
    raise errors.CorruptFileError(f'stores {stored} bytes, more than the whole file ({file_size} '
                                  f'bytes): truncated?', field=_name(item))
  limit = files.expansion_limit(stored, files.DEFLATE)
  if item.nbytes > limit:
    raise files.size_limit_error(
        item.nbytes, limit, field=_name(item),
        what=f'declares {item.dtype}{list(item.shape)} from {stored} stored bytes:')


def _name(item: h5py.Dataset) -> str:
  return item.name.lstrip('/')


_DEFLATE, _SHUFFLE = h5py.h5z.FILTER_DEFLATE, h5py.h5z.FILTER_SHUFFLE


def _read_chunks(item: h5py.Dataset) -> Optional[np.ndarray]:
  """A chunked numeric dataset stored raw, shuffled and/or deflated (D4RL's and Minari's writers):
  its chunks read raw, each inflated to exactly its declared size, so that a chunk which inflates
  to gigabytes is refused after one chunk's worth (h5py's own deflate grows its buffer to whatever
  the stream holds). Unwritten chunks hold the fill value, as h5py reads them. Large datasets are
  inflated in a thread pool (ISA-L's inflate, ~2.5x zlib's speed, releases the GIL).

  None when the dataset does not qualify (contiguous, other filters): the caller reads it through
  h5py.
  """
  if item.chunks is None or item.dtype.kind not in 'biufc':
    return None
  plist = item.id.get_create_plist()
  pipeline = [plist.get_filter(i)[0] for i in range(plist.get_nfilters())]
  if not set(pipeline) <= {_DEFLATE, _SHUFFLE}:
    return None
  chunk_bytes = math.prod(item.chunks) * item.dtype.itemsize
  chunks = []
  item.id.chunk_iter(chunks.append)
  expected = math.prod(math.ceil(n / c) for n, c in zip(item.shape, item.chunks))
  if len(chunks) == expected:
    out = np.empty(item.shape, dtype=item.dtype)
  else:
    out = np.full(item.shape, item.fillvalue, dtype=item.dtype)
  with open(item.file.filename, 'rb') as f:
    fd = f.fileno()

    def read_chunk(chunk) -> None:
      data = os.pread(fd, chunk.size, chunk.byte_offset)
      if len(data) != chunk.size:
        raise zlib.error(f'chunk at {chunk.chunk_offset} runs past the end of the file')
      for position in reversed(range(len(pipeline))):
        if chunk.filter_mask & (1 << position):
          continue  # HDF5 skipped this (optional) filter for this chunk.
        if pipeline[position] == _DEFLATE:
          data = _inflate(data, chunk_bytes, chunk.chunk_offset)
        else:
          data = _unshuffle(data, item.dtype.itemsize)
      if len(data) != chunk_bytes:
        raise zlib.error(f'chunk at {chunk.chunk_offset} holds {len(data)} bytes, not '
                         f'{chunk_bytes}')
      array = np.frombuffer(data, dtype=item.dtype).reshape(item.chunks)
      region = tuple(slice(o, min(o + c, n))
                     for o, c, n in zip(chunk.chunk_offset, item.chunks, item.shape))
      out[region] = array[tuple(slice(0, r.stop - r.start) for r in region)]

    if item.nbytes < PARALLEL_READ_BYTES:
      for chunk in chunks:
        read_chunk(chunk)
    else:
      with concurrent.futures.ThreadPoolExecutor(os.cpu_count()) as pool:
        list(pool.map(read_chunk, chunks))
  return out


def _inflate(data: bytes, size: int, offset: tuple[int, ...]) -> bytes:
  """A deflated chunk, inflated to exactly its `size` (HDF5 deflates whole chunks, edge chunks
  included: a short one is damage, whose missing tail h5py returns as whatever memory held)."""
  limit = files.expansion_limit(len(data), files.DEFLATE)
  if size > limit:
    raise files.size_limit_error(size, limit, what=f'a chunk of {len(data)} bytes at {offset} '
                                 'declares')
  try:
    return bounded_inflate.inflate_exactly(data, size)
  except ValueError as e:
    raise zlib.error(f'chunk at {offset} does not inflate to its declared {size} bytes: '
                     f'{e}') from None


def _unshuffle(data: bytes, itemsize: int) -> bytes:
  """HDF5's shuffle filter undone: byte planes back to items (a tail of < itemsize bytes stays)."""
  whole = len(data) // itemsize * itemsize
  if itemsize == 1 or not whole:
    return data
  planes = np.frombuffer(data, np.uint8, count=whole).reshape(itemsize, whole // itemsize)
  return planes.T.tobytes() + data[whole:]
