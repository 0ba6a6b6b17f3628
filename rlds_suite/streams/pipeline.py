"""One tf.data stream of batched units from one or several datasets.

Per dataset, one host reads its shard of episodes and:
  1. reads files in a seeded shuffled order (interleaved), each episode decoded at once to [T, ...]
     step tensors (`reading.read_steps`);
  2. shuffles whole episodes in a buffer of `Shuffle.episodes` episodes;
  3. cuts each episode into units ([U, ...], `units.Unit`), tagging them with the dataset index and
     the epoch of this dataset they come from;
  4. hands out consecutive units (crossing episode boundaries; units themselves never do) as its
     piece of each block.
A block holds `Shuffle.units` units (`batch_size` without shuffling): dataset i gives c_i of them,
the counts drawn per block by `Mix.weights` in chunks of `Mix.granularity` units (a multinomial
draw; a seeded schedule that repeats every `SCHEDULE_BLOCKS` blocks, the same on every shard). The
pieces are concatenated, the block is permuted with a stateless seeded permutation and cut into
batches. Everything per step happens in vectorised ops on whole episodes and blocks: tf.data
handles one element per episode, block and batch, never one per unit.

Shuffle semantics: the episode buffer holds `Shuffle.episodes` decoded episodes; the block holds
`Shuffle.units` units. Within a block every order is equally likely, so two consecutive elements of
a batch are any two units of the block: from the same episode or from episodes up to about
`Shuffle.episodes + Shuffle.units / (shortest episode)` read positions apart. Two units more than
one block apart in the stream come from different blocks. Memory is bounded by the two buffers
(plus one block in each stage of the pipeline), never by the dataset size. Every random choice is
seeded from `seed`, so a seed makes the whole stream reproducible; `seed=None` draws one.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.tfds import datasets as datasets_lib
from rlds_suite.core import episodes as episodes_lib
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.streams import catalog as catalog_lib
from rlds_suite.streams import reading
from rlds_suite.streams import units as units_lib

DATASET_INDEX = 'dataset_index'  # Which of the stream's datasets a unit comes from.
EPOCH = 'epoch'  # Which pass over that dataset (counted per dataset) a unit comes from.

SCHEDULE_BLOCKS = 4096  # The mix's composition schedule repeats after this many blocks.

DatasetRef = Union[Mapping[str, Any], str, os.PathLike, tfds.core.DatasetBuilder]


@dataclasses.dataclass(frozen=True)
class Shuffle:
  """Episode buffer size (whole decoded episodes) and block size (units permuted together).

  Memory is about `episodes` decoded episodes plus three blocks of `units` units in flight: a few
  MiB for state vectors, but 10,240 84x84x4 uint8 frames are 289 MB a block, so lower `units` for
  large observations.
  """
  episodes: int = 16
  units: int = 10_240  # 40 batches of 256.

  def __post_init__(self):
    if self.episodes < 1 or self.units < 1:
      raise ValueError(f'buffer sizes must be >= 1, got {self}')


class Exhaustion(enum.Enum):
  """What happens when a dataset has no units left in the current pass."""
  REPEAT = 'repeat'  # Start its next epoch (reshuffled); the stream never ends.
  STOP = 'stop'  # End the stream (with the block in which a dataset runs out, cut there).
  DROP = 'drop'  # Drop it and go on with the others (weights renormalised); end when all ran out.


@dataclasses.dataclass(frozen=True)
class Mix:
  """Weights over datasets (uniform when None), exhaustion policy, units drawn per choice."""
  weights: Optional[Sequence[float]] = None
  exhaustion: Exhaustion = Exhaustion.REPEAT
  granularity: int = 16

  def __post_init__(self):
    if self.granularity < 1:
      raise ValueError(f'granularity must be >= 1, got {self.granularity}')


@dataclasses.dataclass(frozen=True)
class _Dataset:
  name: str
  builder: tfds.core.DatasetBuilder
  splits: tuple[tuple[str, int], ...]  # (split name, number of episodes).


def resolve_datasets(dataset_refs: Sequence[DatasetRef], *,
                     env_cfg: Optional[Mapping[str, Any]] = None,
                     catalog: Optional[catalog_lib.Catalog] = None,
                     split: Optional[str] = None) -> list[_Dataset]:
  """dataset_configs entries (dicts), TFDS names, directories or builders -> prepared builders."""
  catalog = catalog or catalog_lib.CATALOG
  resolved = []
  for ref in dataset_refs:
    if isinstance(ref, Mapping):
      entry = catalog.resolve(ref, env_cfg)
      name, source = f'{dict(ref)!r} ({entry.source})', entry.source
    else:
      name = source = ref if isinstance(ref, tfds.core.DatasetBuilder) else os.fspath(ref)
      name = getattr(name, 'name', name)
    builder = datasets_lib.load_builder(source)
    names = [split] if split else sorted(builder.info.splits.keys())
    splits = []
    for split_name in names:
      if split_name not in builder.info.splits:
        raise errors.SchemaError(f'no split {split_name!r}; has {sorted(builder.info.splits)}',
                                 path=str(name))
      splits.append((split_name, builder.info.splits[split_name].num_examples))
    resolved.append(_Dataset(str(name), builder, tuple(splits)))
  if not resolved:
    raise errors.EmptyInputError('no datasets given')
  return resolved


def shard_bounds(num_episodes: int, num_shards: int) -> np.ndarray:
  """Episode index boundaries of `num_shards` contiguous, disjoint, near-equal shards."""
  return np.arange(num_shards + 1) * num_episodes // num_shards


def _instruction(splits: Sequence[tuple[str, int]], start: int, stop: int) -> str:
  """Episodes [start, stop) of the concatenated splits as a TFDS split string."""
  parts, offset = [], 0
  for name, count in splits:
    a, b = max(start - offset, 0), min(stop - offset, count)
    if a < b:
      parts.append(f'{name}[{a}:{b}]')
    offset += count
  return '+'.join(parts)


def _seed(*parts: int) -> int:
  return int(np.random.SeedSequence([int(p) for p in parts]).generate_state(1)[0] & 0x7FFFFFFF)


def _size(element: Mapping[str, Any]) -> tf.Tensor:
  return tf.shape(tf.nest.flatten(element)[0], out_type=tf.int64)[0]


def _truncate(units: tf.data.Dataset, limit: int) -> tf.data.Dataset:
  """The first `limit` units of a dataset of [U, ...] unit groups."""

  def cut(emitted, group):
    keep = tf.clip_by_value(limit - emitted, 0, _size(group))
    return emitted + keep, (emitted, tf.nest.map_structure(lambda t: t[:keep], group))

  cut_groups = units.scan(tf.constant(0, tf.int64), cut)
  cut_groups = cut_groups.take_while(lambda emitted, group: emitted < limit)
  return cut_groups.map(lambda emitted, group: group)


def _permute(seed: int):

  def permute(index, block):
    order = tf.random.experimental.stateless_shuffle(
        tf.range(_size(block)), seed=tf.stack([tf.constant(seed, tf.int64), index]))
    return tf.nest.map_structure(lambda t: tf.gather(t, order), block)

  return permute


def mix_schedule(block_size: int, weights: Sequence[float], granularity: int,
                 seed: int) -> np.ndarray:
  """[SCHEDULE_BLOCKS, datasets] units each dataset gives each block.

  Each block's `block_size` units are chunks of `granularity` units (the last one possibly
  shorter), each chunk's dataset drawn by `weights`.
  """
  rng = np.random.default_rng(seed)
  p = np.asarray(weights, np.float64) / np.sum(weights)
  chunks, rest = divmod(block_size, granularity)
  counts = rng.multinomial(chunks, p, size=SCHEDULE_BLOCKS) * granularity
  if rest:
    counts[np.arange(SCHEDULE_BLOCKS), rng.choice(len(p), size=SCHEDULE_BLOCKS, p=p)] += rest
  return counts.astype(np.int64)


def _empty(spec: Any) -> Any:
  return tf.nest.map_structure(
      lambda s: tf.zeros([0] + [d or 0 for d in s.shape.as_list()[1:]], s.dtype), spec)


def _mix_blocks(unit_streams: Sequence[tf.data.Dataset], schedule: np.ndarray,
                exhaustion: Exhaustion, permute_seed: Optional[int]) -> tf.data.Dataset:
  """Blocks of units: each dataset's scheduled piece, concatenated and (seeded) permuted.

  STOP: the block in which a dataset runs out is cut where its piece ends (the others' pieces pro
  rata) and is the last. DROP: an exhausted dataset gives empty pieces, so the others keep their
  relative weights; the stream ends when all gave nothing.
  """
  pieces = [u.rebatch(schedule[:, i]) for i, u in enumerate(unit_streams)]
  drop = exhaustion is Exhaustion.DROP
  if drop:  # (piece, exhausted): after its last piece, a dataset gives empty ones.
    pieces = [tf.data.Dataset.zip((p, tf.data.Dataset.from_tensors(False).repeat())).concatenate(
        tf.data.Dataset.from_tensors((_empty(p.element_spec), True)).repeat()) for p in pieces]
  zipped = tf.data.Dataset.zip(tuple(pieces))
  if drop:
    zipped = zipped.take_while(lambda *parts: tf.logical_not(tf.reduce_all([e for _, e in parts])))
  wanted_per_block = tf.constant(schedule)

  def block(index, parts):
    if drop:
      parts = [p for p, _ in parts]
    if exhaustion is Exhaustion.STOP:
      sizes = tf.stack([_size(p) for p in parts])
      wanted = tf.gather(wanted_per_block, index % len(schedule))
      ratios = tf.cast(sizes, tf.float64) / tf.cast(tf.maximum(wanted, 1), tf.float64)
      fraction = tf.reduce_min(tf.where(wanted > 0, ratios, 1.0))
      keep = tf.minimum(sizes, tf.cast(tf.math.ceil(fraction * tf.cast(wanted, tf.float64)),
                                       tf.int64))
      parts = [tf.nest.map_structure(lambda t, k=keep[i]: t[:k], p) for i, p in enumerate(parts)]
    units = parts[0] if len(parts) == 1 else tf.nest.map_structure(
        lambda *t: tf.concat(t, 0), *parts)
    return units if permute_seed is None else _permute(permute_seed)(index, units)

  return zipped.enumerate().map(block, num_parallel_calls=tf.data.AUTOTUNE)


def stream(dataset_refs: Sequence[DatasetRef], *,
           unit: units_lib.Unit = units_lib.StepUnit(),
           batch_size: int = 256,
           shuffle: Optional[Shuffle] = Shuffle(),
           seed: Optional[int] = None,
           mix: Mix = Mix(),
           projection: reading.Projection = reading.Projection.NONE,
           num_shards: int = 1,
           shard_index: int = 0,
           split: Optional[str] = None,
           env_cfg: Optional[Mapping[str, Any]] = None,
           catalog: Optional[catalog_lib.Catalog] = None,
           step_fields: Optional[Sequence[str]] = None,
           drop_remainder: bool = True) -> tf.data.Dataset:
  """Batches of `unit`s from the datasets, mixed by `mix` (see the module docstring).

  `dataset_refs` are il-representations dataset_configs entries (resolved by `catalog` against
  `env_cfg`), TFDS names, dataset directories or builders. `split=None` reads every split.
  `shuffle=None` keeps file order. With `num_shards` > 1 this host reads episodes
  [shard_index * E / num_shards, (shard_index + 1) * E / num_shards) of each dataset; under
  Exhaustion.STOP/DROP each dataset's shards are cut to the same number of units (counted from the
  episode lengths, one extra pass over `is_first`), so every host gets the same number of batches.
  `step_fields` are the step fields kept (default: rlds_suite.core.fields.CORE_STEP_FIELDS).
  """
  if not 0 <= shard_index < num_shards:
    raise ValueError(f'shard_index must be in [0, {num_shards}), got {shard_index}')
  resolved = resolve_datasets(dataset_refs, env_cfg=env_cfg, catalog=catalog, split=split)
  weights = mix.weights
  if weights is not None and (len(weights) != len(resolved) or min(weights) < 0 or sum(weights) <= 0):
    raise ValueError(f'need {len(resolved)} non-negative weights, got {weights}')
  seed = int(np.random.default_rng().integers(2**31)) if seed is None else seed
  keep = tuple(step_fields or fields.CORE_STEP_FIELDS)
  repeat = mix.exhaustion is Exhaustion.REPEAT

  readers, epoch_sizes, limits = [], [], []
  for index, dataset in enumerate(resolved):
    total = sum(count for _, count in dataset.splits)
    bounds = shard_bounds(total, num_shards)
    start, stop = int(bounds[shard_index]), int(bounds[shard_index + 1])
    if stop <= start:
      raise errors.EmptyInputError(
          f'shard {shard_index} of {num_shards} has no episodes ({total} in all)', path=dataset.name)
    readers.append(reading.read_steps(
        dataset.builder, _instruction(dataset.splits, start, stop), shuffle_files=shuffle is not None,
        seed=_seed(seed, index, shard_index, 0), keep=keep))
    epoch_sizes.append(stop - start)
    limits.append(None)
    if num_shards > 1 and not repeat:
      split_all = _instruction(dataset.splits, 0, total)
      counts = unit.count(reading.episode_lengths(dataset.builder, split_all))
      limits[-1] = int(min(counts[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:])))

  specs = [reading.step_spec(r) for r in readers]
  projections = reading.plan_projection(specs, [d.name for d in resolved], projection)

  unit_streams = []
  for index, (episodes, project) in enumerate(zip(readers, projections)):
    if shuffle is not None:
      episodes = episodes.shuffle(shuffle.episodes, seed=_seed(seed, index, shard_index, 1),
                                  reshuffle_each_iteration=True)
    if repeat:
      episodes = episodes.repeat()
    epoch_size = epoch_sizes[index]

    def to_units(position, steps, index=index, project=project, epoch_size=epoch_size):
      cut = unit.from_steps(project(steps))
      count = _size(cut)
      return {**cut,
              DATASET_INDEX: tf.fill([count], tf.constant(index, tf.int32)),
              EPOCH: tf.fill([count], position // epoch_size)}

    units = episodes.enumerate().map(to_units, num_parallel_calls=tf.data.AUTOTUNE)
    if limits[index] is not None:
      units = _truncate(units, limits[index])
    unit_streams.append(units)

  weights = weights if weights is not None else [1.0] * len(unit_streams)
  block_size = shuffle.units if shuffle is not None else batch_size
  # The same schedule on every shard: equal unit counts then give equal batch counts.
  schedule = mix_schedule(block_size, weights, mix.granularity, _seed(seed, 3))
  blocks = _mix_blocks(unit_streams, schedule, mix.exhaustion,
                       None if shuffle is None else _seed(seed, shard_index, 2))
  batches = blocks.rebatch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
  return batches.with_options(_options())


def _options() -> tf.data.Options:
  """Map fusion joins consecutive per-episode maps (decoding, taking the steps) into one: a
  tf.data element hand-off less per episode, ~10% more batches/s in a graph loop on 2 cores."""
  options = tf.data.Options()
  options.experimental_optimization.map_fusion = True
  return options


def as_numpy(dataset: tf.data.Dataset) -> Iterator[Any]:
  """Batches as nested numpy arrays, for JAX or PyTorch training loops.

      for batch in as_numpy(stream([{}], unit=Transitions(), batch_size=256, seed=0)):
        loss = train_step(params, batch['observation'], batch['action'])  # np.ndarray [256, ...]
  """
  return iter(tfds.as_numpy(dataset))


def load_dict_dataset(dataset_configs: Sequence[DatasetRef], *,
                      env_cfg: Optional[Mapping[str, Any]] = None,
                      catalog: Optional[catalog_lib.Catalog] = None,
                      split: Optional[str] = None) -> dict[str, Any]:
  """il-representations' in-memory dict {obs, next_obs, acts, dones, rews} of all datasets.

  Episodes in file order, datasets one after the other; refused (SpecMismatchError) when the
  datasets' step specs differ.
  """
  resolved = resolve_datasets(dataset_configs, env_cfg=env_cfg, catalog=catalog, split=split)
  readers = [reading.read_steps(d.builder, _instruction(d.splits, 0, sum(c for _, c in d.splits)))
             for d in resolved]
  reading.plan_projection([reading.step_spec(r) for r in readers], [d.name for d in resolved])
  episodes = (({fields.STEPS: steps} for steps in tfds.as_numpy(r)) for r in readers)
  return episodes_lib.to_il_representations_dict(e for group in episodes for e in group)
