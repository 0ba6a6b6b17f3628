"""Episodes stored one tf.Example per episode in GZIP TFRecord shards (RL Unplugged), as numpy.

The parse specs are the ones published with TFDS's rlu_atari and rlu_control_suite builders
(`tensorflow_datasets/rl_unplugged/`). Bad records raise typed errors naming the shard.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

import rlds_suite
from rlds_suite.core import errors


def _tf() -> Any:
  """TensorFlow, imported when an RL Unplugged shard is read (not when builders are registered)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf


def _sequence(shape: Sequence[int] = (), dtype: Any = None) -> Any:
  tf = _tf()
  return tf.io.FixedLenSequenceFeature(list(shape), dtype=dtype or tf.float32, allow_missing=True)


def atari_spec() -> dict[str, Any]:
  tf = _tf()
  return {
      'checkpoint_idx': tf.io.FixedLenFeature([], tf.int64),
      'episode_idx': tf.io.FixedLenFeature([], tf.int64),
      'episode_return': tf.io.FixedLenFeature([], tf.float32),
      'clipped_episode_return': tf.io.FixedLenFeature([], tf.float32),
      'observations': _sequence(dtype=tf.string),
      'actions': _sequence(dtype=tf.int64),
      'unclipped_rewards': _sequence(),
      'clipped_rewards': _sequence(),
      'discounts': _sequence(),
  }


def control_suite_spec(observation_sizes: Mapping[str, int], action_size: int) -> dict[str, Any]:
  tf = _tf()
  return {
      **{f'observation/{k}': _sequence([v]) for k, v in observation_sizes.items()},
      'action': _sequence([action_size]),
      'discount': _sequence(),
      'reward': _sequence(),
      'step_type': _sequence(),
      'episode_id': tf.io.FixedLenFeature([], tf.int64),
      'timestamp': tf.io.FixedLenFeature([], tf.int64),
  }


def shard_paths(root: errors.PathLike, names: Sequence[str]) -> list[pathlib.Path]:
  """`names` below `root`, all of which must exist (SchemaError naming the first missing one)."""
  paths = [pathlib.Path(root) / name for name in names]
  for path in paths:
    if not path.is_file():
      raise errors.SchemaError(f'shard missing ({len(paths)} expected)', path=path)
  return paths


def read_examples(path: errors.PathLike, spec: Mapping[str, Any]) -> Iterator[dict[str, np.ndarray]]:
  """The parsed examples of one GZIP TFRecord shard, in file order."""
  tf = _tf()
  path = os.fspath(path)
  records = tf.data.TFRecordDataset(path, compression_type='GZIP')
  index = 0
  try:
    for record in records:
      try:
        parsed = tf.io.parse_single_example(record, spec)
      except (tf.errors.InvalidArgumentError, ValueError) as e:
        raise errors.SchemaError(f'record {index} does not match the parse spec: '
                                 f'{str(e).splitlines()[0]}', path=path) from None
      yield {key: value.numpy() for key, value in parsed.items()}
      index += 1
  except tf.errors.DataLossError as e:
    raise errors.CorruptFileError(f'corrupt or truncated TFRecord after record {index}: '
                                  f'{str(e).splitlines()[0]}', path=path) from None
  except tf.errors.NotFoundError as e:
    raise errors.SchemaError('file is missing', path=path) from e


def decode_frames(pngs: Sequence[bytes]) -> np.ndarray:
  """PNG frames -> (T, H, W, C) uint8."""
  tf = _tf()
  return np.stack([tf.io.decode_png(png).numpy() for png in pngs])


# Builders import this module: if registering them was put off while it was imported, do it now.
rlds_suite.register_deferred_builders(__name__)
