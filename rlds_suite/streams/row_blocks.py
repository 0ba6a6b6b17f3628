"""Blocks of cached row-selecting units, drawn in numpy as a pure function of the block index.

With a cache (streams.cache) and a unit that only selects rows (steps, transitions, pairs), a
block needs no decoding or tf.data work: the units of a dataset's whole shard are cut once, as
row indices into the cache (`UnitTable`, one int64 array per distinct unit field), and each
block is a few numpy index operations on those arrays. `RowBlocks(b)` gives block b from b alone:
dataset i's piece is units [start_i(b), start_i(b) + c_i(b)) of its stream of passes (each pass
all its units, whole episodes in a seeded random order per pass), where c_i is the mix schedule
and start_i its running sum; the block's permutation is seeded by b. So the numpy exit calls it
in a plain loop (no tf.data element, no thread hand-off), and the tf.data exit maps it over
`Dataset.range` (a range position is all a tf.train.Checkpoint needs to resume). Exhaustion
(STOP, DROP) and equal unit counts per shard (`limit`) cut the stream as `pipeline._mix_blocks`
and `pipeline._truncate` do for streams read from files.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np
import tensorflow as tf

from rlds_suite.core import errors
from rlds_suite.core import nested


@dataclasses.dataclass(frozen=True)
class UnitTable:
  """The units of one cached dataset shard as row indices, in episode order."""
  rows: dict[str, np.ndarray]  # Unit field path -> [U] row of the cache (int32 where it fits;
  # one array shared by the fields that select the same rows).
  unit_splits: np.ndarray  # [episodes + 1]: units of episode k are [unit_splits[k], [k + 1]).

  @property
  def num_units(self) -> int:
    return int(self.unit_splits[-1])

  @classmethod
  def cut(cls, unit: Any, project: Callable[[Any], Any], spec_paths: Sequence[str],
          row_splits: np.ndarray, chunk_rows: int = 1 << 18) -> 'UnitTable':
    """Units cut (by `unit.from_episodes`, eagerly) from steps whose every field holds its own row
    index: what a block of units of the real steps would select. Cut `chunk_rows` rows of whole
    episodes at a time, so that the cut's int64 temporaries stay bounded whatever the dataset."""
    index_type = np.int32 if row_splits[-1] < 2**31 else np.int64  # Half the memory.

    def cut_rows(splits: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
      rows = tf.range(int(splits[0]), int(splits[-1]), dtype=tf.int64)
      steps = nested.unflatten_paths({path: rows for path in spec_paths})
      units, episode = unit.from_episodes(project(steps), tf.constant(splits - splits[0]))
      return ({path: np.asarray(value) for path, value in nested.flatten_paths(units).items()},
              np.asarray(episode, np.int64))

    # Fields that select the same rows (in a two-episode probe) share one array.
    probe, _ = cut_rows(np.array([0, 50, 107], np.int64))
    representative = {path: next((p for p in probe if value.size and
                                  np.array_equal(probe[p], value)), path)
                      for path, value in probe.items()}
    parts: dict[str, list[np.ndarray]] = {p: [] for p in set(representative.values())}
    counts = []
    start, episodes = 0, len(row_splits) - 1
    while start < episodes:
      stop = int(np.searchsorted(row_splits, row_splits[start] + chunk_rows, side='right')) - 1
      stop = min(max(stop, start + 1), episodes)
      values, episode = cut_rows(row_splits[start:stop + 1])
      for path in parts:
        parts[path].append(values[path].astype(index_type))
      counts.append(np.bincount(episode, minlength=stop - start))
      start = stop
    joined = {path: np.concatenate(chunks) if chunks else np.zeros(0, index_type)
              for path, chunks in parts.items()}
    counts = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    return cls({path: joined[rep] for path, rep in representative.items()},
               np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))


class RowBlocks:
  """Block index -> (block of row-index units tagged with dataset index and epoch, its order)."""

  def __init__(self, tables: Sequence[UnitTable], schedule: np.ndarray, *, repeat: bool,
               stop: bool, limits: Sequence[Optional[int]], epoch_seeds: Sequence[int],
               permute_seed: Optional[int], shuffle: bool, dataset_index: str, epoch: str):
    self._tables = tuple(tables)
    self._schedule = np.asarray(schedule, np.int64)  # [cycle blocks, datasets]
    self._starts = np.concatenate([np.zeros((1, len(tables)), np.int64),
                                   np.cumsum(self._schedule, axis=0)])  # [cycle + 1, datasets]
    self._repeat, self._stop = repeat, stop
    self._epoch_seeds = tuple(epoch_seeds)
    self._permute_seed = permute_seed
    self._shuffle = shuffle
    self._dataset_index, self._epoch = dataset_index, epoch
    self._orders: dict[tuple[int, int], np.ndarray] = {}
    for i, table in enumerate(self._tables):
      if repeat and table.num_units == 0 and self._schedule[:, i].any():  # No pass to repeat.
        raise errors.EmptyInputError(f'dataset {i} has no units of this kind in its shard')
    # Units of each dataset the stream can use: all its passes (REPEAT) or one, cut to `limit`.
    self._totals = [None if repeat else (t.num_units if limit is None else min(limit, t.num_units))
                    for t, limit in zip(self._tables, limits)]
    self.num_blocks = None if repeat else self._count_blocks()

  def _start(self, block: int) -> np.ndarray:
    """[datasets] units each dataset gave before `block` (scheduled, not cut by exhaustion)."""
    cycles, within = divmod(block, len(self._schedule))
    return cycles * self._starts[-1] + self._starts[within]

  def _last_block(self, i: int) -> int:
    """The first block at whose end dataset i has given all its units (-1 when it has none)."""
    total, per_cycle = self._totals[i], int(self._starts[-1, i])
    if total == 0:
      return -1
    if per_cycle == 0:
      return np.iinfo(np.int64).max  # Never scheduled: it never runs out.
    base = max(total // per_cycle - 1, 0)
    ends = base * per_cycle + np.concatenate([self._starts[1:, i], per_cycle + self._starts[1:, i]])
    return base * len(self._schedule) + int(np.searchsorted(ends, total, side='left'))

  def _count_blocks(self) -> int:
    lasts = [self._last_block(i) for i in range(len(self._tables))]
    if self._stop:  # The stream ends with the block in which the first dataset runs out.
      return 0 if min(lasts) < 0 else min(lasts) + 1
    return max([last for last in lasts if last < np.iinfo(np.int64).max], default=-1) + 1  # DROP.

  def _epoch_units(self, i: int, epoch: int) -> np.ndarray:
    """Dataset i's units in pass `epoch`: whole episodes, in a seeded random order per pass."""
    units = self._orders.get((i, epoch))
    if units is None:
      splits = self._tables[i].unit_splits
      episodes = len(splits) - 1
      order = (np.random.default_rng([self._epoch_seeds[i], epoch]).permutation(episodes)
               if self._shuffle else np.arange(episodes))
      counts = splits[order + 1] - splits[order]
      firsts = np.repeat(splits[order] - (np.cumsum(counts) - counts), counts)
      units = (firsts + np.arange(len(firsts))).astype(
          np.int32 if len(firsts) < 2**31 else np.int64)
      # Keep this pass and the one before it: the next block reads on from where this one ended.
      self._orders = {**{k: v for k, v in self._orders.items() if k[0] != i or k[1] == epoch - 1},
                      (i, epoch): units}
    return units

  def _piece(self, i: int, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(unit indices into dataset i's table, their epochs) of its units [start, start + count)."""
    per_epoch = self._tables[i].num_units
    units, epochs = [], []
    while count > 0:
      epoch, offset = divmod(start, per_epoch)
      take = min(count, per_epoch - offset)
      units.append(self._epoch_units(i, epoch)[offset:offset + take])
      epochs.append(np.full(take, epoch, np.int64))
      start, count = start + take, count - take
    if not units:
      return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return (units[0], epochs[0]) if len(units) == 1 else (np.concatenate(units),
                                                          np.concatenate(epochs))

  def _counts(self, block: int, start: np.ndarray) -> np.ndarray:
    wanted = self._schedule[block % len(self._schedule)]
    if self._repeat:
      return wanted
    given = np.array([max(min(w, total - s), 0)
                      for w, s, total in zip(wanted, start, self._totals)], np.int64)
    if self._stop and np.any(given < wanted):  # The last block, cut pro rata.
      fraction = min(g / w for g, w in zip(given, wanted) if w > 0)
      given = np.minimum(given, np.ceil(fraction * wanted.astype(np.float64)).astype(np.int64))
    return given

  def __call__(self, block: int) -> tuple[dict[str, Any], np.ndarray]:
    block = int(block)
    start = self._start(block)
    pieces = [(i, *self._piece(i, int(s), int(c)))
              for i, (s, c) in enumerate(zip(start, self._counts(block, start)))]
    flat: dict[str, np.ndarray] = {}
    joined: dict[tuple[int, ...], np.ndarray] = {}  # Fields that select the same rows share one.
    for path in self._tables[0].rows:
      key = tuple(id(self._tables[i].rows[path]) for i, _, _ in pieces)
      if key not in joined:
        parts = [self._tables[i].rows[path][units] for i, units, _ in pieces]
        joined[key] = parts[0] if len(parts) == 1 else np.concatenate(parts)
      flat[path] = joined[key]
    flat[self._dataset_index] = np.concatenate(
        [np.full(len(units), i, np.int32) for i, units, _ in pieces])
    flat[self._epoch] = np.concatenate([epochs for _, _, epochs in pieces])
    size = len(flat[self._epoch])
    order = (np.random.default_rng([self._permute_seed, block]).permutation(size)
             if self._permute_seed is not None else np.arange(size, dtype=np.int64))
    return nested.unflatten_paths(flat), order

  def values(self, gather: Callable[[dict, np.ndarray], dict]) -> Callable[[int], dict]:
    """Block index -> the block's flat values: its rows taken from the caches by `gather`
    (streams.cache.RowGather), which applies the block's permutation in the same take."""

    def block_values(block: int) -> dict[str, np.ndarray]:
      rows, order = self(block)
      return gather(nested.flatten_paths(rows), order)

    return block_values

  def numpy_blocks(self, gather: Callable[[dict, np.ndarray], dict]) -> Iterator[Any]:
    """Every block's nested values, in order (the numpy exit: no tf.data element, no thread)."""
    values = self.values(gather)
    indices = itertools.count() if self.num_blocks is None else range(self.num_blocks)
    for index in indices:
      yield nested.unflatten_paths(values(index))

  def dataset(self, gather: Callable[[dict, np.ndarray], dict],
              spec: dict[str, tf.TensorSpec]) -> tf.data.Dataset:
    """The same blocks as `numpy_blocks`, as a tf.data dataset: drawn and gathered by one numpy
    function mapped over Dataset.range (a range position is all a checkpoint saves)."""
    paths = list(spec)
    values = self.values(gather)
    indices = tf.data.Dataset.range(
        np.iinfo(np.int64).max if self.num_blocks is None else self.num_blocks)

    def make(block):
      flat = values(block)
      return [flat[p] for p in paths]

    def read(index):
      flat = tf.numpy_function(make, [index], [spec[p].dtype for p in paths], stateful=False)
      for value, path in zip(flat, paths):
        value.set_shape([None, *spec[path].shape])
      return nested.unflatten_paths(dict(zip(paths, flat)))

    return indices.map(read)
