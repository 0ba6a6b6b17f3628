"""ZLIB-encoded tensor fields (frame stacks) decoded with ISA-L's inflate, a bounded size per row.

`tf.io.decode_compressed` inflates with zlib (~120 us of CPU an 84x84x4 frame of the benchmark's
image dataset) and to whatever size a row holds. Here each row is inflated by ISA-L (`isal`, ~70 us,
releasing the GIL, so the stream's parallel parse calls decode side by side) into its slot of one
[N, ...] array, no further than one byte past the field's declared size: a row that inflates to
more or less, or is not a zlib stream, fails its group with an InvalidArgumentError whose message
holds CORRUPT_ROW, which the numpy exit turns into CorruptFileError naming the dataset
(`reading.is_shard_read_error`).
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf
from isal import isal_zlib

from rlds_suite.tfds import shard_reader

CORRUPT_ROW = 'ZLIB tensor row does not inflate to its declared size:'


def decode_zlib_rows(serialized: tf.Tensor, dtype: tf.DType, shape: tuple[int, ...],
                     field: str) -> tf.Tensor:
  """[N] zlib streams, each one row of `shape` and `dtype` (little-endian, as `tf.io.decode_raw`
  reads it) -> [N, *shape]; `field` names the field in the error a corrupt row raises."""
  row_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.size
  values, bad = tf.numpy_function(
      functools.partial(_inflate_rows, row_bytes=row_bytes, dtype=dtype.as_numpy_dtype),
      [serialized], [dtype, tf.int64], stateful=False)
  check = tf.debugging.Assert(bad < 0, [CORRUPT_ROW, field, 'row', bad, 'of', tf.size(serialized),
                                        'expected', row_bytes, 'bytes'])
  with tf.control_dependencies([check]):
    return tf.reshape(values, [-1, *shape])


def _inflate_rows(serialized: np.ndarray, row_bytes: int,
                  dtype: np.dtype) -> tuple[np.ndarray, np.int64]:
  """(the rows inflated into one [N * row_bytes] array of `dtype`, the index of the first row
  that does not inflate to `row_bytes`, or -1)."""
  out = np.empty((len(serialized), row_bytes), np.uint8)
  for index, data in enumerate(serialized):
    try:
      out[index] = np.frombuffer(shard_reader.inflate_exactly(data, row_bytes), np.uint8)
    except (ValueError, isal_zlib.error):
      return np.zeros(0, dtype), np.int64(index)
  return out.reshape(-1).view(np.dtype(dtype).newbyteorder('<')).astype(dtype, copy=False), \
      np.int64(-1)
