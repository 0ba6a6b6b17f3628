"""Where a stream's blocks become batches: numpy for JAX/PyTorch, tf.data for TensorFlow.

A stream hands out large shuffled blocks (thousands of units): a tf.data element handed to a
consumer costs 30-100 us here (the asynchronous IteratorGetNext wakes a thread), so one element
per 256-unit batch capped the stream far below the rate at which files are read. Batches are cut
where they are used: `as_numpy` permutes each block with one numpy `take` per field (the block's
seeded permutation comes with it) and slices it into batches (views), `Stream.dataset` permutes
and rebatches the blocks inside tf.data for TensorFlow loops, `tf.train.Checkpoint` and the
tf.data service (no Python in its graph). For cached row-selecting units the numpy exit draws
each block itself (`Stream.row_blocks`, a function of the block index) and the tf.data exit maps
the same function over `Dataset.range`. Both give the same batches in the same order: batches of
`batch_size` consecutive units of the block sequence (a batch may span two blocks where a block is
not a multiple of it), the last one short unless `drop_remainder`.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable, Iterator, Optional

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.core import nested
from rlds_suite.streams import budget as budget_lib
from rlds_suite.streams import cache as cache_lib
from rlds_suite.streams import reading


@dataclasses.dataclass(frozen=True)
class Stream:
  """A stream of shuffled blocks of units and the batches cut from them.

  It behaves as its tf.data exit (`dataset`): `iter(stream)`, `stream.take(n)`,
  `stream.element_spec` and every other tf.data.Dataset attribute are the batch dataset's.
  Pass `stream.dataset` where a tf.data.Dataset itself is required (Keras, tf.distribute).
  """
  blocks: tf.data.Dataset  # (block of units, its permutation)
  batch_size: int
  drop_remainder: bool
  sizes: budget_lib.Sizes
  gather: Optional[cache_lib.RowGather]  # Blocks of cached row indices -> values; or None.
  names: tuple[str, ...]
  files: tuple[tuple[str, ...], ...]  # Per dataset, the files read (to name a corrupt one).
  # Cached row-selecting units: block index -> the same (block, order) as `blocks` gives, drawn
  # in numpy (streams.row_blocks); the numpy exit calls it directly, without tf.data.
  row_blocks: Optional[Callable[[int], Any]] = None

  @property
  def dataset(self) -> tf.data.Dataset:
    """The tf.data exit: permuted blocks rebatched inside tf.data (for TensorFlow loops and
    tf.train.Checkpoint)."""
    if self.gather is None:
      blocks = self.blocks.map(
          lambda block, order: tf.nest.map_structure(lambda t: tf.gather(t, order), block))
    else:
      blocks = self.blocks.map(self._gathered).with_options(_stateless_python())
    return blocks.rebatch(self.batch_size, drop_remainder=self.drop_remainder).prefetch(1)

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

  def numpy_batches(self) -> Iterator[Any]:
    """Batches as nested numpy arrays, cut from the permuted blocks in numpy."""
    if self.row_blocks is not None:
      count = self.row_blocks.num_blocks
      indices = itertools.count() if count is None else range(count)
      blocks = (self.row_blocks(index) for index in indices)
    else:
      files = [f for group in self.files for f in group]
      blocks = reading.numpy_groups(self.blocks, files, ', '.join(self.names))
    return cut_batches(self._permute_each(blocks), self.batch_size, self.drop_remainder)

  def _gathered(self, block: Any, order: tf.Tensor) -> Any:
    """The tf.data exit's gather of cached rows (numpy, from the memory maps)."""
    flat = nested.flatten_paths(block)
    paths = list(flat)
    specs = [self.gather.spec.get(p, tf.TensorSpec(flat[p].shape[1:], flat[p].dtype))
             for p in paths]

    def gathered(order, *columns):
      values = self.gather(dict(zip(paths, columns)), order)
      return [values[p] for p in paths]

    values = tf.numpy_function(gathered, [order, *flat.values()], [s.dtype for s in specs],
                               stateful=False)
    for value, spec in zip(values, specs):
      value.set_shape([None, *spec.shape])
    return nested.unflatten_paths(dict(zip(paths, values)))

  def _permute_each(self, blocks: Iterator[Any]) -> Iterator[Any]:
    for block, order in blocks:
      if self.gather is not None:
        permuted = nested.unflatten_paths(self.gather(nested.flatten_paths(block), order))
      else:
        permuted = tf.nest.map_structure(lambda a, o=order: np.take(a, o, axis=0), block)
      del block  # Only the permuted copy stays while the next block is read.
      yield permuted
      del permuted


def _stateless_python() -> tf.data.Options:
  """A cache's gather is a function of its inputs: no state for a checkpoint to save."""
  options = tf.data.Options()
  options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
  return options


def _slicer(structure: Any) -> Callable[[int, int], Any]:
  """A function (start, stop) -> the same structure of row slices: built once per block, it
  costs a few us per batch where tf.nest.map_structure costs tens."""
  if isinstance(structure, dict):
    items = [(key, _slicer(value)) for key, value in structure.items()]
    return lambda start, stop: {key: cut(start, stop) for key, cut in items}
  return lambda start, stop: structure[start:stop]


def cut_batches(blocks: Iterator[Any], batch_size: int, drop_remainder: bool) -> Iterator[Any]:
  """Consecutive `batch_size`-unit batches of a sequence of nested numpy blocks (what tf.data's
  `rebatch` does): views into a block, copies only where a batch spans two blocks."""
  pending = None
  for block in blocks:
    if pending is not None:
      block = tf.nest.map_structure(lambda a, b: np.concatenate([a, b]), pending, block)
    size = len(tf.nest.flatten(block)[0])
    full = size - size % batch_size
    cut = _slicer(block)
    for start in range(0, full, batch_size):
      yield cut(start, start + batch_size)
    pending = cut(full, size) if full < size else None
  if pending is not None and not drop_remainder:
    yield pending


def as_numpy(stream: Any) -> Iterator[Any]:
  """Batches as nested numpy arrays, for JAX or PyTorch training loops.

      for batch in as_numpy(stream([{}], unit=Transitions(), batch_size=256, seed=0)):
        loss = train_step(params, batch['observation'], batch['action'])  # np.ndarray [256, ...]

  A Stream is cut from its blocks in numpy (one tf.data hand-off per block, not per batch); any
  other tf.data.Dataset is read element by element.
  """
  if isinstance(stream, Stream):
    return stream.numpy_batches()
  return iter(tfds.as_numpy(stream))
