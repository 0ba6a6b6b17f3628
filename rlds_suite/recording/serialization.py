"""RLDS episodes -> serialized tf.train.Example bytes, parsing to the same example as TFDS's own.

TFDS encodes a `Dataset` feature one step at a time in Python and then walks every value again to
look for ragged dimensions; for short episodes of small tensors that is the whole recording cost.
Here fixed-shape plain tensors are encoded as one stacked array per batch of episodes. Per-step
uint8/uint16 PNG `Image`s and ZLIB tensors are encoded by `compression` (ISA-L deflate, outside the
GIL; TFDS's own PNG encoder takes ~30x longer per Atari frame); both decode with TFDS's own
decoders to the same arrays. Other leaves that need per-element work (text, episode metadata) go
through their feature's `encode_example`. Leaves of one flat array or one list of bytes per key
become Features directly (`example_wire`); anything ragged (variable shapes inside steps) goes
through TFDS's serializer. tests/test_recording.py
checks that the result parses to the same example as TFDS's own serialization.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core import example_serializer
from tensorflow_datasets.core import utils as tfds_utils

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core.episodes import Episode, EpisodeBatch
from rlds_suite.tfds import compression
from rlds_suite.tfds import example_wire


def _is_stackable(feature: tfds.features.FeatureConnector) -> bool:
  """A fixed-shape leaf whose per-step encoding is `np.asarray(value, dtype)` (plain), or its raw
  bytes (BYTES, how `rlds_suite.tfds.features` stores float64 exactly)."""
  return (type(feature) in (tfds.features.Tensor, tfds.features.Scalar) and
          feature._encoding in (tfds.features.Encoding.NONE,  # pylint: disable=protected-access
                                tfds.features.Encoding.BYTES) and
          None not in feature.shape)


class EpisodeSerializer:
  """Serializes episodes for a fixed FeaturesDict {'steps': Dataset({...}), **metadata}."""

  def __init__(self, episode_features: tfds.features.FeaturesDict):
    self.features = episode_features
    self._steps = episode_features[fields.STEPS].feature
    self._flat_info = tfds_utils.flatten_nest_dict(episode_features.get_serialized_info())
    # Leaves that may become a Feature directly (not ragged), by flat key.
    self._maybe_direct = {key: not (info.sequence_rank > 1 or None in info.shape[info.sequence_rank:])
                          for key, info in self._flat_info.items()}
    self._keys = {key: example_wire.key_field(key) for key in self._flat_info}
    self._metadata_keys = frozenset(episode_features.keys()) - {fields.STEPS}
    # (key, list kind, packed payload length) -> the entry's bytes before the payload.
    self._prefixes: dict[tuple[bytes, int, int], bytes] = {}

  def serialize(self, episode: Episode) -> bytes:
    batch = EpisodeBatch(steps=episode.steps, starts=np.array([0, episode.num_steps]),
                         metadata=[episode.metadata])
    return self.serialize_batch(batch)[0]

  def serialize_batch(self, batch: EpisodeBatch) -> list[bytes]:
    """Each episode's serialized tf.train.Example; columns are encoded once for the batch."""
    for metadata in batch.metadata:
      if metadata.keys() != self._metadata_keys:
        raise errors.SchemaError(f'episode metadata keys {sorted(metadata)} do not match the '
                                 f'declared {sorted(self._metadata_keys)}')
    encoded = _flatten_nest_dict(
        {fields.STEPS: self._encode_steps(self._steps, batch.steps, fields.STEPS)})
    columns = {key: _Column.of(value, self._flat_info[key], self._prefixes)
                   if self._maybe_direct[key] else None for key, value in encoded.items()}
    starts = batch.starts
    serialized = []
    for index, metadata in enumerate(batch.metadata):
      start, end = int(starts[index]), int(starts[index + 1])
      entries, ragged = [], {}
      for key, value in metadata.items():
        value = _encode(self.features[key], value, key)
        column = (_Column.of(value, self._flat_info[key], self._prefixes)
                  if self._maybe_direct[key] else None)
        if column is None:
          ragged[key] = value
        else:
          entries.append(column.entry(self._keys[key], 0, None))
      for key, column in columns.items():
        if column is None:
          ragged[key] = encoded[key][start:end]
        else:
          entries.append(column.entry(self._keys[key], start, end))
      if ragged:
        # pylint: disable-next=protected-access
        example = example_serializer._dict_to_tf_example(
            ragged, {key: self._flat_info[key] for key in ragged})
        entries.append(example.features.SerializeToString())
      serialized.append(example_wire.example(b''.join(entries)))
    return serialized

  def _encode_steps(self, feature: Any, value: Any, path: str) -> Any:
    if isinstance(feature, tfds.features.FeaturesDict):
      if not isinstance(value, Mapping) or set(value) != set(feature.keys()):
        got = sorted(value) if isinstance(value, Mapping) else type(value).__name__
        raise errors.SchemaError(f'expected keys {sorted(feature.keys())}, got {got}', field=path)
      return {key: self._encode_steps(feature[key], value[key], f'{path}/{key}')
              for key in feature.keys()}
    if _is_stackable(feature):
      array = np.asarray(value)
      if array.shape[1:] != feature.shape:
        raise errors.SchemaError(f'expected rows of shape {feature.shape}, got {array.shape[1:]}',
                                 field=path)
      return array.astype(feature.np_dtype, copy=False)
    encoder = _row_encoder(feature)
    if encoder is not None:
      return [encoder(_checked_row(feature, row, path)) for row in value]
    return [_encode(feature, row, path) for row in value]


def row_encoded_paths(step_features: Mapping[str, Any], prefix: str = '') -> frozenset[str]:
  """'/'-joined paths of the step features encoded one step at a time here (PNG images, ZLIB
  tensors); their rows need not be stacked into one array."""
  paths = set()
  for key, feature in step_features.items():
    if isinstance(feature, (Mapping, tfds.features.FeaturesDict)):
      paths |= row_encoded_paths(feature, f'{prefix}{key}/')
    elif isinstance(feature, tfds.features.FeatureConnector) and _row_encoder(feature) is not None:
      paths.add(f'{prefix}{key}')
  return frozenset(paths)


def _row_encoder(feature: tfds.features.FeatureConnector) -> Optional[Callable[[np.ndarray], bytes]]:
  """This module's encoder for one step of `feature`, or None to use `feature.encode_example`."""
  # pylint: disable=protected-access
  if (type(feature) is tfds.features.Image and feature._encoding_format == 'png' and
      feature.np_dtype in (np.uint8, np.uint16)):
    return compression.png_bytes
  if (type(feature) is tfds.features.Tensor and feature._encoding == tfds.features.Encoding.ZLIB and
      None not in feature.shape):
    return compression.zlib_bytes
  return None


def _checked_row(feature: tfds.features.FeatureConnector, row: Any, path: str) -> np.ndarray:
  """`row` as a C-contiguous array of the feature's dtype and (possibly partly unknown) shape."""
  array = np.asarray(row)
  shape = tuple(feature.shape)
  if (array.dtype != feature.np_dtype or array.ndim != len(shape) or
      any(d is not None and d != n for d, n in zip(shape, array.shape))):
    raise errors.SchemaError(f'expected {np.dtype(feature.np_dtype).name}{list(shape)}, got '
                             f'{array.dtype.name}{list(array.shape)}', field=path)
  return np.ascontiguousarray(array)


def _encode(feature: tfds.features.FeatureConnector, value: Any, path: str) -> Any:
  try:
    return feature.encode_example(value)
  except Exception as e:  # pylint: disable=broad-except
    raise errors.SchemaError(f'value does not match feature {feature!r}: {e}', field=path) from e


class _Column:
  """A leaf's values for every row of a batch, ready to be cut into per-episode Features: float32
  bytes, packed varints, a list of bytes, or rows of raw bytes (BYTES-encoded tensors). `of`
  returns None for values that need TFDS's own serializer (ragged, uint64, anything else)."""

  def __init__(self, kind: int, payload: Any, row_offsets: Optional[np.ndarray],
               prefixes: dict[tuple[bytes, int, int], bytes], packed: bool = True):
    self._kind, self._payload, self._row_offsets = kind, payload, row_offsets
    self._packed = packed  # The payload is packed numbers (FloatList/Int64List), not list items.
    self._prefixes = prefixes  # Shared by a serializer's columns, across batches.

  @classmethod
  def of(cls, value: Any, info: Any,
         prefixes: dict[tuple[bytes, int, int], bytes]) -> Optional['_Column']:
    if (isinstance(value, np.ndarray) and value.dtype.kind in 'biuf' and
        np.dtype(info.np_dtype) == np.object_):  # A stacked BYTES-encoded tensor: raw rows.
      rows = value.reshape(len(value) if value.ndim else 1, -1)
      raw = rows.astype(rows.dtype.newbyteorder('<'), copy=False).view(np.uint8)
      header = np.frombuffer(example_wire.bytes_item_header(raw.shape[1]), np.uint8)
      items = np.concatenate([np.broadcast_to(header, (len(raw), len(header))), raw], axis=1)
      return cls(example_wire.BYTES_LIST, memoryview(items.tobytes()),
                 np.arange(len(items) + 1) * items.shape[1], prefixes, packed=False)
    if isinstance(value, np.ndarray) and value.dtype.kind in 'biuf' and value.dtype != np.uint64:
      per_row = int(np.prod(value.shape[1:], dtype=np.int64)) if value.ndim else 1
      rows = len(value) if value.ndim else 1
      if value.dtype.kind == 'f':
        payload = memoryview(value.astype('<f4', copy=False).reshape(-1).tobytes())
        return cls(example_wire.FLOAT_LIST, payload, np.arange(rows + 1) * (per_row * 4), prefixes)
      payload, offsets = example_wire.varints(value)
      return cls(example_wire.INT64_LIST, memoryview(payload.tobytes()),
                 offsets[np.arange(rows + 1) * per_row], prefixes)
    if isinstance(value, (list, bytes)) and np.dtype(info.np_dtype).kind in 'OSU':
      values = value if isinstance(value, list) else [value]
      if all(isinstance(v, bytes) for v in values):
        return cls(example_wire.BYTES_LIST, values, None, prefixes)
    return None

  def entry(self, key: bytes, start: int, end: Optional[int]) -> bytes:
    """The map entry for rows start:end (all rows when `end` is None)."""
    if self._row_offsets is None:  # A list of bytes.
      values = self._payload if end is None else self._payload[start:end]
      return example_wire.entry(key, self._kind, example_wire.bytes_list(values))
    payload = (self._payload if end is None else
               self._payload[self._row_offsets[start]:self._row_offsets[end]])
    prefix = self._prefixes.get((key, self._kind, len(payload)))
    if prefix is None:  # Episodes of one length share it.
      header = example_wire.packed_header(len(payload)) if self._packed else b''
      prefix = example_wire.entry_prefix(key, self._kind, len(header) + len(payload)) + header
      self._prefixes[key, self._kind, len(payload)] = prefix
    return prefix + payload


def _flatten_nest_dict(d: Mapping[str, Any]) -> dict[str, Any]:
  """tfds_utils.flatten_nest_dict (nested keys joined with '/', a list of dicts becomes lists per
  key), without its per-item bookkeeping; raises ValueError on colliding keys as it does."""
  flat = {}
  for k, v in d.items():
    if isinstance(v, dict):
      items = _flatten_nest_dict(v).items()
      items = [(f'{k}/{k2}', v2) for k2, v2 in items]
    elif isinstance(v, list) and v and isinstance(v[0], dict):
      items = [(f'{k}/{k2}', [v[i][k2] for i in range(len(v))]) for k2 in v[0]]
    else:
      items = [(k, v)]
    for key, value in items:
      if key in flat:
        raise ValueError(f'Try to overwrite existing key: {key}')
      flat[key] = value
  return flat
