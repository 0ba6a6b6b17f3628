"""Blocks of cached row-selecting units, drawn in numpy as a pure function of the block index.

With a cache (streams.cache) and a unit that only selects rows (steps, transitions, pairs), a
block needs no decoding or tf.data work: a unit of such a kind is its episode's j-th and selects,
per field, the row at a fixed offset from the episode's first row plus j (`UnitTable`: per episode
its first row and unit count, per field its offset; nothing per unit, so memory grows with
episodes, not steps), and each block's row indices are computed with a few numpy operations
(streams.block_draw). `RowBlocks(b)` gives block b from b alone: dataset i's piece is units
[start_i(b), start_i(b) + c_i(b)) of its stream of passes (each pass all its units, whole
episodes in a seeded random order per pass), where c_i is the mix schedule and start_i its
running sum; the block's permutation is seeded by b and applied in place to its rows (numpy's
Fisher-Yates). The numpy exit calls it in a plain loop in the consumer's own thread (no tf.data
element, no thread), or, by default on two cores or more, has a worker process draw blocks
ahead (block_draw); the tf.data exit maps it over `Dataset.range` (a range position is all a
tf.train.Checkpoint needs to resume), drawing in tf.data's threads with no worker (0.28-0.41x
the numpy exit's rate in benchmarks/stream.py --quick, quiet machine). Exhaustion (STOP, DROP)
and equal unit counts per shard (`limit`) cut the stream as `pipeline._mix_blocks` and
`pipeline._truncate` do for streams read from files.

Where a cached CartPole step's CPU goes (issue 21; perf over the numpy exit in steady state,
blocks of 10,240 units, ~30 ns a step): the shuffle ~9 ns (Generator.shuffle: PCG64 draws and a
rejection branch the predictor cannot learn; 6 ns when the same seed repeats), the gather ~6.5
(one `take` per field), the cut ~5 (a view per field and batch ~2.5, a dict per batch ~2.2),
seeding the block's generator ~0.9, its unit rows ~1, tags ~0.4, malloc ~1.5, Python the rest;
the lean bound (benchmarks/stream.py's cache_gather_prototype) has the gather and the cut only.
Tried for the consumer's thread (cached/raw_read_batched, one process, rounds alternated with the
inline draw): a helper thread drawing block b+1 while the consumer gathers and cuts block b,
whole (0.66x vs 0.72x, 4 rounds, load 0.5-1.0) or only its shuffle (0.77x vs 0.67x, 6 rounds,
load 0.6-0.75; 0.64x vs 0.68x at load 0.5-1.7; 35-37 vs 30 ns of CPU a step), handed over at the
block's boundary or after the gather; draw and gather in a thread (0.60x vs 0.67x, load 2-2.5):
the helper needs the GIL to start and end each numpy call, which the consumer's loop holds, so
its shuffle ends waiting for the consumer's next release and each hand-off costs the consumer a
wake-up (~20 us on this VM); a Python loop beside a shuffling thread let it finish one shuffle
per 5 ms switch interval. A worker process has no GIL to share: 1.14x vs 0.66x (4 rounds, load
~2 from others, 15 ns of CPU a step in the consumer) when the consumer waited for it, but 0.44x
vs 0.57x with two busy loops beside it. Drawing here the blocks it has not finished, at nice 19
in its own session: 0.95x [0.56-1.36] vs 0.80x [0.70-0.91] (4 rounds, load ~2), 0.59x [0.42-0.86]
vs 0.74x [0.40-0.90] (6 rounds, load ~3.9 from others: the worker starved, the consumer drawing
nearly every block itself and still slower, woken or preempted by it). As kept (block_draw: no
requests for a while after misses): 1.13x [0.99-1.25] vs 0.71x [0.67-0.77] (6 rounds, load
2.2-3.3 from others, 20 vs 31 ns of CPU a step in the consumer), 0.69x [0.52-1.11] vs 0.73x
[0.59-1.10] (load ~3.5); with two busy loops beside it 0.52x [0.34-0.64] vs 0.44x [0.42-0.59] (load
~4) and 0.50x [0.45-0.62] vs 0.56x [0.47-0.62] (load ~2.8): even to 10% slower with the cores busy.
On a quiet machine (benchmarks/stream.py --quick, 3 rounds, load 1.0-1.6): 1.25x [1.16-1.34] vs
0.68x [0.56-0.80]. So `as_numpy` uses the worker by default where the process may run on two
cores or more (`draw_worker=False` draws inline).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np
import tensorflow as tf

from rlds_suite.core import errors
from rlds_suite.core import nested
from rlds_suite.streams import block_draw
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


class RowBlocks:
  """Block index -> block of row-index units tagged with dataset index and epoch, permuted, as
  flat {field path: [units]} arrays (drawn by streams.block_draw)."""

  def __init__(self, tables: Sequence[UnitTable], schedule: np.ndarray, *, repeat: bool,
               stop: bool, limits: Sequence[Optional[int]], epoch_seeds: Sequence[int],
               permute_seed: Optional[int], shuffle: bool, dataset_index: str, epoch: str):
    self._tables = tuple(tables)
    schedule = np.asarray(schedule, np.int64)  # [cycle blocks, datasets]
    self._dataset_index, self._epoch = dataset_index, epoch
    for i, table in enumerate(self._tables):
      if len(table.row_starts) and table.row_starts[-1] >= 2**block_draw.PART_SHIFT - 2**30:
        raise ValueError(f'dataset {i}: {table.row_starts[-1]} cached rows, more than row blocks '
                         'can index')
      if repeat and table.num_units == 0 and schedule[:, i].any():  # No pass to repeat.
        raise errors.EmptyInputError(f'dataset {i} has no units of this kind in its shard')
    # Units of each dataset the stream can use: all its passes (REPEAT) or one, cut to `limit`.
    totals = [None if repeat else (t.num_units if limit is None else min(limit, t.num_units))
              for t, limit in zip(self._tables, limits)]
    self._draw = block_draw.BlockDraw(
        [t.row_starts for t in self._tables], [t.unit_splits for t in self._tables], schedule,
        repeat=repeat, stop=stop, totals=totals, epoch_seeds=epoch_seeds,
        permute_seed=permute_seed, shuffle=shuffle)
    self.num_blocks = self._draw.num_blocks

  def _flat(self, first: np.ndarray, datasets: np.ndarray,
            epochs: np.ndarray) -> dict[str, np.ndarray]:
    """A drawn block as flat {field path: [units] cache row (intp)} plus its DATASET_INDEX and
    EPOCH tags. Fields at the same offset share one array (RowGather takes each array's rows
    once)."""
    shifted = {0: first}
    flat: dict[str, np.ndarray] = {}
    for path, offset in self._tables[0].offsets.items():
      if offset not in shifted:
        shifted[offset] = first + offset
      flat[path] = shifted[offset]
    flat[self._dataset_index] = datasets
    flat[self._epoch] = epochs
    return flat

  def __call__(self, block: int) -> dict[str, np.ndarray]:
    """Block `block` (`block_draw.BlockDraw`: permuted by numpy's Fisher-Yates seeded by the
    block), as flat {field path: [units] cache row (intp)} plus its tags."""
    return self._flat(*self._draw(block))

  def values(self, gather: Callable[[dict], dict]) -> Callable[[int], dict]:
    """Block index -> the block's flat values: its rows taken from the caches by `gather`
    (streams.cache.RowGather)."""

    def block_values(block: int) -> dict[str, np.ndarray]:
      return gather(self(block))

    return block_values

  def numpy_blocks(self, gather: Callable[[dict], dict]) -> exits.InlineBlocks:
    """Every block's nested values, in order (the numpy exit: no tf.data element), drawn,
    gathered and cut in the consumer's own thread: with the cores busy, a thread ahead of it (or
    two, making blocks two at a time) costs more CPU a step than it overlaps. By default on two
    cores or more (`as_numpy(..., draw_worker=None)`), a worker process draws them ahead on an
    idle core (`block_draw.drawn_ahead`); the same blocks."""
    values = self.values(gather)
    indices = lambda: itertools.count() if self.num_blocks is None else range(self.num_blocks)
    return exits.InlineBlocks(
        (nested.unflatten_paths(values(index)) for index in indices()),
        drawn_ahead=lambda: (nested.unflatten_paths(gather(self._flat(*drawn)))
                             for drawn in block_draw.drawn_ahead(self._draw, indices())))

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

