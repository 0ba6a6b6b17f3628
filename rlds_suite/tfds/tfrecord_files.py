"""TFRecord files without TensorFlow: writing frames, and reading them back (plain or GZIP), checked.

A record is framed as TensorFlow writes it (tensorflow/core/lib/io/record_writer.cc):
uint64 length, uint32 masked CRC-32C of the length, the data, uint32 masked CRC-32C of the data,
all little-endian. The writer's files are byte-equal to `tf.io.TFRecordWriter`'s; importing
TensorFlow for them cost a build ~0.8 GiB of memory and ~6 s. GZIP files (RL Unplugged's shards,
`tf.io.TFRecordOptions('GZIP')`) are inflated by ISA-L within `readers.files`' bounds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import os
import struct
from typing import BinaryIO, Callable, Iterator, Optional, Sequence

import google_crc32c

from rlds_suite.core import errors
from rlds_suite.readers import files
from rlds_suite.tfds import provenance

GZIP = 'GZIP'  # `compression`, as tf.data.TFRecordDataset's compression_type names it.
HEADER_BYTES = 12  # uint64 length, uint32 masked CRC-32C of the length.
FOOTER_BYTES = 4  # uint32 masked CRC-32C of the data.

_MASK_DELTA = 0xA282EAD8
_LENGTH = struct.Struct('<Q')
_CRC = struct.Struct('<I')
_READ_BUFFER = 1 << 20
_WRITE_BYTES = 1 << 20  # A writev goes out once this much is pending,
_WRITE_PIECES = 1024  # or this many pieces (Linux's IOV_MAX), 3 a record.
_HASHED_BYTES = 256 << 10  # Frames from a worker are hashed and written this much at a time.


def masked_crc(data: bytes | memoryview) -> int:
  """TFRecord's masked CRC-32C of `data`."""
  crc = google_crc32c.value(bytes(data) if isinstance(data, memoryview) else data)
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_parts(record: bytes) -> tuple[bytes, bytes]:
  """The TFRecord header and footer that frame `record`."""
  length = _LENGTH.pack(len(record))
  return length + _CRC.pack(masked_crc(length)), _CRC.pack(masked_crc(record))


@dataclasses.dataclass(frozen=True)
class Frames:
  """Records already framed, back to back in `data` (a pool worker's output in shared memory):
  each record's length, in order."""
  data: memoryview
  lengths: Sequence[int]

  def cut(self, start: int, stop: int) -> 'Frames':
    """Records [start, stop) of these."""
    offset = sum(self.lengths[:start]) + start * (HEADER_BYTES + FOOTER_BYTES)
    size = sum(self.lengths[start:stop]) + (stop - start) * (HEADER_BYTES + FOOTER_BYTES)
    return Frames(self.data[offset:offset + size], self.lengths[start:stop])


class RecordWriter:
  """Writes records to a new file at `path`, framed as tf.io.TFRecordWriter frames them.

  Frames go out with writev, about a MiB at a time, never joined into one buffer; the file's
  sha256 is taken from the same bytes as they go, and handed to `provenance` on close, so that
  the build's provenance does not read the file again."""

  def __init__(self, path: str | os.PathLike):
    self._path = os.fspath(path)
    self._fd: Optional[int] = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    self._pending: list[bytes | memoryview] = []
    self._pending_bytes = self._size = 0
    self._sha = hashlib.sha256()

  def write(self, record: bytes) -> None:
    header, footer = frame_parts(record)
    self._pending += (header, record, footer)
    self._pending_bytes += len(record) + HEADER_BYTES + FOOTER_BYTES
    if self._pending_bytes >= _WRITE_BYTES or len(self._pending) >= _WRITE_PIECES:
      self._flush()

  def write_frames(self, frames: Frames) -> None:
    """Writes records framed elsewhere, before it returns (their buffer may be reused after).
    They are hashed and written _HASHED_BYTES at a time, so that the kernel copies into the page
    cache bytes that hashing has just brought into this core's cache."""
    self._flush()
    for start in range(0, len(frames.data), _HASHED_BYTES):
      self._pending.append(frames.data[start:start + _HASHED_BYTES])
      self._flush()

  def close(self) -> None:
    if self._fd is None:
      return
    try:
      self._flush()
    finally:
      os.close(self._fd)
      self._fd = None
    provenance.remember(self._path, {'size': self._size, 'sha256': self._sha.hexdigest()})

  def _flush(self) -> None:
    pieces, self._pending, self._pending_bytes = self._pending, [], 0
    for piece in pieces:
      self._sha.update(piece)
    while pieces:
      written = os.writev(self._fd, pieces)
      self._size += written
      while pieces and written >= len(pieces[0]):  # A short write: the rest goes again.
        written -= len(pieces.pop(0))
      if written:
        pieces[0] = memoryview(pieces[0])[written:]


class BadFrame(enum.Enum):
  """Why a frame could not be read."""
  TRUNCATED = 'truncated'  # The file ends inside it (or it declares more than the file holds).
  LENGTH_CRC = 'length'  # Its length's checksum fails.
  DATA_CRC = 'data'  # Its length is sound but its data's checksum fails.


def read_records(path: str | os.PathLike, compression: Optional[str] = None) -> Iterator[bytes]:
  """The records of a TFRecord file (`compression` None or GZIP), in order, one at a time; a
  truncated frame, a CRC mismatch or damaged GZIP data raises CorruptFileError naming the file and
  the record."""
  return iter(RecordReader(path, compression))


class RecordReader:
  """Reads a TFRecord file's frames in order, checking both CRCs; `records` and `offset` (bytes of
  the complete frames read, in the uncompressed stream) say how far it got. Iterating raises
  CorruptFileError at the first bad frame; `complete_records` stops there instead (a torn tail),
  leaving what was wrong with it in `bad_frame`."""

  def __init__(self, path: str | os.PathLike, compression: Optional[str] = None):
    if compression not in (None, GZIP):
      raise errors.UsageError(f'unknown TFRecord compression {compression!r} (None or {GZIP})')
    self.path = os.fspath(path)
    self.compression = compression
    self.records = 0
    self.offset = 0
    self.bad_frame: Optional[BadFrame] = None

  def __iter__(self) -> Iterator[bytes]:
    return self._read(strict=True)

  def complete_records(self) -> Iterator[bytes]:
    """The records before the first bad frame (none raise): what a writer that died left whole."""
    return self._read(strict=False)

  def _read(self, strict: bool) -> Iterator[bytes]:
    with self._open() as (f, available):
      while True:
        header = f.read(HEADER_BYTES)
        if not header:
          return
        bad, problem, record = self._frame(f, header, available)
        if bad is not None:
          self.bad_frame = bad
          if strict:
            raise errors.CorruptFileError(f'{problem} of record {self.records}', path=self.path)
          return
        self.records += 1
        self.offset += HEADER_BYTES + len(record) + FOOTER_BYTES
        yield record

  def _frame(self, f: BinaryIO, header: bytes,
             available: Callable[[], int]) -> tuple[Optional[BadFrame], str, bytes]:
    """(None, '', data) of a good frame, else (what is wrong, said in words, b'')."""
    if len(header) < HEADER_BYTES:
      return BadFrame.TRUNCATED, 'truncated TFRecord header', b''
    length_bytes = header[:8]
    if _CRC.unpack_from(header, 8)[0] != masked_crc(length_bytes):
      return BadFrame.LENGTH_CRC, 'corrupted TFRecord length', b''
    (length,) = _LENGTH.unpack(length_bytes)
    if length + FOOTER_BYTES > available():  # Never allocate what the file cannot hold.
      return BadFrame.TRUNCATED, f'truncated TFRecord record (declares {length} bytes)', b''
    data = f.read(length)
    footer = f.read(FOOTER_BYTES)
    if len(data) < length or len(footer) < FOOTER_BYTES:
      return BadFrame.TRUNCATED, 'truncated TFRecord record', b''
    if _CRC.unpack(footer)[0] != masked_crc(data):
      return BadFrame.DATA_CRC, 'corrupted TFRecord data', b''
    return None, '', data

  @contextlib.contextmanager
  def _open(self) -> Iterator[tuple[BinaryIO, Callable[[], int]]]:
    """The uncompressed stream and a function giving at most how many more bytes it holds."""
    if self.compression == GZIP:
      with files.gzip_stream(self.path) as stream:
        yield stream, lambda: files.expansion_left(stream)
      return
    try:
      f = open(self.path, 'rb', buffering=_READ_BUFFER)  # pylint: disable=consider-using-with
    except FileNotFoundError as e:
      raise errors.SchemaError('file is missing', path=self.path) from e
    with f:
      size = os.fstat(f.fileno()).st_size
      yield f, lambda: size - f.tell()
