"""TFDS feature declarations for RLDS episodes (the TensorFlow edge of the episode model).

Encodings are chosen on purpose: image observations as PNG `Image`s, large non-image tensors with
ZLIB, small vectors plain, float64 as raw bytes (exact). A plain uint8 Pong frame costs ~143 KB
and ~11 ms to write; PNG or ZLIB cuts that 15-40x.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np
import tensorflow_datasets as tfds

import rlds_suite

from rlds_suite.core import fields

# Tensors with more elements than this are ZLIB-encoded.
LARGE_TENSOR_ELEMENTS = 4096


def image(shape: Sequence[Optional[int]], doc: str = '') -> tfds.features.Image:
  """An RGB or grayscale uint8 image, PNG-encoded (lossless)."""
  return tfds.features.Image(shape=tuple(shape), dtype=np.uint8, encoding_format='png', doc=doc)


def tensor(shape: Sequence[Optional[int]], dtype: Any, doc: str = '') -> tfds.features.Tensor:
  """A tensor, ZLIB-encoded when it is large (frame stacks, maps), plain otherwise; float64 is
  always stored exactly (see `_exact_encoding`)."""
  shape = tuple(shape)
  known = [d for d in shape if d is not None]
  large = None not in shape and int(np.prod(known, dtype=np.int64)) > LARGE_TENSOR_ELEMENTS
  encoding = tfds.features.Encoding.ZLIB if large else _exact_encoding(dtype)
  return tfds.features.Tensor(shape=shape, dtype=np.dtype(dtype), encoding=encoding, doc=doc)


def scalar(dtype: Any, doc: str = '') -> tfds.features.Tensor:
  """A scalar: `Scalar`, or for float64 a shape-() `Tensor` stored exactly."""
  if _exact_encoding(dtype) is not tfds.features.Encoding.NONE:
    return tfds.features.Tensor(shape=(), dtype=np.dtype(dtype),
                                encoding=_exact_encoding(dtype), doc=doc)
  return tfds.features.Scalar(dtype=np.dtype(dtype), doc=doc)


def _exact_encoding(dtype: Any) -> tfds.features.Encoding:
  """BYTES (raw little-endian values) for float64, NONE otherwise: unencoded float64 tensors lose
  precision, since TFDS writes them to tf.train.Example's float_list, which holds float32."""
  if np.dtype(dtype) == np.float64:
    return tfds.features.Encoding.BYTES
  return tfds.features.Encoding.NONE


def text(doc: str = '') -> tfds.features.Text:
  return tfds.features.Text(doc=doc)


def rlds_features(*,
                  observation: Any,
                  action: Any,
                  reward: Any = None,
                  step_metadata: Optional[Mapping[str, Any]] = None,
                  episode_metadata: Optional[Mapping[str, Any]] = None,
                  observation_is_copy: bool = False) -> tfds.features.FeaturesDict:
  """The FeaturesDict of an RLDS dataset: {'steps': Dataset({...}), **episode_metadata}.

  `observation_is_copy`: the steps carry that mask, as episodes of a format whose BoundaryPolicy
  `marks_copies` do (pass `policy.marks_copies`).
  """
  steps = {
      fields.OBSERVATION: observation,
      fields.ACTION: action,
      fields.REWARD: reward if reward is not None else scalar(np.float32),
      fields.DISCOUNT: scalar(np.float32, doc='0 on the action reaching an absorbing state.'),
      fields.IS_FIRST: scalar(np.bool_),
      fields.IS_LAST: scalar(np.bool_),
      fields.IS_TERMINAL: scalar(np.bool_, doc='The episode ended by termination, not truncation.'),
      **dict(step_metadata or {}),
  }
  if observation_is_copy:
    steps[fields.OBSERVATION_IS_COPY] = scalar(
        np.bool_, doc='The format did not keep the final observation: this placeholder last step '
        'repeats the last real one.')
  return tfds.features.FeaturesDict({
      fields.STEPS: tfds.features.Dataset(steps),
      **dict(episode_metadata or {}),
  })


# Builders import this module: if registering them was put off while it was imported, do it now.
rlds_suite.register_deferred_builders(__name__)
