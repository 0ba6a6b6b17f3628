"""Uncompressed TFRecord files without TensorFlow: writing frames and reading them back, checked.

A record is framed as TensorFlow writes it (tensorflow/core/lib/io/record_writer.cc):
uint64 length, uint32 masked CRC-32C of the length, the data, uint32 masked CRC-32C of the data,
all little-endian. The writer's files are byte-equal to `tf.io.TFRecordWriter`'s; importing
TensorFlow for them cost a build ~0.8 GiB of memory and ~6 s.
"""

from __future__ import annotations

import os
import struct
from typing import BinaryIO, Iterator, Optional

import google_crc32c

from rlds_suite.core import errors

_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct('<Q')
_CRC = struct.Struct('<I')
_READ_BUFFER = 1 << 20


def masked_crc(data: bytes | memoryview) -> int:
  """TFRecord's masked CRC-32C of `data`."""
  crc = google_crc32c.value(bytes(data) if isinstance(data, memoryview) else data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class RecordWriter:
  """Writes records to a new file at `path`, framed as tf.io.TFRecordWriter frames them."""

  def __init__(self, path: str | os.PathLike):
    self._file: Optional[BinaryIO] = open(path, 'wb')  # pylint: disable=consider-using-with

  def write(self, record: bytes) -> None:
    length = _LENGTH.pack(len(record))
    self._file.write(b''.join((length, _CRC.pack(masked_crc(length)), record,
                               _CRC.pack(masked_crc(record)))))

  def close(self) -> None:
    if self._file is not None:
      self._file.close()
      self._file = None


def read_records(path: str | os.PathLike) -> Iterator[bytes]:
  """The records of an uncompressed TFRecord file, in order, one at a time; a truncated frame or a
  CRC mismatch raises CorruptFileError naming the file and the record."""
  with open(path, 'rb', buffering=_READ_BUFFER) as f:
    index = 0
    while True:
      header = f.read(12)
      if not header:
        return
      if len(header) < 12:
        raise errors.CorruptFileError(f'truncated TFRecord header of record {index}', path=path)
      length_bytes = header[:8]
      if _CRC.unpack_from(header, 8)[0] != masked_crc(length_bytes):
        raise errors.CorruptFileError(f'corrupted TFRecord length of record {index}', path=path)
      (length,) = _LENGTH.unpack(length_bytes)
      data = f.read(length)
      footer = f.read(4)
      if len(data) < length or len(footer) < 4:
        raise errors.CorruptFileError(f'truncated TFRecord record {index}', path=path)
      if _CRC.unpack(footer)[0] != masked_crc(data):
        raise errors.CorruptFileError(f'corrupted TFRecord data of record {index}', path=path)
      yield data
      index += 1
