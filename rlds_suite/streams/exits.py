"""Where a stream's blocks become batches: numpy for JAX/PyTorch, tf.data for TensorFlow.

A stream hands out large shuffled blocks (thousands of units): a tf.data element handed to a
consumer costs 30-100 us here (the asynchronous IteratorGetNext wakes a thread), so one element
per 256-unit batch capped the stream far below the rate at which files are read. Blocks arrive
permuted (the permutation runs in tf.data's parallel block map, off the consumer's thread) and
batches are cut where they are used: `as_numpy` slices each block into batches (views);
`Stream.dataset` rebatches the blocks inside tf.data with no prefetch after the rebatch, so a batch
is a slice cut within the consumer's own GetNext and only blocks cross threads (for TensorFlow
loops, Keras, `tf.train.Checkpoint` and the tf.data service). For cached row-selecting units the
numpy exit draws, gathers and cuts each block in numpy in the consumer's own thread
(`Stream.numpy_blocks`, `InlineBlocks`: ~30 ns of CPU a CartPole step, where a thread ahead of the
consumer cost more in hand-offs and GIL contention than it overlapped on 2 shared cores); on two
cores or more a worker process draws the blocks' rows ahead (streams.block_draw), so the consumer
only gathers and cuts; the tf.data exit maps the same draw over `Dataset.range`. Both give the
same batches in the same order: batches of `batch_size` consecutive units of the block sequence
(a batch may span two blocks where a block is not a multiple of it), the last one short unless
`drop_remainder`.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.core import read_ahead
from rlds_suite.streams import budget as budget_lib
from rlds_suite.streams import reading
from rlds_suite.streams import sync_exit


@dataclasses.dataclass(frozen=True)
class Stream:
  """A stream of shuffled blocks of units and the batches cut from them.

  It behaves as its tf.data exit (`dataset`): `iter(stream)`, `stream.take(n)`,
  `stream.element_spec` and every other tf.data.Dataset attribute are the batch dataset's.
  Pass `stream.dataset` where a tf.data.Dataset itself is required (Keras, tf.distribute).
  """
  blocks: tf.data.Dataset  # Permuted blocks of units, prefetched.
  batch_size: int
  drop_remainder: bool
  sizes: budget_lib.Sizes
  names: tuple[str, ...]
  files: tuple[tuple[str, ...], ...]  # Per dataset, the files read (to name a corrupt one).
  # Cached row-selecting units: the same permuted blocks as `blocks`, drawn and gathered in numpy
  # (streams.row_blocks); the numpy exit iterates it directly, without tf.data.
  numpy_blocks: Optional[Callable[[], Iterator[Any]]] = None

  @property
  def dataset(self) -> tf.data.Dataset:
    """The tf.data exit: the blocks rebatched inside tf.data (for TensorFlow loops and
    tf.train.Checkpoint). No prefetch after the rebatch: a batch is a slice cut in the consumer's
    GetNext, and only a block crosses threads; in a tf.function that GetNext is the synchronous
    kernel (streams.sync_exit), so a batch costs no thread wake-up."""
    return sync_exit.SyncExitDataset(
        self.blocks.rebatch(self.batch_size, drop_remainder=self.drop_remainder))

  @property
  def description(self) -> str:
    """The datasets and the buffer sizes chosen for them under the memory budget."""
    lines = [f'stream of batches of {self.batch_size} from {len(self.names)} dataset(s):']
    lines += [f'  dataset {i}: {name}' for i, name in enumerate(self.names)]
    return '\n'.join(lines + [self.sizes.describe()])

  def __iter__(self):
    return iter(self.dataset)

  def __getattr__(self, name: str) -> Any:
    if name.startswith('__'):
      raise AttributeError(name)
    return getattr(self.dataset, name)

  def numpy_batches(self, draw_worker: Optional[bool] = None) -> Iterator[Any]:
    """Batches as nested numpy arrays, sliced from the permuted blocks in numpy (`as_numpy`)."""
    if draw_worker is None:
      draw_worker = _usable_cores() > 1
    if self.numpy_blocks is not None:
      blocks = self.numpy_blocks()
      if isinstance(blocks, InlineBlocks):  # Made and cut in the consumer's thread.
        if draw_worker and blocks.drawn_ahead is not None:
          return cut_batches(blocks.drawn_ahead(), self.batch_size, self.drop_remainder)
        return cut_batches(iter(blocks), self.batch_size, self.drop_remainder)
      # Cut by a thread too: the consumer only takes batches.
      lists = batch_lists(blocks, self.batch_size, self.drop_remainder)
      return itertools.chain.from_iterable(read_ahead.read_ahead(lists, depth=1, name='batches'))
    files = [f for group in self.files for f in group]
    blocks = reading.numpy_groups(self.blocks, files, ', '.join(self.names))
    return cut_batches(blocks, self.batch_size, self.drop_remainder)


def _usable_cores() -> int:
  """The cores this process may run on (its affinity on Linux; elsewhere the machine's)."""
  if hasattr(os, 'sched_getaffinity'):  # Not on macOS or Windows.
    return len(os.sched_getaffinity(0))
  return os.cpu_count() or 1


class InlineBlocks:
  """Numpy blocks that the numpy exit makes and cuts in the consumer's own thread, without a
  read-ahead thread: for blocks that cost little Python and a GIL-free numpy pass or two (cached
  row blocks: ~30 ns of CPU a CartPole step), where a thread handing them over costs more CPU a
  step than it overlaps on a shared 2-core machine (measured: 34 vs 39 ns a step).
  `drawn_ahead`, where given, makes the same blocks with part of their work (cached row blocks:
  the draw) done ahead by a worker process."""

  def __init__(self, blocks: Iterator[Any],
               drawn_ahead: Optional[Callable[[], Iterator[Any]]] = None):
    self._blocks = blocks
    self.drawn_ahead = drawn_ahead

  def __iter__(self) -> Iterator[Any]:
    return self._blocks


def _leaves(structure: Any) -> tuple[list[np.ndarray], Callable[[Sequence[np.ndarray]], Any]]:
  """The arrays of a nested dict of arrays, and a function that builds the same structure from
  arrays given in that order: built once per block, it costs well under a microsecond per batch
  where tf.nest.map_structure costs tens."""
  if not isinstance(structure, dict):
    return [structure], lambda values: values[0]
  if not any(isinstance(value, dict) for value in structure.values()):
    keys = list(structure)
    return list(structure.values()), lambda values: dict(zip(keys, values))
  arrays, parts = [], []
  for key, value in structure.items():
    sub, build = _leaves(value)
    parts.append((key, build, len(arrays), len(arrays) + len(sub)))
    arrays += sub
  return arrays, lambda values: {key: build(values[a:b]) for key, build, a, b in parts}


def split_block(block: Any, batch_size: int) -> tuple[list[Any], Optional[Any]]:
  """(the block's whole `batch_size`-unit batches, its remaining units or None), all views: each
  field is reshaped once to [batches, batch_size, ...], so a batch costs one view per field."""
  arrays, build = _leaves(block)
  size = len(arrays[0])
  whole = size // batch_size
  full = whole * batch_size
  # Zipped as [batches, batch_size, ...] arrays, not lists of their rows: a view per field and
  # batch either way, ~13% less CPU (cached CartPole: 5.0 vs 5.7 ns a step).
  per_field = [(a if full == size else a[:full]).reshape(whole, batch_size, *a.shape[1:])
               for a in arrays]
  batches = list(map(build, zip(*per_field)))
  return batches, (build([a[full:] for a in arrays]) if full < size else None)


def batch_lists(blocks: Iterator[Any], batch_size: int,
                drop_remainder: bool) -> Iterator[list[Any]]:
  """Per block, the consecutive `batch_size`-unit batches that end in it (what tf.data's
  `rebatch` does): views into a block, copies only where a batch spans two blocks."""
  pending = None
  for block in blocks:
    if pending is not None:
      (old, _), (new, build) = _leaves(pending), _leaves(block)
      block = build([np.concatenate([a, b]) for a, b in zip(old, new)])
    batches, pending = split_block(block, batch_size)
    yield batches
  if pending is not None and not drop_remainder:
    yield [pending]


def cut_batches(blocks: Iterator[Any], batch_size: int, drop_remainder: bool) -> Iterator[Any]:
  """Consecutive `batch_size`-unit batches of a sequence of nested numpy blocks (`batch_lists`)."""
  return itertools.chain.from_iterable(batch_lists(blocks, batch_size, drop_remainder))


def as_numpy(stream: Any, draw_worker: Optional[bool] = None) -> Iterator[Any]:
  """Batches as nested numpy arrays, for JAX or PyTorch training loops.

      for batch in as_numpy(stream([{}], unit=Transitions(), batch_size=256, seed=0)):
        loss = train_step(params, batch['observation'], batch['action'])  # np.ndarray [256, ...]

  A Stream is cut from its blocks in numpy (one tf.data hand-off per block, not per batch); any
  other tf.data.Dataset is read element by element. `draw_worker` (default: where this process
  may run on two cores or more): a cached stream of steps, transitions or pairs has its blocks'
  rows drawn ahead by a worker process at the lowest priority, on a core otherwise idle
  (streams.block_draw; the same batches): ~1.8x faster where a core is free, about even on a
  machine whose cores are all busy; False draws them in the consumer's thread.
  """
  if isinstance(stream, Stream):
    return stream.numpy_batches(draw_worker)
  return iter(tfds.as_numpy(stream))
