"""Reading episodes as step tensors, and reconciling the step specs of several datasets.

TFDS returns each episode's steps as a nested tf.data.Dataset; flattening that costs one tf.data
element per step. We decode the steps of an episode at once instead ([T, ...] tensors): plain
tensors are already decoded by parsing, encoded ones (PNG images, ZLIB tensors) by TFDS's own
batch decoding.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.streams.reference_units import PADDING_MASK

# File reading, declared so that memory is bounded by constants, not by the dataset: with shuffled
# files at most READ_CYCLE_LENGTH files are open at once (interleaved sequentially, one episode
# from each in turn), each read through a READ_BUFFER_BYTES buffer. TFDS's defaults (8 MiB per
# file, blocks of 16 episodes per file buffered ahead, a parallel interleave opening files ahead)
# grow with the number of files up to about 32 x (8 MiB + 32 episodes). 1 MiB holds several episodes of state
# vectors and costs no measurable throughput on local disk.
READ_CYCLE_LENGTH = 16
READ_BUFFER_BYTES = 1 << 20


class StepsDecoder(tfds.decode.Decoder):
  """Decodes an episode's `steps` feature to {field: [T, ...] tensor}, keeping `keep` fields."""

  def __init__(self, keep: Optional[Sequence[str]] = None):
    super().__init__()
    self._keep = None if keep is None else tuple(keep)

  def decode_example(self, serialized_example):
    step_feature = self.feature.feature
    names = [k for k in step_feature.keys() if self._keep is None or k in self._keep]
    return {k: _decode_rows(step_feature[k], serialized_example[k]) for k in names}


def _decode_rows(feature: tfds.features.FeatureConnector, serialized: Any) -> Any:
  if isinstance(feature, tfds.features.FeaturesDict):
    return {k: _decode_rows(feature[k], serialized[k]) for k in feature.keys()}
  serialized_info, tensor_info = feature.get_serialized_info(), feature.get_tensor_info()
  plain = (type(feature) in (tfds.features.Tensor, tfds.features.Scalar) and
           serialized_info.shape == tensor_info.shape and
           tf.as_dtype(serialized_info.dtype) == tf.as_dtype(tensor_info.dtype))
  if plain:
    return serialized
  if _is_zlib_tensor(feature):  # Vectorised: TFDS's own batch decoding loops over steps.
    raw = tf.io.decode_raw(tf.io.decode_compressed(serialized, compression_type='ZLIB'),
                           tf.as_dtype(tensor_info.dtype))
    return tf.reshape(raw, [-1, *feature.shape])
  return feature.decode_batch_example(serialized)


def _is_zlib_tensor(feature: tfds.features.FeatureConnector) -> bool:
  return (type(feature) is tfds.features.Tensor and  # pylint: disable=unidiomatic-typecheck
          feature.to_json_content().encoding == 'zlib' and None not in feature.shape)


def read_steps(builder: tfds.core.DatasetBuilder, split: str, *, shuffle_files: bool = False,
               seed: Optional[int] = None,
               keep: Optional[Sequence[str]] = None) -> tf.data.Dataset:
  """Episodes of `split` as {field: [T, ...]} step tensors (episode metadata dropped).

  With `shuffle_files` the file order is shuffled (seeded, reshuffled each epoch) and files are
  interleaved; otherwise, and for datasets written in order (`disable_shuffling`), which TFDS
  refuses to read out of order, episodes come in file order.

  Files are read one at a time in order, or with `shuffle_files` READ_CYCLE_LENGTH at a time:
  file buffers take at most READ_CYCLE_LENGTH x READ_BUFFER_BYTES (16 MiB), whatever the number
  and size of files.
  """
  shuffle_files = shuffle_files and not builder.info.disable_shuffling
  read_config = tfds.ReadConfig(
      shuffle_seed=seed,
      shuffle_reshuffle_each_iteration=True,
      try_autocache=False,  # Memory must not grow with the dataset.
      # Under tf.data service dynamic sharding a worker reads only some files of a split.
      assert_cardinality=False,
      num_parallel_calls_for_decode=tf.data.AUTOTUNE,
      # One file at a time unless shuffled: file order (TFDS requires it for datasets written in
      # order, `episode_lengths` counts in it).
      interleave_cycle_length=READ_CYCLE_LENGTH if shuffle_files else 1,
      interleave_block_length=1,
      # Interleaving files, sequentially: a parallel interleave also opens (and buffers) up to as
      # many files ahead. Parsing and decoding stay parallel; one file is read ahead in parallel.
      num_parallel_calls_for_interleave_files=None if shuffle_files else tf.data.AUTOTUNE,
      override_buffer_size=READ_BUFFER_BYTES,
      # No prefetch between TFDS's decoding and the map below, so that map fusion can join them.
      skip_prefetch=True)
  episodes = builder.as_dataset(split=split, shuffle_files=shuffle_files, read_config=read_config,
                                decoders={fields.STEPS: StepsDecoder(keep)})
  return episodes.map(lambda episode: episode[fields.STEPS])


def episode_lengths(builder: tfds.core.DatasetBuilder, split: str) -> np.ndarray:
  """Number of steps of every episode of `split`, in file order (reads only `is_first`)."""
  steps = read_steps(builder, split, keep=(fields.IS_FIRST,))
  lengths = steps.map(lambda s: tf.shape(s[fields.IS_FIRST], out_type=tf.int64)[0])
  return np.fromiter(lengths.as_numpy_iterator(), dtype=np.int64)


# ---- Step specs across datasets ----------------------------------------------------------------

def step_spec(steps: tf.data.Dataset) -> dict[str, tf.TensorSpec]:
  """Path -> spec of one step's value, from a `read_steps` dataset."""
  return {path: tf.TensorSpec(spec.shape[1:], spec.dtype)
          for path, spec in nested.flatten_paths(steps.element_spec).items()}


def _describe(spec: Optional[tf.TensorSpec]) -> str:
  return 'missing' if spec is None else f'{spec.dtype.name}{spec.shape.as_list()}'


class Projection(enum.Enum):
  """How datasets with different step specs are made into one stream (declared, never guessed)."""
  NONE = 'none'  # Refuse any difference.
  COMMON_KEYS = 'common_keys'  # Keep the field paths every dataset has with the same spec.
  PAD = 'pad'  # Union of paths; zero-pad smaller shapes and missing paths, with PADDING_MASK.


def plan_projection(specs: Sequence[Mapping[str, tf.TensorSpec]], names: Sequence[str],
                    projection: Projection = Projection.NONE) -> list[Callable[[dict], dict]]:
  """One function per dataset mapping its step tensors onto the common spec.

  Raises SpecMismatchError naming each mismatching field path and the datasets' specs.
  """
  paths = sorted(set().union(*specs))
  differing = {p: [s.get(p) for s in specs] for p in paths
               if any(s.get(p) != specs[0].get(p) for s in specs)}
  if not differing:
    return [lambda steps: steps] * len(specs)

  def mismatch(problem: str, which: Mapping[str, list]) -> errors.SpecMismatchError:
    lines = [f'  {path}: ' + ', '.join(f'{name}: {_describe(spec)}' for name, spec in zip(names, row))
             for path, row in which.items()]
    return errors.SpecMismatchError(problem + '\n' + '\n'.join(lines), field=next(iter(which)))

  if projection is Projection.NONE:
    raise mismatch('datasets have different step specs; pass projection=Projection.COMMON_KEYS '
                   'or Projection.PAD to combine them', differing)
  if projection is Projection.COMMON_KEYS:
    kept = [p for p in paths if p not in differing]
    needed = [f for f in fields.CORE_STEP_FIELDS
              if not any(p == f or p.startswith(f + '/') for p in kept)]
    if needed:
      raise mismatch(f'no common spec is left for {needed} after dropping differing paths',
                     differing)
    return [_keep_paths(kept)] * len(specs)

  targets = {}
  for path, row in differing.items():
    present = [s for s in row if s is not None]
    if len({s.dtype for s in present}) > 1 or len({s.shape.rank for s in present}) > 1 or any(
        None in s.shape.as_list() for s in present):
      raise mismatch('padding needs one dtype, one rank and known shapes per field path',
                     {path: row})
    shape = np.max([s.shape.as_list() for s in present], axis=0).astype(int).tolist()
    targets[path] = tf.TensorSpec(shape, present[0].dtype)
  return [_pad_paths(targets, spec) for spec in specs]


def _keep_paths(kept: Sequence[str]) -> Callable[[dict], dict]:

  def project(steps):
    flat = nested.flatten_paths(steps)
    return nested.unflatten_paths({p: flat[p] for p in kept})

  return project


def _pad_paths(targets: Mapping[str, tf.TensorSpec],
               spec: Mapping[str, tf.TensorSpec]) -> Callable[[dict], dict]:

  def project(steps):
    flat = nested.flatten_paths(steps)
    num = tf.shape(flat[fields.IS_FIRST])[0]
    masks = {}
    for path, target in targets.items():
      shape = target.shape.as_list()
      if path in spec:
        value = flat[path]
        padding = [[0, 0]] + [[0, t - s] for t, s in zip(shape, spec[path].shape.as_list())]
        flat[path] = tf.pad(value, padding)
        masks[path] = tf.pad(tf.ones_like(value, dtype=tf.bool), padding)
      else:
        flat[path] = tf.zeros(tf.concat([[num], shape], 0), target.dtype)
        masks[path] = tf.zeros(tf.concat([[num], shape], 0), tf.bool)
    projected = nested.unflatten_paths(flat)
    projected[PADDING_MASK] = nested.unflatten_paths(masks)
    return projected

  return project
