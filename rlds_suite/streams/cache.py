"""An opt-in cache of a dataset's decoded steps: memory-mapped numpy columns on local disk.

Parsing and decoding (ZLIB frames: ~200 us each) bound a stream; a cache decodes every step once.
`open_cache` fills it with one pass over the dataset's files the first time, then every epoch
reads episodes back as slices of memory-mapped columns (the page cache serves them), or, for units
that select rows, only their row indices (streams.row_blocks): `RowGather` then takes each block's
values from the columns with one numpy `take` per field (pages read count as file-backed,
reclaimable memory). A cache
directory holds one raw file per step field (`<path>.bin`, rows of the field's spec), the episode
row splits and `metadata.json` with the fingerprint of the source (its dataset_info.json and each
file's name, size and modification time, and the records read from it): a changed source is
decoded again. A cache is written under a temporary name and renamed when complete, so an
interrupted fill leaves nothing that looks complete.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import tempfile
from typing import Any, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.core import nested
from rlds_suite.streams import budget
from rlds_suite.streams import iterator_exit
from rlds_suite.streams import reading

FORMAT_VERSION = 1
METADATA = 'metadata.json'
ROW_SPLITS = 'row_splits.npy'


def fingerprint(builder: tfds.core.DatasetBuilder,
                files: Sequence[tfds.core.FileInstruction]) -> str:
  """Changes when the dataset's metadata or any of the files read (or the part read) changes."""
  digest = hashlib.sha256()
  info = os.path.join(os.fspath(builder.data_dir), 'dataset_info.json')
  if tf.io.gfile.exists(info):
    with tf.io.gfile.GFile(info, 'rb') as f:
      digest.update(f.read())
  for file in files:
    stat = tf.io.gfile.stat(file.filename)
    digest.update(json.dumps([file.filename, stat.length, stat.mtime_nsec, file.skip,
                              file.take]).encode())
  return digest.hexdigest()


def _column_file(path: str) -> str:
  return path.replace('/', '.') + '.bin'


@dataclasses.dataclass(frozen=True)
class DecodedCache:
  """A complete cache: row splits of its episodes and the spec of its columns."""
  directory: str
  row_splits: np.ndarray  # [episodes + 1] int64
  spec: dict[str, tf.TensorSpec]  # Flat path -> one step's spec.

  @property
  def num_episodes(self) -> int:
    return len(self.row_splits) - 1

  def columns(self) -> dict[str, np.ndarray]:
    return _memory_maps(self.directory, tuple(
        (path, spec.dtype.as_numpy_dtype, tuple(spec.shape.as_list()))
        for path, spec in self.spec.items()), int(self.row_splits[-1]))

  def read(self, episodes: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Steps of `episodes` (indices), concatenated in that order, and their row splits."""
    starts, stops = self.row_splits[episodes], self.row_splits[episodes + 1]
    columns = self.columns()
    steps = []
    for path in self.spec:
      column = columns[path]
      steps.append(np.concatenate([column[a:b] for a, b in zip(starts, stops)])
                   if len(episodes) else column[:0])
    return steps, np.concatenate([[0], np.cumsum(stops - starts)]).astype(np.int64)

  def read_group(self, episodes: tf.Tensor) -> tuple[dict[str, Any], tf.Tensor]:
    """`read` inside a tf.data map: ({field: [N, ...]} nested steps, [k + 1] row splits)."""
    dtypes = [s.dtype for s in self.spec.values()] + [tf.int64]
    iterator_exit.release_at_exit()  # A read in flight at exit would hang it otherwise.
    *steps, row_splits = tf.numpy_function(functools.partial(_flat_read, self), [episodes],
                                           dtypes, stateful=False)
    for value, spec in zip(steps, self.spec.values()):
      value.set_shape([None, *spec.shape])
    row_splits.set_shape([None])
    return nested.unflatten_paths(dict(zip(self.spec, steps))), row_splits


class RowGather:
  """Blocks of row-index units of cached datasets -> blocks of values, in one numpy `take` per
  field (and dataset) from the memory-mapped columns."""

  def __init__(self, caches: Sequence[DecodedCache], unit_columns: dict[str, str],
               dataset_index: str):
    self._caches = tuple(caches)
    self._unit_columns = dict(unit_columns)  # Unit field path -> cache column path.
    self._dataset_index = dataset_index
    self.spec = {path: caches[0].spec[column] for path, column in unit_columns.items()}
    self._columns: Optional[list[dict[str, np.ndarray]]] = None  # The memory maps, once opened.

  def __call__(self, flat_block: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A permuted block of row indices (streams.row_blocks: intp rows, fields at one offset
    sharing an array) -> its values; its other fields (tags) as they are."""
    if self._columns is None:
      self._columns = [cache.columns() for cache in self._caches]
    columns = self._columns
    out = {path: value for path, value in flat_block.items() if path not in self._unit_columns}
    if len(columns) == 1:
      for path, column in self._unit_columns.items():
        out[path] = columns[0][column].take(flat_block[path], axis=0)
      return out
    dataset = flat_block[self._dataset_index]
    mine = [dataset == i for i in range(len(columns))]
    for path, column in self._unit_columns.items():
      rows = flat_block[path]
      values = np.empty((len(rows), *self.spec[path].shape), self.spec[path].dtype.as_numpy_dtype)
      for i, dataset_columns in enumerate(columns):
        values[mine[i]] = dataset_columns[column].take(rows[mine[i]], axis=0)
      out[path] = values
    return out


def unit_columns(unit: Any, spec: dict[str, tf.TensorSpec]) -> dict[str, str]:
  """Which cache column each field of `unit` is a row of: units cut from steps whose every field
  holds its own column's code."""
  paths = list(spec)
  steps = nested.unflatten_paths({p: tf.fill([4], tf.constant(i, tf.int64))
                                  for i, p in enumerate(paths)})
  units, _ = unit.from_episodes(steps, tf.constant([0, 2, 4], tf.int64))
  return {path: paths[int(value.numpy()[0])]
          for path, value in nested.flatten_paths(units).items()}


def _flat_read(cache: DecodedCache, episodes: np.ndarray) -> list[np.ndarray]:
  steps, row_splits = cache.read(episodes)
  return [*steps, row_splits]


@functools.lru_cache(maxsize=64)
def _memory_maps(directory: str, columns: tuple, num_steps: int) -> dict[str, np.ndarray]:
  # Plain ndarray views of the maps: what is taken or sliced from them is a plain ndarray too
  # (np.memmap's own __getitem__/__array_finalize__ cost microseconds per batch and field).
  return {path: np.memmap(os.path.join(directory, _column_file(path)), dtype=dtype, mode='r',
                          shape=(num_steps, *shape)).view(np.ndarray)
          for path, dtype, shape in columns}


def _load(directory: str, expected_fingerprint: str) -> DecodedCache | None:
  try:
    with open(os.path.join(directory, METADATA)) as f:
      metadata = json.load(f)
  except (OSError, ValueError):
    return None
  if (metadata.get('format') != FORMAT_VERSION or
      metadata.get('fingerprint') != expected_fingerprint):
    return None
  spec = {path: tf.TensorSpec(shape, tf.as_dtype(dtype))
          for path, (dtype, shape) in metadata['columns'].items()}
  return DecodedCache(directory, np.load(os.path.join(directory, ROW_SPLITS)), spec)


def open_cache(cache_dir: str, name: str, builder: tfds.core.DatasetBuilder, split: str,
               parser: reading.EpisodeParser) -> DecodedCache:
  """The cache of `split` of `builder` (the fields `parser` keeps) under `cache_dir`, filled
  first (one pass, in file order) when it is missing or its source changed."""
  files = reading.split_files(builder, split)
  flat_spec = nested.flatten_paths(parser.spec)
  key = hashlib.sha256(json.dumps([os.fspath(builder.data_dir), split, sorted(flat_spec)])
                       .encode()).hexdigest()[:20]
  directory = os.path.join(cache_dir, key)
  expected = fingerprint(builder, files)
  cache = _load(directory, expected)
  if cache is not None:
    return cache
  os.makedirs(cache_dir, exist_ok=True)
  temporary = tempfile.mkdtemp(prefix=f'{key}.incomplete-', dir=cache_dir)
  try:
    _fill(temporary, files, parser, flat_spec, name)
    with open(os.path.join(temporary, METADATA), 'w') as f:
      json.dump({'format': FORMAT_VERSION, 'fingerprint': expected, 'source': name,
                 'split': split, 'columns': {p: [s.dtype.name, s.shape.as_list()]
                                             for p, s in flat_spec.items()}}, f, indent=1)
    if os.path.exists(directory):  # Stale: an older source, format or an interrupted rename.
      shutil.rmtree(directory)
    os.rename(temporary, directory)
  finally:
    shutil.rmtree(temporary, ignore_errors=True)
  _memory_maps.cache_clear()
  cache = _load(directory, expected)
  assert cache is not None
  return cache


def _fill(directory: str, files: Sequence[tfds.core.FileInstruction],
          parser: reading.EpisodeParser, flat_spec: dict[str, tf.TensorSpec], name: str) -> None:
  groups = reading.serialized_episodes(files).batch(budget.GROUP_EPISODES).map(
      parser, num_parallel_calls=budget.PARSE_PARALLELISM)
  outputs = {path: open(os.path.join(directory, _column_file(path)), 'wb') for path in flat_spec}
  lengths = []
  try:
    for steps, row_splits in reading.numpy_groups(groups, [f.filename for f in files], name):
      flat = nested.flatten_paths(steps)
      for path, out in outputs.items():
        out.write(np.ascontiguousarray(flat[path]).tobytes())
      lengths.append(np.diff(row_splits))
  finally:
    for out in outputs.values():
      out.close()
  if not lengths:
    raise errors.EmptyInputError('no episodes to cache', path=name)
  np.save(os.path.join(directory, ROW_SPLITS),
          np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(np.int64))
