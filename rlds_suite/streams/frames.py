"""ZLIB-encoded tensor fields (frame stacks) decoded with ISA-L's inflate, a bounded size per row.

`tf.io.decode_compressed` inflates with zlib (~120 us of CPU an 84x84x4 frame of the benchmark's
image dataset) and to whatever size a row holds. Here each row is inflated by ISA-L (`isal`, ~70 us,
releasing the GIL, so the stream's parallel parse calls decode side by side) into its slot of one
[N, ...] array, no further than one byte past the field's declared size: a row that inflates to
more or less, or is not a zlib stream, fails its group with an InvalidArgumentError whose message
holds CORRUPT_ROW, which the numpy exit turns into CorruptFileError naming the dataset
(`reading.is_shard_read_error`).

A group's rows are inflated in chunks of DECODE_CHUNK_ROWS by a pool of DECODE_THREADS threads
shared by every stream of the process, not row after row in the thread that runs the parse: on a
loaded machine the kernel gives tf.data's many short-lived threads (the naive recipe's) more CPU
than two threads that each inflate a whole group, and ours must keep up with that recipe there.
Measured (one process, 3 rounds alternated, 8 busy-loop sessions besides others' work, load 20-27):
the default-budget image stream 1.55x [1.27..1.87] the naive recipe with 128-row chunks, 1.23x
[1.23..1.60] with 32 and 1.37x [1.07..1.60] with 8, against 1.09x [0.98..1.73] row after row; the
CPU share it got rose from 0.09-0.14 to 0.11-0.15 cores (the naive recipe's 0.13-0.20).

A stream with such a field has its tf.data iterators released at interpreter exit
(`iterator_exit`): one alive then, with a decode in flight, hung the exit.
"""

from __future__ import annotations

import functools
import os
import threading
from concurrent import futures

import numpy as np
import tensorflow as tf
from isal import isal_zlib

from rlds_suite.readers import bounded_inflate
from rlds_suite.streams import iterator_exit

CORRUPT_ROW = 'ZLIB tensor row does not inflate to its declared size:'
DECODE_THREADS = max(4, 2 * (os.cpu_count() or 1))
DECODE_CHUNK_ROWS = 128  # ~9 ms of inflating 84x84x4 frames a task (8 and 32 did no better).
_pool: futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _decode_pool() -> futures.ThreadPoolExecutor:
  global _pool
  with _pool_lock:
    if _pool is None:
      _pool = futures.ThreadPoolExecutor(DECODE_THREADS, thread_name_prefix='rlds_inflate')
    return _pool


def decode_zlib_rows(serialized: tf.Tensor, dtype: tf.DType, shape: tuple[int, ...],
                     field: str) -> tf.Tensor:
  """[N] zlib streams, each one row of `shape` and `dtype` (little-endian, as `tf.io.decode_raw`
  reads it) -> [N, *shape]; `field` names the field in the error a corrupt row raises."""
  row_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.size
  iterator_exit.release_at_exit()  # A decode in flight at exit would hang it otherwise.
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
  starts = range(0, len(serialized), DECODE_CHUNK_ROWS)
  if len(starts) > 1:
    bad = list(_decode_pool().map(
        lambda start: _inflate_chunk(serialized, out, start, row_bytes), starts))
  else:
    bad = [_inflate_chunk(serialized, out, 0, row_bytes)]
  first_bad = min((b for b in bad if b >= 0), default=-1)
  if first_bad >= 0:
    return np.zeros(0, dtype), np.int64(first_bad)
  return out.reshape(-1).view(np.dtype(dtype).newbyteorder('<')).astype(dtype, copy=False), \
      np.int64(-1)


def _inflate_chunk(serialized: np.ndarray, out: np.ndarray, start: int, row_bytes: int) -> int:
  """Rows [start, start + DECODE_CHUNK_ROWS) inflated into `out`; the first that does not
  inflate to `row_bytes`, or -1."""
  for index in range(start, min(start + DECODE_CHUNK_ROWS, len(serialized))):
    try:
      out[index] = np.frombuffer(bounded_inflate.inflate_exactly(serialized[index], row_bytes),
                                 np.uint8)
    except (ValueError, isal_zlib.error):
      return index
  return -1
