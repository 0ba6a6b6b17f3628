"""Episodes stored one tf.Example per episode in GZIP TFRecord shards (RL Unplugged), as numpy.

The parse specs are the ones published with TFDS's rlu_atari and rlu_control_suite builders
(`tensorflow_datasets/rl_unplugged/`), declared for `shard_reader.parse_example`: the shards are
read without TensorFlow (`tfrecord_files`, both CRCs checked, ISA-L inflating), one episode at a
time. Bad records raise typed errors naming the shard.
"""

from __future__ import annotations

import pathlib
import struct
from typing import Iterator, Mapping, Sequence

import numpy as np

import rlds_suite
from rlds_suite.core import errors
from rlds_suite.tfds import shard_reader
from rlds_suite.tfds import tfrecord_files

_Feature = shard_reader.ParseFeature


def _sequence(shape: Sequence[int] = (), dtype: str = 'float32') -> shard_reader.ParseFeature:
  return _Feature(dtype, tuple(shape), sequence=True)


def atari_spec() -> dict[str, shard_reader.ParseFeature]:
  return {
      'checkpoint_idx': _Feature('int64'),
      'episode_idx': _Feature('int64'),
      'episode_return': _Feature('float32'),
      'clipped_episode_return': _Feature('float32'),
      'observations': _sequence(dtype='bytes'),
      'actions': _sequence(dtype='int64'),
      'unclipped_rewards': _sequence(),
      'clipped_rewards': _sequence(),
      'discounts': _sequence(),
  }


def control_suite_spec(observation_sizes: Mapping[str, int],
                       action_size: int) -> dict[str, shard_reader.ParseFeature]:
  return {
      **{f'observation/{k}': _sequence([v]) for k, v in observation_sizes.items()},
      'action': _sequence([action_size]),
      'discount': _sequence(),
      'reward': _sequence(),
      'step_type': _sequence(),
      'episode_id': _Feature('int64'),
      'timestamp': _Feature('int64'),
  }


def shard_paths(root: errors.PathLike, names: Sequence[str]) -> list[pathlib.Path]:
  """`names` below `root`, all of which must exist (SchemaError naming the first missing one)."""
  paths = [pathlib.Path(root) / name for name in names]
  for path in paths:
    if not path.is_file():
      raise errors.SchemaError(f'shard missing ({len(paths)} expected)', path=path)
  return paths


def read_examples(path: errors.PathLike,
                  spec: Mapping[str, shard_reader.ParseFeature]) -> Iterator[dict[str, np.ndarray]]:
  """The parsed examples of one GZIP TFRecord shard, in file order (one held at a time)."""
  for index, record in enumerate(tfrecord_files.read_records(path, tfrecord_files.GZIP)):
    try:
      parsed = shard_reader.parse_example(record, spec)
    except (ValueError, IndexError, struct.error) as e:
      raise errors.SchemaError(f'record {index} does not match the parse spec: {e}',
                               path=path) from None
    yield parsed


def decode_frames(pngs: Sequence[bytes], shape: tuple[int, ...]) -> np.ndarray:
  """PNG frames -> (T, *shape) uint8 (CorruptFileError naming the frame if one is not such a PNG)."""
  try:
    return shard_reader.decode_pngs(pngs, tuple(shape))
  except ValueError as e:
    raise errors.CorruptFileError(str(e), field='observations') from None


# Builders import this module: if registering them was put off while it was imported, do it now.
rlds_suite.register_deferred_builders(__name__)
