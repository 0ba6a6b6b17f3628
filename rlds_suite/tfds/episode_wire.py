"""Episodes -> serialized tf.train.Example bytes from a plan of flat leaves, batch per field.

The plan (`Leaf`s) is made from a TFDS FeaturesDict by `rlds_suite.tfds.writing`; this module
needs only numpy, the wire format (`example_wire`) and encoders (`compression`) it shares with the
recording, so a build's pool workers import neither TensorFlow nor TFDS (a worker is ~40 MB, not ~500 MB).
Each field of a batch of episodes is encoded once (float32 bytes, packed varints, PNG or ZLIB per
step, raw rows) and cut into per-episode entries: the bytes parse to the same example as TFDS's
own serialization (tests/test_writing.py checks it).
"""

from __future__ import annotations

import dataclasses
import signal
from typing import Any, Mapping, Sequence

import numpy as np

from rlds_suite.tfds import compression
from rlds_suite.tfds import example_wire



# How a leaf is written: packed numbers, or a BytesList with one item per row.
FLOAT, INT, RAW, PNG, ZLIB, TEXT = 'float', 'int', 'raw', 'png', 'zlib', 'text'
STOP_SIGNALS = ('SIGTERM', 'SIGUSR1')  # A build stops at the next example on these.
_COLUMN_ENCODERS = {PNG: compression.png_rows, ZLIB: compression.zlib_rows}


@dataclasses.dataclass(frozen=True)
class Leaf:
  """One flat feature: its key ('steps/observation'), how it is written, its row dtype and shape
  (per step for step leaves, per episode otherwise)."""
  key: str
  kind: str
  dtype: str
  shape: tuple[int, ...]
  per_step: bool


def worker_init() -> None:
  """A pool worker leaves Ctrl-C and the stop signals to the writer, which ends it."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  for name in STOP_SIGNALS:
    signal.signal(getattr(signal, name), signal.SIG_IGN)


def serialize(plan: Sequence[Leaf], episodes: Sequence[Mapping[str, Any]]) -> list[bytes]:
  """Each episode's tf.train.Example bytes. An episode is {leaf key: value}: for step leaves an
  array of rows (steps first), else one value; values are already checked against the plan."""
  keys = {leaf.key: example_wire.key_field(leaf.key) for leaf in plan}
  pieces: list[list[Any]] = [[] for _ in episodes]
  for leaf in plan:
    if leaf.per_step:
      lengths = [len(episode[leaf.key]) for episode in episodes]
      column = np.concatenate([episode[leaf.key] for episode in episodes]) if episodes else None
    else:
      lengths = [1] * len(episodes)
      column = [episode[leaf.key] for episode in episodes]
    for index, entry in enumerate(_entries(leaf, keys[leaf.key], column, lengths)):
      pieces[index] += entry
  return [example_wire.example_of(parts) for parts in pieces]


def _entries(leaf: Leaf, key: bytes, column: Any, lengths: Sequence[int]) -> list[list[Any]]:
  """The map entry of `leaf` for each episode, as pieces to join (bytes or memoryviews);
  `column` holds every episode's rows in order."""
  bounds = np.zeros(len(lengths) + 1, dtype=np.int64)
  np.cumsum(lengths, out=bounds[1:])
  if leaf.kind == TEXT:
    items = [value.encode('utf-8') if isinstance(value, str) else bytes(value) for value in column]
    return [_bytes_entry(key, [item]) for item in items]
  rows = np.asarray(column, dtype=leaf.dtype) if not leaf.per_step else column
  rows = rows.reshape((int(bounds[-1]),) + tuple(leaf.shape))
  if leaf.kind in _COLUMN_ENCODERS:
    items = _COLUMN_ENCODERS[leaf.kind](rows)
    return [_bytes_entry(key, items[bounds[i]:bounds[i + 1]]) for i in range(len(lengths))]
  if leaf.kind == RAW:  # One item of little-endian bytes per row, all rows' items at once.
    raw = np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder('<')).reshape(len(rows), -1)
    data = raw.view(np.uint8).reshape(len(rows), -1)
    header = np.frombuffer(example_wire.bytes_item_header(data.shape[1]), np.uint8)
    items = np.concatenate([np.broadcast_to(header, (len(data), len(header))), data], axis=1)
    payload, item_bytes = memoryview(items).cast('B'), items.shape[1]
    out = []
    for i in range(len(lengths)):
      part = payload[bounds[i] * item_bytes:bounds[i + 1] * item_bytes]
      out.append([example_wire.entry_prefix(key, example_wire.BYTES_LIST, len(part)), part])
    return out
  per_row = int(np.prod(leaf.shape, dtype=np.int64))
  if leaf.kind == FLOAT:
    payload = memoryview(np.ascontiguousarray(rows, dtype='<f4').reshape(-1)).cast('B')
    offsets = bounds * (per_row * 4)
    kind = example_wire.FLOAT_LIST
  else:
    values, value_offsets = example_wire.varints(rows.reshape(-1))
    payload, offsets = memoryview(values), value_offsets[bounds * per_row]
    kind = example_wire.INT64_LIST
  out = []
  for i in range(len(lengths)):
    part = payload[offsets[i]:offsets[i + 1]]
    header = example_wire.packed_header(len(part))
    out.append([example_wire.entry_prefix(key, kind, len(header) + len(part)), header, part])
  return out


def _bytes_entry(key: bytes, items: Sequence[bytes]) -> list[Any]:
  """A BytesList entry of `items` as pieces: its prefix, then each item's header and bytes."""
  pieces: list[Any] = [b'']
  size = 0
  for item in items:
    header = example_wire.bytes_item_header(len(item))
    pieces += (header, item)
    size += len(header) + len(item)
  pieces[0] = example_wire.entry_prefix(key, example_wire.BYTES_LIST, size)
  return pieces
