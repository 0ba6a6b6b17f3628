"""Transitions decoded once and served again from column files on disk, a block at a time.

FQE passes over a dataset's transitions hundreds of times. Decoding them anew on every pass (the
stream's parse, on the cores the update needs) made FQE fed by the stream run at half the speed
of the same updates on arrays in memory. A TransitionStore keeps the first pass's decoded rows as
fixed-width column files; later passes read a block of rows (a plain file read, no memory map, so
the process holds at most one block whatever the dataset's size), permute it and cut batches.
"""

from __future__ import annotations

import os
from typing import Iterator, Mapping, Optional

import numpy as np

DEFAULT_BLOCK_BYTES = 32 << 20


class TransitionStore:
  """Columns of equal-length rows appended batch by batch, then read back in shuffled blocks."""

  def __init__(self, directory: str):
    self.directory = os.fspath(directory)
    self.rows = 0
    self._specs: dict[str, tuple[np.dtype, tuple[int, ...]]] = {}
    self._files: dict[str, object] = {}
    self.sealed = False

  def _path(self, name: str) -> str:
    return os.path.join(self.directory, name.replace('/', '__') + '.bin')

  def append(self, batch: Mapping[str, np.ndarray]) -> None:
    """Appends a batch (a dict of arrays with one leading axis) to every column."""
    if self.sealed:
      raise ValueError(f'{self.directory}: the store is sealed; nothing more can be appended')
    arrays = {k: np.asarray(v) for k, v in batch.items()}
    if not self._specs:
      self._specs = {k: (v.dtype, v.shape[1:]) for k, v in arrays.items()}
      self._files = {k: open(self._path(k), 'wb') for k in arrays}  # pylint: disable=consider-using-with
    if set(arrays) != set(self._specs):
      raise ValueError(f'{self.directory}: batch fields {sorted(arrays)} are not the store\'s '
                       f'{sorted(self._specs)}')
    sizes = {len(v) for v in arrays.values()}
    if len(sizes) != 1:
      raise ValueError(f'{self.directory}: columns of different lengths {sorted(sizes)}')
    for name, value in arrays.items():
      dtype, shape = self._specs[name]
      if value.shape[1:] != shape:
        raise ValueError(f'{self.directory}: field {name} has rows of shape {value.shape[1:]}, '
                         f'the store {shape}')
      self._files[name].write(np.ascontiguousarray(value, dtype).tobytes())
    self.rows += sizes.pop()

  def seal(self) -> None:
    """Ends appending; the columns can be read from now on."""
    for f in self._files.values():
      f.close()
    self.sealed = True

  @property
  def row_bytes(self) -> int:
    return sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
               for dtype, shape in self._specs.values())

  def read(self, start: int, stop: int) -> dict[str, np.ndarray]:
    """Rows [start, stop) of every column, read into memory."""
    if not self.sealed:
      raise ValueError(f'{self.directory}: seal the store before reading it')
    out = {}
    for name, (dtype, shape) in self._specs.items():
      per_row = int(np.prod(shape, dtype=np.int64))
      out[name] = np.fromfile(self._path(name), dtype, count=(stop - start) * per_row,
                              offset=start * per_row * dtype.itemsize).reshape((-1,) + shape)
    return out

  def batches(self, batch_size: int, seed: int = 0,
              block_bytes: int = DEFAULT_BLOCK_BYTES) -> Iterator[dict[str, np.ndarray]]:
    """Batches of `batch_size` rows, forever: each pass visits the blocks in a new random order
    and each block's rows in a new random order (rows left over from one block go into the next
    block's batches). Holds at most one block plus one batch of rows."""
    if not self.rows:
      raise ValueError(f'{self.directory}: the store has no rows')
    rng = np.random.default_rng(seed)
    if self.rows <= batch_size:  # As array_batches: the whole dataset is the batch.
      everything = self.read(0, self.rows)
      while True:
        yield everything
    block_rows = max(batch_size, block_bytes // max(self.row_bytes, 1))
    starts = np.arange(0, self.rows, block_rows)
    pending: Optional[dict[str, np.ndarray]] = None
    while True:
      for start in rng.permutation(starts):
        block = self.read(int(start), int(min(start + block_rows, self.rows)))
        if pending is not None:
          block = {k: np.concatenate([pending[k], v]) for k, v in block.items()}
        order = rng.permutation(len(block[next(iter(block))]))
        block = {k: v[order] for k, v in block.items()}  # one gather a block; batches are slices
        cut = len(order) - len(order) % batch_size
        for i in range(0, cut, batch_size):
          yield {k: v[i:i + batch_size] for k, v in block.items()}
        pending = {k: v[cut:] for k, v in block.items()}
