"""RLDS episodes -> serialized tf.train.Example bytes, byte-identical to TFDS's own encoding.

TFDS encodes a `Dataset` feature one step at a time in Python; for fixed-shape plain tensors that
is the whole recording cost. Here those leaves are encoded as one stacked array per episode, and
only leaves that need per-element work (images, ZLIB tensors, text, variable shapes) go through
their feature's `encode_example`. tests/test_recording_serialization.py checks byte equality.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core import example_serializer

from rlds_suite import errors
from rlds_suite import fields
from rlds_suite.episodes import Episode


def _is_stackable(feature: tfds.features.FeatureConnector) -> bool:
  """A leaf whose per-step encoding is just `np.asarray(value, dtype)`."""
  return (type(feature) in (tfds.features.Tensor, tfds.features.Scalar) and
          feature._encoding == tfds.features.Encoding.NONE and  # pylint: disable=protected-access
          None not in feature.shape)


class EpisodeSerializer:
  """Serializes `Episode`s for a fixed FeaturesDict {'steps': Dataset({...}), **metadata}."""

  def __init__(self, episode_features: tfds.features.FeaturesDict):
    self.features = episode_features
    self._steps = episode_features[fields.STEPS].feature
    self._serializer = example_serializer.ExampleSerializer(episode_features.get_serialized_info())

  def serialize(self, episode: Episode) -> bytes:
    encoded = {}
    for key, value in episode.metadata.items():
      encoded[key] = _encode(self.features[key], value, key)
    encoded[fields.STEPS] = self._encode_steps(self._steps, episode.steps, fields.STEPS)
    missing = set(self.features.keys()) - set(encoded)
    if missing:
      raise errors.SchemaError(f'episode lacks declared metadata {sorted(missing)}')
    return self._serializer.serialize_example(encoded)

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
    return [_encode(feature, row, path) for row in value]


def _encode(feature: tfds.features.FeatureConnector, value: Any, path: str) -> Any:
  try:
    return feature.encode_example(value)
  except Exception as e:  # pylint: disable=broad-except
    raise errors.SchemaError(f'value does not match feature {feature!r}: {e}', field=path) from e
