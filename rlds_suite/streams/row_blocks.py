"""Blocks of cached row-selecting units, drawn in numpy as a pure function of the block index.

With a cache (streams.cache) and a unit that only selects rows (steps, transitions, pairs), a
block needs no decoding or tf.data work: a unit of such a kind is its episode's j-th and selects,
per field, the row at a fixed offset from the episode's first row plus j (`UnitTable`: per episode
its first row and unit count, per field its offset; nothing per unit, so memory grows with
episodes, not steps), and each block's row indices are computed with a few numpy operations. `RowBlocks(b)` gives block b from b alone:
dataset i's piece is units [start_i(b), start_i(b) + c_i(b)) of its stream of passes (each pass
all its units, whole episodes in a seeded random order per pass), where c_i is the mix schedule
and start_i its running sum; the block's permutation is seeded by b and applied in place to its
rows (numpy's Fisher-Yates: ~10 ns a unit, most of a cached step's CPU). So the numpy exit calls it
in a plain loop in the consumer's own thread (no tf.data element, no thread), and the tf.data
exit maps it over `Dataset.range` (a range position is all a tf.train.Checkpoint needs to resume).
Exhaustion (STOP, DROP) and equal unit counts per shard (`limit`) cut the stream as `pipeline._mix_blocks`
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
from rlds_suite.streams import budget
from rlds_suite.streams import exits
from rlds_suite.streams import iterator_exit


@dataclasses.dataclass(frozen=True)
class UnitTable:
  """The units of one cached dataset shard, per episode (no per-unit array, so memory grows with
  episodes, not steps): the j-th unit of episode k selects, for field f, cache row
  `row_starts[k] + j + offsets[f]`. Every row-selecting unit (steps, transitions, pairs) has this
  form; `cut` checks it on a probe."""
  offsets: dict[str, int]  # Unit field path -> its row's offset from the unit's first row.
  row_starts: np.ndarray  # [episodes] first cache row of each episode.
  unit_splits: np.ndarray  # [episodes + 1]: units of episode k are [unit_splits[k], [k + 1]).

  @property
  def num_units(self) -> int:
    return int(self.unit_splits[-1])

  @classmethod
  def cut(cls, unit: Any, project: Callable[[Any], Any], spec_paths: Sequence[str],
          row_splits: np.ndarray) -> 'UnitTable':
    """The table of `unit` over episodes with `row_splits`: offsets read from a two-episode probe
    (units cut by `unit.from_episodes`, eagerly, from steps whose every field holds its own row
    index), unit counts from `unit.count`. Raises ValueError for a unit not of the table's form."""
    splits = np.array([0, 50, 107], np.int64)
    rows = tf.range(int(splits[-1]), dtype=tf.int64)
    units, episode = unit.from_episodes(
        project(nested.unflatten_paths({path: rows for path in spec_paths})), tf.constant(splits))
    episode = np.asarray(episode, np.int64)
    counts = np.bincount(episode, minlength=len(splits) - 1)
    if not np.array_equal(counts, unit.count(np.diff(splits))):
      raise ValueError(f'{unit} gives {counts} units where its count says '
                       f'{unit.count(np.diff(splits))}')
    first = splits[episode] + np.arange(len(episode)) - np.repeat(
        np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    offsets = {}
    for path, value in nested.flatten_paths(units).items():
      delta = np.asarray(value, np.int64) - first
      if delta.size == 0 or np.any(delta != delta[0]):
        raise ValueError(f'{unit} field {path} does not select a row at a fixed offset')
      offsets[path] = int(delta[0])
    row_splits = np.asarray(row_splits, np.int64)
    unit_counts = np.asarray(unit.count(np.diff(row_splits)), np.int64)
    return cls(offsets, row_splits[:-1].copy(),
               np.concatenate([[0], np.cumsum(unit_counts)]).astype(np.int64))


# A block's units from several parts (datasets, passes) carry their part above this bit of their
# row while permuted: rows stay below 2**40 (a trillion cached steps), parts below 2**22.
_PART_SHIFT = 40


class RowBlocks:
  """Block index -> block of row-index units tagged with dataset index and epoch, permuted, as
  flat {field path: [units]} arrays."""

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
      if len(table.row_starts) and table.row_starts[-1] >= 2**_PART_SHIFT - 2**30:
        raise ValueError(f'dataset {i}: {table.row_starts[-1]} cached rows, more than row blocks '
                         'can index')
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

  def _epoch_order(self, i: int, epoch: int) -> tuple[np.ndarray, np.ndarray]:
    """Dataset i's pass `epoch`: (the first row of its units, in the pass's order, minus the
    unit's position in the pass, per episode; [episodes + 1] units before each episode of the
    pass). Whole episodes in a seeded random order per pass; per episode, not per unit."""
    key = (i, epoch)
    if key not in self._orders:
      table = self._tables[i]
      splits = table.unit_splits
      episodes = len(splits) - 1
      order = (np.random.default_rng([self._epoch_seeds[i], epoch]).permutation(episodes)
               if self._shuffle else np.arange(episodes))
      counts = splits[order + 1] - splits[order]
      before = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
      # Keep this pass and the one before it: the next block reads on from where this one ended.
      self._orders = {**{k: v for k, v in self._orders.items() if k[0] != i or k[1] == epoch - 1},
                      key: (table.row_starts[order] - before[:-1], before)}
    return self._orders[key]

  def _piece(self, i: int, start: int, count: int) -> list[tuple[np.ndarray, int]]:
    """Dataset i's units [start, start + count), per pass they fall in: (the first row of each
    unit, as a fresh intp array (the exit permutes it in place and indexes with it), the pass)."""
    per_epoch = self._tables[i].num_units
    parts = []
    while count > 0:
      epoch, offset = divmod(start, per_epoch)
      take = min(count, per_epoch - offset)
      shifts, before = self._epoch_order(i, epoch)
      # Array methods, not np.* wrappers: a block's fixed cost is microseconds of Python.
      lo = int(before.searchsorted(offset, side='right')) - 1
      hi = int(before.searchsorted(offset + take, side='left'))
      base = shifts[lo:hi].repeat(before[lo + 1:hi + 1] - before[lo:hi])
      within = offset - int(before[lo])
      rows = base[within:within + take].astype(np.intp, copy=False)
      rows += np.arange(offset, offset + take, dtype=np.intp)
      parts.append((rows, epoch))
      start, count = start + take, count - take
    return parts

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

  def __call__(self, block: int) -> dict[str, np.ndarray]:
    """Block `block` as flat {field path: [units] cache row (intp)} plus its DATASET_INDEX and
    EPOCH tags, in the block's order: a permutation seeded by the block, uniform over all orders
    (numpy's Fisher-Yates, `Generator.shuffle`), applied in place to the rows themselves (as
    `rows[permutation(n)]` with the same generator, without the index array and its take)."""
    block = int(block)
    start = self._start(block)
    parts = [(i, rows, epoch) for i, (s, c) in enumerate(zip(start, self._counts(block, start)))
             for rows, epoch in self._piece(i, int(s), int(c))]
    size = sum(len(rows) for _, rows, _ in parts)
    generator = (np.random.default_rng([self._permute_seed, block])
                 if self._permute_seed is not None else None)
    if len(parts) == 1:  # One dataset and one pass: constant tags, only the rows permuted.
      (dataset, first, epoch), = parts
      if generator is not None:
        generator.shuffle(first)
      datasets = np.full(size, dataset, np.int32)
      epochs = np.full(size, epoch, np.int64)
    elif not parts:
      first, datasets, epochs = (np.zeros(0, np.intp), np.zeros(0, np.int32),
                                 np.zeros(0, np.int64))
    else:  # Each unit's part in the high bits of its row, so one shuffle permutes both.
      codes = np.concatenate([rows + (k << _PART_SHIFT) for k, (_, rows, _) in enumerate(parts)])
      if generator is not None:
        generator.shuffle(codes)
      part = codes >> _PART_SHIFT
      first = codes & ((1 << _PART_SHIFT) - 1)
      datasets = np.array([i for i, _, _ in parts], np.int32)[part]
      epochs = np.array([epoch for _, _, epoch in parts], np.int64)[part]
    # Fields at the same offset share one array (RowGather takes each array's rows once).
    shifted = {0: first}
    flat: dict[str, np.ndarray] = {}
    for path, offset in self._tables[0].offsets.items():
      if offset not in shifted:
        shifted[offset] = first + offset
      flat[path] = shifted[offset]
    flat[self._dataset_index] = datasets
    flat[self._epoch] = epochs
    return flat

  def values(self, gather: Callable[[dict], dict]) -> Callable[[int], dict]:
    """Block index -> the block's flat values: its rows taken from the caches by `gather`
    (streams.cache.RowGather)."""

    def block_values(block: int) -> dict[str, np.ndarray]:
      return gather(self(block))

    return block_values

  def numpy_blocks(self, gather: Callable[[dict], dict]) -> exits.InlineBlocks:
    """Every block's nested values, in order (the numpy exit: no tf.data element), drawn,
    gathered and cut in the consumer's own thread: with the cores busy, a thread ahead of it (or
    two, making blocks two at a time) costs more CPU a step than it overlaps."""
    values = self.values(gather)
    indices = itertools.count() if self.num_blocks is None else range(self.num_blocks)
    return exits.InlineBlocks(nested.unflatten_paths(values(index)) for index in indices)

  def dataset(self, gather: Callable[[dict], dict],
              spec: dict[str, tf.TensorSpec]) -> tf.data.Dataset:
    """The same blocks as `numpy_blocks`, as a tf.data dataset: drawn and gathered by one numpy
    function mapped over Dataset.range (a range position is all a checkpoint saves)."""
    paths = list(spec)
    values = self.values(gather)
    iterator_exit.release_at_exit()  # A block drawn in flight at exit would hang it otherwise.
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

    return indices.map(read, num_parallel_calls=budget.BLOCK_WORKERS, deterministic=True)

