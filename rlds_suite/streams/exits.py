"""Where a stream's blocks become batches: numpy for JAX/PyTorch, tf.data for TensorFlow.

A stream hands out large shuffled blocks (thousands of units): a tf.data element handed to a
consumer costs 30-100 us here (the asynchronous IteratorGetNext wakes a thread), so one element
per 256-unit batch capped the stream far below the rate at which files are read. Batches are cut
where they are used: `as_numpy` permutes each block with one numpy `take` per field and slices it
into batches (views), `Stream.dataset` permutes and rebatches the blocks inside tf.data for
TensorFlow loops and `tf.train.Checkpoint`. Both give the same batches in the same order (the
same seeded permutation of each block, `block_order`): batches of `batch_size` consecutive units of the block sequence
(a batch may span two blocks where a block is not a multiple of it), the last one short unless
`drop_remainder`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Optional

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.streams import budget as budget_lib
from rlds_suite.streams import reading


def block_order(seed: int, index: int, size: int) -> np.ndarray:
  """The permutation of block `index` of a stream seeded `seed`: uniform over all orders.

  numpy's, in both exits (~10x cheaper than tf.random.experimental.stateless_shuffle here)."""
  return np.random.default_rng([seed, int(index)]).permutation(int(size))


@dataclasses.dataclass(frozen=True)
class Stream:
  """A stream of shuffled blocks of units and the batches cut from them.

  It behaves as its tf.data exit (`dataset`): `iter(stream)`, `stream.take(n)`,
  `stream.element_spec` and every other tf.data.Dataset attribute are the batch dataset's.
  Pass `stream.dataset` where a tf.data.Dataset itself is required (Keras, tf.distribute).
  """
  blocks: tf.data.Dataset  # (block index, unpermuted block of units)
  permute_seed: Optional[int]  # None: blocks keep their order (no shuffling).
  batch_size: int
  drop_remainder: bool
  sizes: budget_lib.Sizes
  names: tuple[str, ...]
  files: tuple[tuple[str, ...], ...]  # Per dataset, the files read (to name a corrupt one).

  @property
  def dataset(self) -> tf.data.Dataset:
    """The tf.data exit: permuted blocks rebatched inside tf.data (for TensorFlow loops and
    tf.train.Checkpoint)."""
    seed = self.permute_seed

    def permute(index, block):
      if seed is None:
        return block
      size = tf.shape(tf.nest.flatten(block)[0], out_type=tf.int64)[0]
      order = tf.numpy_function(lambda i, n: block_order(seed, i, n), [index, size], tf.int64,
                                stateful=False)
      return tf.nest.map_structure(lambda t: tf.gather(t, order), block)

    options = tf.data.Options()  # The permutation is a function of its inputs: no state to save.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    blocks = self.blocks.map(permute).with_options(options)
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
    files = [f for group in self.files for f in group]
    blocks = reading.numpy_groups(self.blocks, files, ', '.join(self.names))
    return cut_batches(self._permute_each(blocks), self.batch_size, self.drop_remainder)

  def _permute_each(self, blocks: Iterator[Any]) -> Iterator[Any]:
    for index, block in blocks:
      permuted = self._permuted(index, block)
      del block  # Only the permuted copy stays while the next block is read.
      yield permuted
      del permuted

  def _permuted(self, index: int, block: Any) -> Any:
    if self.permute_seed is None:
      return block
    order = block_order(self.permute_seed, index, len(tf.nest.flatten(block)[0]))
    return tf.nest.map_structure(lambda a: np.take(a, order, axis=0), block)


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
