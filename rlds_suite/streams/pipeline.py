"""One stream of shuffled blocks of units from one or several datasets, cut into batches at the exit.

Per dataset, one host reads its shard of episodes and:
  1. reads files in a seeded shuffled order (interleaved), serialized episodes as they are stored,
     a batch of a file's episodes per tf.data element (`reading.serialized_batches`);
  2. shuffles whole serialized episodes: where a parse group holds at least `Shuffle.episodes`
     episodes (short episodes), the group's episodes are permuted, seeded by pass and group (one
     pass's episodes per group, from every open file); otherwise (long episodes, where per-episode
     tf.data costs are small beside theirs) in a buffer of `Shuffle.episodes` episodes;
  3. parses and decodes them a group at a time (`reading.EpisodeParser`,
     up to `budget.GROUP_STEPS` steps per `tf.io.parse_example`) and cuts the group's episodes into
     units ([U, ...], `units.Unit`), tagging them with the epoch of this dataset they come from
     (the dataset index is tagged per block, from the block's permutation);
  4. hands out consecutive units (crossing episode boundaries; units themselves never do) as its
     piece of each block.
With `cache_dir`, steps 1-3 read decoded episodes from the dataset's cache (`streams.cache`) in a
fully shuffled episode order instead. For units that only select rows (steps, transitions, pairs)
of cached datasets of one spec, no tf.data pipeline is built per dataset: each pass takes a
dataset's units a whole episode at a time in a seeded random episode order, their row indices
computed per block from per-episode row starts, and block b is drawn in numpy from b alone
(`streams.row_blocks`, with the same schedule, exhaustion and per-shard unit counts as below);
the exit gathers each block's values once from the memory maps (`cache.RowGather`).

A block holds `Shuffle.units` units (`batch_size` without shuffling), fewer when the memory budget
requires: dataset i gives c_i of them, the counts drawn per block by `Mix.weights` in chunks of
`Mix.granularity` units (a multinomial draw; a seeded schedule that repeats every `SCHEDULE_BLOCKS`
blocks, the same on every shard). The pieces are concatenated and the block is permuted with a
stateless seeded permutation (in the parallel block map): a block is one tf.data element, cut
into batches by the exit
(`streams.exits`: numpy or tf.data). Everything per step happens in vectorised ops on groups of
episodes and blocks: tf.data handles one element per group of episodes and per block, never one per
episode, batch or unit.

Shuffle semantics: episodes are permuted within parse groups of at least `Shuffle.episodes`
episodes, or, where groups are smaller, shuffled in a buffer of `Shuffle.episodes` serialized
episodes; the block holds `Shuffle.units` units. Within a block every order is equally likely,
so two consecutive elements of a batch are any two units of the block: from the same episode or
from episodes up to about `max(Shuffle.episodes, group) + Shuffle.units / (shortest episode)` read
positions apart. Two units more than one block apart in the stream come from different blocks. Memory is bounded by the buffers, each
sized in bytes against `Shuffle.memory_budget` (`streams.budget`), never by the dataset size
(except a cache's per-episode tables: a few int64 per episode, never per unit or step).
Every random choice is seeded from `seed`, so a seed makes the whole stream reproducible;
`seed=None` draws one.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.core import episodes as episodes_lib
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.streams import budget
from rlds_suite.streams import cache as cache_lib
from rlds_suite.streams import catalog as catalog_lib
from rlds_suite.streams import exits
from rlds_suite.streams import reading
from rlds_suite.streams import row_blocks as row_blocks_lib
from rlds_suite.streams import row_order
from rlds_suite.streams import units as units_lib
from rlds_suite.tfds import datasets as datasets_lib

DATASET_INDEX = 'dataset_index'  # Which of the stream's datasets a unit comes from.
EPOCH = 'epoch'  # Which pass over that dataset (counted per dataset) a unit comes from.

SCHEDULE_BLOCKS = 4096  # The mix's composition schedule repeats after this many blocks.

DatasetRef = Union[Mapping[str, Any], str, os.PathLike, tfds.core.DatasetBuilder]


@dataclasses.dataclass(frozen=True)
class Shuffle:
  """Shuffle buffers: at most `episodes` episodes in the episode buffer and `units` units per
  block, both lowered to fit `memory_budget` bytes (default: streams.budget.default_memory_budget(),
  an eighth of the machine's memory). Sizes are chosen from the bytes of a unit and of an episode
  (streams.budget); `Stream.description` reports them.
  """
  episodes: int = 16
  units: int = 10_240  # 40 batches of 256.
  memory_budget: Optional[int] = None

  def __post_init__(self):
    if self.episodes < 1 or self.units < 1:
      raise ValueError(f'buffer sizes must be >= 1, got {self}')
    if self.memory_budget is not None and self.memory_budget <= 0:
      raise ValueError(f'memory_budget must be > 0 bytes, got {self.memory_budget}')


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
                     split: Optional[str] = None,
                     data_dir: Optional[str] = None) -> list[_Dataset]:
  """dataset_configs entries (dicts), TFDS names, directories or builders -> prepared builders
  (TFDS names are looked up in `data_dir`, TFDS's default when None)."""
  catalog = catalog or catalog_lib.CATALOG
  resolved = []
  for ref in dataset_refs:
    if isinstance(ref, Mapping):
      entry = catalog.resolve(ref, env_cfg)
      name, source = f'{dict(ref)!r} ({entry.source})', entry.source
    else:
      name = source = ref if isinstance(ref, tfds.core.DatasetBuilder) else os.fspath(ref)
      name = getattr(name, 'name', name)
    builder = datasets_lib.load_builder(source, data_dir=data_dir)
    names = [split] if split else sorted(builder.info.splits.keys())
    datasets_lib.check_shards(builder, [n for n in names if n in builder.info.splits])
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


def _permuted(seed: Optional[int], compiled: bool):
  """Block index, block, [datasets] units each dataset gave it (its pieces, in dataset order) ->
  the block's units in a seeded random order (uniform over all orders, seeded per block;
  unchanged without shuffling; `compiled`: taken by XLA's gather, streams.row_order), tagged with
  DATASET_INDEX: computed from the order and the piece sizes, one search per unit, where a
  gathered tag costs as much as any other field.

  Measured and not kept (issue 21): the numpy exit reading blocks unpermuted and taking every
  field itself (np.take, ~13 ns a CartPole step in a perf profile against tf.gather's ~45; the
  order drawn here or by numpy's Generator) left the CPU a step unchanged (cartpole_like, best of
  5 runs in 3 processes each: 177-219 vs 172-200 ns; load 4-11): the thread that then reads, takes
  and cuts each block ran 41% of the process's CPU (take, draw, Python), serially. Measured again
  paired (6 rounds, load 1.7-2.6): 0.60-1.21x, the consumer's thread at 60-68 ns a step against
  33-39 (np.take of a block made on the other core: ~28 ns a step, not the ~8 of a warm one)."""

  def permute(index, block, sizes):
    order = tf.range(tf.reduce_sum(sizes))
    if seed is not None:
      order = tf.random.experimental.stateless_shuffle(
          order, seed=tf.stack([tf.constant(seed, tf.int64), index]))
      block = row_order.take_rows(block, order, compiled)
    if sizes.shape[0] == 1:  # One dataset: no search.
      dataset = tf.zeros_like(order, tf.int32)
    else:
      dataset = tf.searchsorted(tf.cumsum(sizes), order, side='right', out_type=tf.int32)
    return {**block, DATASET_INDEX: dataset}

  return permute


def _mix_blocks(unit_streams: Sequence[tf.data.Dataset], schedule: np.ndarray,
                exhaustion: Exhaustion, permute_seed: Optional[int],
                compiled: bool) -> tf.data.Dataset:
  """Permuted blocks of units: each dataset's scheduled piece, concatenated, then permuted (in
  the parallel map, off the consumer's thread; `compiled`: by XLA's gather, `_permuted`).

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
  permute = _permuted(permute_seed, compiled)

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
    return permute(index, units, tf.stack([_size(p) for p in parts]))

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
           drop_remainder: bool = True,
           cache_dir: Optional[Union[str, os.PathLike]] = None,
           data_dir: Optional[Union[str, os.PathLike]] = None) -> exits.Stream:
  """Batches of `unit`s from the datasets, mixed by `mix` (see the module docstring).

  `dataset_refs` are il-representations dataset_configs entries (resolved by `catalog` against
  `env_cfg`), TFDS names, dataset directories or builders. `split=None` reads every split.
  `shuffle=None` keeps file order. With `num_shards` > 1 this host reads episodes
  [shard_index * E / num_shards, (shard_index + 1) * E / num_shards) of each dataset; under
  Exhaustion.STOP/DROP each dataset's shards are cut to the same number of units (counted from the
  episode lengths, one extra pass over `is_first`), so every host gets the same number of batches.
  `step_fields` are the step fields kept (default: rlds_suite.core.fields.CORE_STEP_FIELDS).
  `cache_dir`: decoded steps are cached there (streams.cache) and read back on every epoch.
  `data_dir`: where TFDS names are looked up (TFDS's default data_dir when None).
  """
  if not 0 <= shard_index < num_shards:
    raise ValueError(f'shard_index must be in [0, {num_shards}), got {shard_index}')
  if batch_size < 1:
    raise ValueError(f'batch_size must be >= 1, got {batch_size}')
  resolved = resolve_datasets(dataset_refs, env_cfg=env_cfg, catalog=catalog, split=split,
                              data_dir=None if data_dir is None else os.fspath(data_dir))
  weights = mix.weights
  if weights is not None and (len(weights) != len(resolved) or min(weights) < 0 or sum(weights) <= 0):
    raise ValueError(f'need {len(resolved)} non-negative weights, got {weights}')
  seed = int(np.random.default_rng().integers(2**31)) if seed is None else seed
  keep = tuple(step_fields or fields.CORE_STEP_FIELDS)
  repeat = mix.exhaustion is Exhaustion.REPEAT

  sources = []
  for index, dataset in enumerate(resolved):
    total = sum(count for _, count in dataset.splits)
    bounds = shard_bounds(total, num_shards)
    start, stop = int(bounds[shard_index]), int(bounds[shard_index + 1])
    if stop <= start:
      raise errors.EmptyInputError(
          f'shard {shard_index} of {num_shards} has no episodes ({total} in all)', path=dataset.name)
    instruction = _instruction(dataset.splits, start, stop)
    parser = reading.EpisodeParser(dataset.builder, keep)
    cache = None if cache_dir is None else cache_lib.open_cache(
        os.fspath(cache_dir), dataset.name, dataset.builder, instruction, parser)
    limit = None
    if num_shards > 1 and not repeat:
      counts = unit.count(reading.episode_lengths(dataset.builder,
                                                  _instruction(dataset.splits, 0, total)))
      limit = int(min(counts[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:])))
    sources.append(_Source(dataset, parser, reading.split_files(dataset.builder, instruction),
                           cache, stop - start, limit))

  flat_specs = [nested.flatten_paths(s.parser.spec) for s in sources]
  projections = reading.plan_projection(flat_specs, [d.name for d in resolved], projection)
  # Cached datasets of one spec, cut into units that select rows: units of row indices, whose
  # values are gathered once, at the exit.
  gather = None
  if cache_dir is not None and unit.SELECTS_ROWS and all(f == flat_specs[0] for f in flat_specs):
    gather = cache_lib.RowGather([s.cache for s in sources],
                                 cache_lib.unit_columns(unit, flat_specs[0]), DATASET_INDEX)
  unit_specs = [_unit_spec(unit, s.parser.spec, project) for s, project in zip(sources, projections)]
  unit_bytes = max(budget.row_bytes(spec) for spec in unit_specs)
  step_costs = [budget.row_bytes(nested.flatten_paths(s.parser.spec)) + unit_bytes
                for s in sources]
  episode_stats = [s.episode_stats() for s in sources]
  shuffle_config = shuffle or Shuffle(units=batch_size)
  sizes = budget.choose(
      memory_budget=shuffle_config.memory_budget, max_episodes=shuffle_config.episodes,
      max_block_units=shuffle_config.units if shuffle is not None else batch_size,
      batch_size=batch_size, unit_bytes=unit_bytes,
      episode_bytes=[serialized for serialized, _ in episode_stats],
      episode_cost=[steps * cost for (_, steps), cost in zip(episode_stats, step_costs)],
      episode_steps=[steps for _, steps in episode_stats],
      file_buffer_bytes=reading.READ_CYCLE_LENGTH * reading.READ_BUFFER_BYTES)

  weights = weights if weights is not None else [1.0] * len(sources)
  # The same schedule on every shard: equal unit counts then give equal batch counts.
  schedule = mix_schedule(sizes.block_units, weights, mix.granularity, _seed(seed, 3))
  permute_seed = None if shuffle is None else _seed(seed, shard_index, 2)
  names = tuple(d.name for d in resolved)
  files = tuple(tuple(f.filename for f in s.files) for s in sources)
  options = _options(sizes.memory_budget, cache_dir is not None)
  if gather is not None:
    row_blocks = _row_blocks(sources, projections, unit, schedule, mix.exhaustion,
                             [_seed(seed, i, shard_index, 1) for i in range(len(sources))],
                             permute_seed, shuffle is not None)
    spec = {**gather.spec, DATASET_INDEX: tf.TensorSpec([], tf.int32),
            EPOCH: tf.TensorSpec([], tf.int64)}  # One unit's values.
    blocks = row_blocks.dataset(gather, spec).prefetch(1).with_options(options)
    return exits.Stream(blocks, batch_size, drop_remainder, sizes, names, files,
                        numpy_blocks=lambda: row_blocks.numpy_blocks(gather))

  unit_streams = []
  for index, (source, project, dataset_sizes) in enumerate(
      zip(sources, projections, sizes.datasets)):
    groups = source.groups(shuffle is not None, repeat, dataset_sizes,
                           seed=lambda stage, i=index: _seed(seed, i, shard_index, stage))

    def to_units(positions, steps, row_splits, project=project,
                 epoch_size=source.epoch_size):
      cut, _ = unit.from_episodes(project(steps), row_splits)
      return {**cut, EPOCH: units_lib.tag_epochs(cut, positions // epoch_size,
                                                 lambda: unit.from_episodes(project(steps),
                                                                            row_splits)[1])}

    units = groups.map(to_units, num_parallel_calls=budget.PARSE_PARALLELISM, deterministic=True)
    if source.limit is not None:
      units = _truncate(units, source.limit)
    unit_streams.append(units)

  compiled = permute_seed is not None and row_order.worth_compiling(  # No permutation, no XLA.
      unit_bytes, sizes.memory_budget - sizes.estimated_bytes())
  blocks = _mix_blocks(unit_streams, schedule, mix.exhaustion, permute_seed, compiled)
  blocks = blocks.prefetch(1).with_options(options)
  return exits.Stream(blocks, batch_size, drop_remainder, sizes, names, files)


def _row_blocks(sources: Sequence['_Source'], projections, unit: units_lib.Unit,
                schedule: np.ndarray, exhaustion: Exhaustion, epoch_seeds: Sequence[int],
                permute_seed: Optional[int], shuffle: bool) -> row_blocks_lib.RowBlocks:
  """Blocks of row-index units of cached datasets, drawn in numpy (streams.row_blocks)."""
  tables = [row_blocks_lib.UnitTable.cut(unit, project, list(s.cache.spec), s.cache.row_splits)
            for s, project in zip(sources, projections)]
  return row_blocks_lib.RowBlocks(
      tables, schedule, repeat=exhaustion is Exhaustion.REPEAT,
      stop=exhaustion is Exhaustion.STOP, limits=[s.limit for s in sources],
      epoch_seeds=epoch_seeds, permute_seed=permute_seed, shuffle=shuffle,
      dataset_index=DATASET_INDEX, epoch=EPOCH)


@dataclasses.dataclass(frozen=True)
class _Source:
  """One dataset's shard as groups of decoded episodes: from its files, or from its cache."""
  dataset: _Dataset
  parser: reading.EpisodeParser
  files: list
  cache: Optional[cache_lib.DecodedCache]
  epoch_size: int  # Episodes in this shard.
  limit: Optional[int]  # Units to take (equal counts on every shard), or all.

  def episode_stats(self) -> tuple[float, float]:
    """(mean serialized bytes, mean steps) of an episode, from the file sizes and one episode."""
    if self.cache is not None:
      return 0.0, float(self.cache.row_splits[-1]) / self.cache.num_episodes
    records = sum(f.examples_in_shard for f in self.files)
    serialized = sum(tf.io.gfile.stat(f.filename).length for f in self.files) / max(records, 1)
    first = reading.serialized_episodes(self.files[:1]).take(1)
    lengths = reading.EpisodeParser(self.dataset.builder, (fields.IS_FIRST,))
    sample = next(reading.numpy_groups(first.batch(1).map(lambda s: (s, lengths(s)[1])),
                                       [self.files[0].filename], self.dataset.name))
    steps_per_byte = float(sample[1][-1]) / max(len(sample[0][0]), 1)
    return serialized, serialized * steps_per_byte

  def groups(self, shuffle: bool, repeat: bool, sizes: budget.DatasetSizes,
             seed) -> tf.data.Dataset:
    """(positions [k] in the stream of episodes, steps [N, ...], row splits [k + 1]) of groups
    of episodes, shuffled as the module docstring says."""
    if self.cache is not None:  # Any order is as cheap as any other: all episodes shuffled.
      episodes = tf.data.Dataset.range(self.cache.num_episodes)
      if shuffle:
        episodes = episodes.shuffle(self.cache.num_episodes, seed=seed(1),
                                    reshuffle_each_iteration=True)
      read = self.cache.read_group
    elif sizes.group_episodes >= sizes.episodes or not shuffle:
      return _file_groups(self.files, self.parser, shuffle and not
                          self.dataset.builder.info.disable_shuffling, shuffle, repeat,
                          sizes.group_episodes, self.epoch_size, seed)
    else:
      shuffle_files = shuffle and not self.dataset.builder.info.disable_shuffling
      episodes = reading.serialized_episodes(self.files, shuffle_files=shuffle_files, seed=seed(0))
      episodes = episodes.shuffle(sizes.episodes, seed=seed(1), reshuffle_each_iteration=True)
      read = self.parser
    if repeat:
      episodes = episodes.repeat()
    return episodes.enumerate().batch(sizes.group_episodes).map(
        lambda positions, group: (positions, *read(group)))


def _file_groups(files: Sequence[tfds.core.FileInstruction], parser: reading.EpisodeParser,
                 shuffle_files: bool, shuffle: bool, repeat: bool, group: int, epoch_size: int,
                 seed) -> tf.data.Dataset:
  """`_Source.groups` read from the files a batch of episodes per tf.data element, never one
  episode: each open file gives a batch in turn (group / open files episodes), rebatched into
  parse groups of one pass whose episodes are permuted (seeded by pass and group) when shuffling."""
  cycle = min(reading.READ_CYCLE_LENGTH, len(files)) if shuffle_files else 1
  batches = reading.serialized_batches(files, batch_episodes=-(-group // cycle),
                                       shuffle_files=shuffle_files, seed=seed(0))
  groups = batches.rebatch(group).enumerate()  # Full groups but for each pass's last.
  if repeat:
    groups = groups.repeat()

  def count_passes(epoch, indexed):  # A pass's first group starts the next epoch.
    epoch += tf.cast(tf.equal(indexed[0], 0), tf.int64)
    return epoch, (epoch, *indexed)

  groups = groups.scan(tf.constant(-1, tf.int64), count_passes)
  permute_seed = tf.constant(seed(1), tf.int64)

  def parse(epoch, index, serialized):
    positions = epoch * epoch_size + index * group + tf.range(tf.size(serialized, out_type=tf.int64))
    if shuffle:
      order = tf.random.experimental.stateless_shuffle(
          tf.range(tf.size(serialized)), seed=tf.stack([permute_seed, epoch * (1 << 32) + index]))
      serialized, positions = tf.gather(serialized, order), tf.gather(positions, order)
    return (positions, *parser(serialized))

  return groups.map(parse)


def _unit_spec(unit: units_lib.Unit, step_spec: Mapping[str, Any],
               project) -> list[tf.TensorSpec]:
  """Specs of one unit (without its leading axis) of `unit` cut from projected steps."""
  rows = tf.nest.map_structure(lambda s: tf.TensorSpec([None, *s.shape], s.dtype), step_spec)
  traced = tf.function(lambda steps, splits: unit.from_episodes(project(steps), splits)[0])
  outputs = traced.get_concrete_function(rows, tf.TensorSpec([None], tf.int64)).structured_outputs
  extra = [tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.int64)]  # DATASET_INDEX, EPOCH.
  return [tf.TensorSpec(t.shape[1:], t.dtype) for t in tf.nest.flatten(outputs)] + extra


def _options(memory_budget: int, external_state: bool) -> tf.data.Options:
  """Map fusion joins consecutive per-group maps (parsing, cutting units) into one hand-off.
  tf.data's own buffers are not grown past the budget (no injected prefetches, autotune's RAM
  budget); a cache's reads carry no state that a checkpoint must save. tf.distribute does not
  auto-shard it: a stream shards itself (`num_shards`, `shard_index`), and the auto-shard rewrite
  dropped the exit's rebatch (a MirroredStrategy, even of one device, got whole blocks where the
  element spec said batches)."""
  options = tf.data.Options()
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
  options.experimental_optimization.map_fusion = True
  options.experimental_optimization.inject_prefetch = False
  options.autotune.ram_budget = int(memory_budget)
  if external_state:
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
  return options


def load_dict_dataset(dataset_configs: Sequence[DatasetRef], *,
                      env_cfg: Optional[Mapping[str, Any]] = None,
                      catalog: Optional[catalog_lib.Catalog] = None,
                      split: Optional[str] = None) -> dict[str, Any]:
  """il-representations' in-memory dict {obs, next_obs, acts, dones, rews} of all datasets.

  Episodes in file order, datasets one after the other; refused (SpecMismatchError) when the
  datasets' step specs differ.
  """
  resolved = resolve_datasets(dataset_configs, env_cfg=env_cfg, catalog=catalog, split=split)
  instructions = [_instruction(d.splits, 0, sum(c for _, c in d.splits)) for d in resolved]
  readers = [reading.read_steps(d.builder, i) for d, i in zip(resolved, instructions)]
  reading.plan_projection([reading.step_spec(r) for r in readers], [d.name for d in resolved])
  episodes = (({fields.STEPS: steps} for steps in reading.numpy_groups(
      r, [f.filename for f in reading.split_files(d.builder, i)], d.name))
              for r, d, i in zip(readers, resolved, instructions))
  return episodes_lib.to_il_representations_dict(e for group in episodes for e in group)
