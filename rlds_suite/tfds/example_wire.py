"""The tf.train.Example wire format, written directly from numpy buffers.

Filling protobuf messages costs a Python call per feature list plus a copy of every value; for
short episodes of small tensors that dominated recording. Here a column of many episodes is turned
into one buffer (float32 bytes, or packed varints) and each episode's feature is a slice of it with
a few header bytes. The layout is protobuf's (proto3, tensorflow/core/example/feature.proto):

  Example  {1: Features}            Features {1: repeated map entry {1: key, 2: Feature}}
  Feature  {1: BytesList | 2: FloatList | 3: Int64List}
  BytesList {1: repeated bytes}     FloatList {1: packed float}     Int64List {1: packed int64}

Serialized `Features` messages concatenate into one (map entries merge), so entries written here
and ones serialized by protobuf combine with `b''.join`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

BYTES_LIST, FLOAT_LIST, INT64_LIST = 0x0A, 0x12, 0x1A  # Feature's fields, as (number << 3) | 2.
_LENGTH_DELIMITED_1, _LENGTH_DELIMITED_2 = b'\x0a', b'\x12'
_ONE_BYTE = [bytes((value,)) for value in range(0x80)]


def varint(value: int) -> bytes:
  """A non-negative int as a protobuf varint."""
  if value < 0x80:
    return _ONE_BYTE[value]
  if value < 0x4000:
    return bytes(((value & 0x7F) | 0x80, value >> 7))
  out = bytearray()
  while value >= 0x80:
    out.append((value & 0x7F) | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


def varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Integers -> (their varints back to back as uint8, the byte offset of each value and of the
  end). Negative values take 10 bytes each, as int64 two's complement, as protobuf writes them."""
  unsigned = np.ascontiguousarray(values, dtype=np.int64).reshape(-1).view(np.uint64)
  if not len(unsigned) or unsigned.max() < 0x80:  # Flags, small actions: one byte each.
    return unsigned.astype(np.uint8), np.arange(len(unsigned) + 1)
  sizes = np.ones(len(unsigned), dtype=np.int64)
  for shift in range(7, 64, 7):
    sizes += unsigned >= np.uint64(1 << shift)
  offsets = np.zeros(len(unsigned) + 1, dtype=np.int64)
  np.cumsum(sizes, out=offsets[1:])
  out = np.empty(int(offsets[-1]), dtype=np.uint8)
  for index in range(int(sizes.max())):
    present = sizes > index
    chunk = (unsigned[present] >> np.uint64(7 * index)) & np.uint64(0x7F)
    more = (sizes[present] > index + 1).astype(np.uint64) << np.uint64(7)
    out[offsets[:-1][present] + index] = (chunk | more).astype(np.uint8)
  return out, offsets


def packed(payload: bytes | memoryview) -> bytes:
  """The FloatList or Int64List message holding packed values."""
  return packed_header(len(payload)) + payload


def packed_header(payload_length: int) -> bytes:
  """The bytes of a FloatList or Int64List message before its packed values."""
  return _LENGTH_DELIMITED_1 + varint(payload_length) if payload_length else b''


def bytes_list(values: Sequence[bytes]) -> bytes:
  """The BytesList message holding `values`."""
  return b''.join([bytes_item_header(len(value)) + value for value in values])


def bytes_item_header(length: int) -> bytes:
  """The bytes of a BytesList message before one item of `length` bytes."""
  return _LENGTH_DELIMITED_1 + varint(length)


def key_field(key: str) -> bytes:
  """A map entry's key field; computed once per feature."""
  encoded = key.encode('utf-8')
  return _LENGTH_DELIMITED_1 + varint(len(encoded)) + encoded


def entry(key: bytes, kind: int, list_message: bytes) -> bytes:
  """One Features map entry: `key` from key_field, `kind` one of BYTES_LIST/FLOAT_LIST/INT64_LIST."""
  return entry_prefix(key, kind, len(list_message)) + list_message


def entry_prefix(key: bytes, kind: int, list_message_length: int) -> bytes:
  """The bytes of an entry that precede its list message (they depend only on its length)."""
  feature_length = 1 + len(varint(list_message_length)) + list_message_length
  body_length = len(key) + 1 + len(varint(feature_length)) + feature_length
  return b''.join((_LENGTH_DELIMITED_1, varint(body_length), key, _LENGTH_DELIMITED_2,
                   varint(feature_length), bytes((kind,)), varint(list_message_length)))


def example(features: bytes) -> bytes:
  """The Example message of a serialized Features message (map entries back to back)."""
  return example_of([features])


def example_of(pieces: Sequence[bytes | memoryview]) -> bytes:
  """The Example message of map entries given as pieces (bytes or byte memoryviews), in one join:
  each byte of a large feature is copied once here."""
  return b''.join([example_header(sum(map(len, pieces))), *pieces])


def example_header(features_length: int) -> bytes:
  """What precedes map entries of `features_length` bytes in their Example message."""
  return _LENGTH_DELIMITED_1 + varint(features_length)
