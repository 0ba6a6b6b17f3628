"""Opening native files: finding them, decompressing within bounds, with typed errors that name the file.

Compressed data is read as a stream that may expand to at most `expansion_limit` bytes: the
codec's MAX_EXPANSION_RATIO times the compressed size, plus EXPANSION_FLOOR_BYTES, times
core.limits.factor() (EXPANSION_FACTOR there, or RLDS_SUITE_EXPANSION_FACTOR). A small file that
inflates to gigabytes (a decompression bomb) is refused with SizeLimitError once it passes the
limit, and a read that asks for more than the limit at once is refused before anything is read,
so memory stays bounded. The ratios, by what is held in memory:
  * DEFLATE, 200: gzip'd pickles, npz members, HDF5 chunks, held whole. The real files measured
    stay below: MAGICAL demos expand 112x; smaller files fall under the floor (imitation's
    `rews.npy` member: 514x of 420 bytes, a MAGICAL demo 36 MB).
  * DEFLATE_ROWS, 1032 (deflate's own maximum, so no well-formed file can pass it): gzip'd .npy
    arrays read in blocks of rows (DQN replay checkpoints), which never hold the whole array.
  * ZSTD, 2500: il-representations shards, whose members are held one at a time; the authors'
    Pong shard expands 523x.
Streams are read to their end, so that the codec's own check runs: gzip's CRC-32 and length,
zstd's content checksum, each zip member's CRC-32.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import math
import os
import pathlib
import struct
import zipfile
import zlib
from typing import IO, Any, Callable, Iterator, Optional

from isal import igzip
from isal import isal_zlib
import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import limits
from rlds_suite.core import safe_pickle

DEFLATE, DEFLATE_ROWS, ZSTD = 'deflate', 'deflate_rows', 'zstd'
MAX_EXPANSION_RATIO = {DEFLATE: 200, DEFLATE_ROWS: 1032, ZSTD: 2500}
EXPANSION_FLOOR_BYTES = 64 << 20
_READ_BLOCK = 1 << 20
_ZEROS = bytes(_READ_BLOCK)
# Reads up to this size are served and counted; a larger one that would pass the limit is
# refused at once (the unpickler asks for a whole BINBYTES8 at once, tarfile for a whole member).
_LARGE_READ = 16 << 20


def find_files(directory: errors.PathLike, pattern: str) -> list[pathlib.Path]:
  """Files below `directory` whose name matches `pattern`, sorted; EmptyInputError when none do."""
  root = pathlib.Path(directory)
  if not root.is_dir():
    raise errors.EmptyInputError('not a directory', path=root)
  found = sorted(p for p in root.rglob(pattern) if p.is_file())
  if not found:
    raise errors.EmptyInputError(f'no files matching {pattern!r}', path=root)
  return found


# ---- Bounded decompression -----------------------------------------------------------------------

def expansion_limit(compressed_bytes: int, codec: str) -> int:
  """The most bytes `compressed_bytes` of `codec` data may expand to (see the module docstring)."""
  return int((MAX_EXPANSION_RATIO[codec] * compressed_bytes + EXPANSION_FLOOR_BYTES) *
             limits.factor())


def size_limit_error(size: int, limit: int, *, path: Optional[errors.PathLike] = None,
                     field: Optional[str] = None, what: str = 'expands to more than'
                     ) -> errors.SizeLimitError:
  """The error for data that expands (or declares) past `limit` bytes."""
  return errors.SizeLimitError(
      f'{what} {size} bytes, past the {limit}-byte limit derived from the compressed size '
      f'(a decompression bomb? {limits.how_to_allow()})', path=path, field=field)


class _BoundedStream(io.RawIOBase):
  """The decompressed bytes of `source`, refused past `limit`; codec errors become
  CorruptFileError naming `path`."""

  def __init__(self, source: IO[bytes], closing: Callable[[], None], *, limit: int,
               path: errors.PathLike, codec_errors: tuple[type[BaseException], ...]):
    super().__init__()
    self._source = source
    self._closing = closing
    self._codec_errors = codec_errors
    self.limit = limit
    self.path = os.fspath(path)
    self.position = 0

  def readable(self) -> bool:
    return True

  def readinto(self, buffer: Any) -> int:
    view = memoryview(buffer).cast('B')
    if len(view) > _LARGE_READ and self.position + len(view) > self.limit:
      raise size_limit_error(self.position + len(view), self.limit, path=self.path,
                             what='a read asks for data up to')
    try:  # Straight into the caller's buffer: no intermediate bytes object.
      count = self._source.readinto(view[:min(len(view), self.limit - self.position + 1)])
    except self._codec_errors as e:
      raise errors.CorruptFileError(f'damaged or truncated compressed data after '
                                    f'{self.position} bytes: {e}', path=self.path) from e
    self.position += count
    if self.position > self.limit:
      raise size_limit_error(self.position, self.limit, path=self.path)
    return count

  def close(self) -> None:
    if not self.closed:
      self._closing()
    super().close()


def _bounded(path: errors.PathLike, codec: str,
             decompress: Callable[[IO[bytes]], IO[bytes]],
             codec_errors: tuple[type[BaseException], ...]) -> io.BufferedReader:
  try:
    raw = open(path, 'rb')  # pylint: disable=consider-using-with
    size = os.fstat(raw.fileno()).st_size
  except FileNotFoundError as e:
    raise errors.SchemaError('file is missing', path=path) from e
  except OSError as e:
    raise errors.CorruptFileError(f'cannot read: {e}', path=path) from e
  try:
    source = decompress(raw)
  except codec_errors as e:
    raw.close()
    raise errors.CorruptFileError(f'not {codec} data: {e}', path=path) from e

  def closing() -> None:
    try:
      source.close()
    finally:
      raw.close()

  stream = _BoundedStream(source, closing, limit=expansion_limit(size, codec), path=path,
                          codec_errors=codec_errors)
  return io.BufferedReader(stream, _READ_BLOCK)


_GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error, isal_zlib.error, OSError)


def gzip_stream(path: errors.PathLike, codec: str = DEFLATE) -> io.BufferedReader:
  """The bounded decompressed stream of a gzip file (the caller closes it); `codec` DEFLATE_ROWS
  for data read in blocks. Inflated by ISA-L (`isal.igzip`, ~2.5x Python's zlib on DQN Replay
  frames; the same CRC-32 and length checks). The source is ISA-L's gzip reader itself (what
  `igzip.GzipFile` reads through), whose readinto inflates straight into the caller's buffer:
  GzipFile's (io.BufferedIOBase's) reads into a new bytes object and copies it, +50% CPU."""
  if _ISAL_GZIP_READER is None:
    return _bounded(path, codec, lambda raw: igzip.GzipFile(fileobj=raw, mode='rb'), _GZIP_ERRORS)
  return _bounded(path, codec, lambda raw: _ISAL_GZIP_READER(raw, igzip.READ_BUFFER_SIZE),
                  _GZIP_ERRORS)


# isal.igzip names it _GzipReader (GzipFile(mode='rb') is it behind a BufferedReader); a release
# without it (the name is private) reads through GzipFile, one copy more.
_ISAL_GZIP_READER = getattr(igzip, '_GzipReader', None) if hasattr(
    igzip, 'READ_BUFFER_SIZE') else None


def zstd_stream(path: errors.PathLike) -> io.BufferedReader:
  """The bounded decompressed stream of a zstd file, all its frames (the caller closes it)."""
  import zstandard  # pylint: disable=g-import-not-at-top
  return _bounded(
      path, ZSTD,
      lambda raw: zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True),
      (zstandard.ZstdError, EOFError, OSError))


@contextlib.contextmanager
def open_gzip(path: errors.PathLike) -> Iterator[io.BufferedReader]:
  """A bounded gzip stream, read to its end (checking its CRC-32) when the block completes, even
  if the block closed the stream it was given (a wrapping BufferedReader closes it)."""
  with gzip_stream(path) as stream:
    yield shielded(stream)
    read_to_end(stream)


def shielded(stream: IO[bytes]) -> io.BufferedReader:
  """A reader of `stream` whose closing (e.g. by a BufferedReader wrapped around it and dropped)
  leaves `stream` open, so that its owner can still read it to its end."""
  return io.BufferedReader(_Shielded(stream), _READ_BLOCK)


class _Shielded(io.RawIOBase):
  """Reads from `stream`; closing it leaves `stream` open (see `shielded`)."""

  def __init__(self, stream: IO[bytes]):
    super().__init__()
    self.stream = stream

  def readable(self) -> bool:
    return True

  def readinto(self, buffer: Any) -> int:
    return self.stream.readinto(buffer)


def expansion_left(stream: io.BufferedReader) -> int:
  """At least how many more bytes a stream from this module may yield before its limit (counting
  what the buffers between may hold)."""
  raw, buffered = stream.raw, _READ_BLOCK
  while isinstance(raw, _Shielded):
    raw, buffered = raw.stream.raw, buffered + _READ_BLOCK
  return raw.limit - raw.position + buffered


def read_to_end(stream: IO[bytes], *, after: Optional[str] = None,
                path: Optional[errors.PathLike] = None) -> None:
  """Reads `stream` to its end, so that its codec checks its trailer; with `after` (what the data
  ended with), anything but zero bytes (tar's padding) is refused as data after it."""
  while True:
    block = stream.read(_READ_BLOCK)
    if not block:
      return
    if after is not None and block != _ZEROS[:len(block)]:
      raise errors.CorruptFileError(f'data after the end of {after}', path=path)


def load_gzip_pickle(path: errors.PathLike) -> Any:
  """A gzip-compressed pickle, streamed through the restricted unpickler within bounds."""
  with open_gzip(path) as stream:
    loaded = safe_pickle.load(stream, source=os.fspath(path), max_bytes=expansion_left(stream))
    if stream.read(1):
      raise errors.CorruptFileError('data after the end of the pickle', path=path)
  return loaded


# ---- .npy headers --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class NpyHeader:
  """An .npy header: the declared array, and how many bytes the header took."""
  shape: tuple[int, ...]
  fortran_order: bool
  dtype: np.dtype
  header_bytes: int

  @property
  def data_bytes(self) -> int:
    """Bytes of the declared array's data (exact: Python integers do not overflow)."""
    return math.prod(self.shape) * self.dtype.itemsize


class _Counting:
  """Counts the bytes read through it (numpy's header readers only call `read`)."""

  def __init__(self, f: IO[bytes]):
    self._f = f
    self.count = 0

  def read(self, size: int = -1) -> bytes:
    data = self._f.read(size)
    self.count += len(data)
    return data


def read_npy_header(f: IO[bytes], *, field: Optional[str] = None) -> NpyHeader:
  """The header at the start of an .npy stream; CorruptFileError when it is not one, SchemaError
  for a format version or dtype these readers do not take."""
  counting = _Counting(f)
  try:
    version = np.lib.format.read_magic(counting)
    read = {(1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0}.get(version)
    if read is None:
      raise errors.SchemaError(f'unsupported .npy format version {version}', field=field)
    shape, fortran_order, dtype = read(counting)
  except (ValueError, TypeError, SyntaxError, OverflowError, EOFError) as e:
    raise errors.CorruptFileError(f'bad .npy header: {e}', field=field) from e
  if any(d < 0 for d in shape):
    raise errors.CorruptFileError(f'bad .npy header: negative dimension in shape {shape}',
                                  field=field)
  if not dtype.hasobject and dtype.itemsize == 0:
    raise errors.SchemaError(f'unsupported .npy dtype {dtype} (items of 0 bytes)', field=field)
  return NpyHeader(tuple(shape), bool(fortran_order), dtype, counting.count)


def read_npy_data(f: IO[bytes], header: NpyHeader, *, available: Optional[int],
                  limit: Optional[int] = None, field: Optional[str] = None) -> np.ndarray:
  """The numeric array after `header`. Its declared size is checked before anything is read,
  against `available` (the bytes after the header, when the container says) and `limit`."""
  size = header.data_bytes
  if available is not None and size != available:
    raise errors.CorruptFileError(
        f'the .npy header declares {header.dtype}{list(header.shape)} ({size} bytes), the data '
        f'holds {available} bytes', field=field)
  if limit is not None and size > limit:
    raise size_limit_error(size, limit, field=field, what='the .npy header declares')
  data = f.read(size)
  if len(data) != size:
    raise errors.CorruptFileError(f'truncated: the .npy header declares {size} bytes of data, '
                                  f'the stream ends after {len(data)}', field=field)
  return np.frombuffer(data, dtype=header.dtype).reshape(
      header.shape, order='F' if header.fortran_order else 'C')


# ---- Zip (npz) archives --------------------------------------------------------------------------

_ZIP_READ_ERRORS = (zipfile.BadZipFile, zlib.error, isal_zlib.error, EOFError, OSError)
_LOCAL_HEADER = struct.Struct('<4s22xHH')  # Signature, then (at 26) name and extra lengths.


@contextlib.contextmanager
def open_zip(path: errors.PathLike) -> Iterator[zipfile.ZipFile]:
  """A zip archive; damaged, truncated or unsupported zip data raise CorruptFileError naming it
  (rlds_suite errors raised in the block are attributed to `path`)."""
  try:
    archive = zipfile.ZipFile(path)
  except FileNotFoundError as e:
    raise errors.SchemaError('file is missing', path=path) from e
  except (*_ZIP_READ_ERRORS, ValueError, NotImplementedError) as e:
    raise errors.CorruptFileError(f'damaged, truncated or unsupported zip (npz) archive: '
                                  f'{type(e).__name__}: {e}', path=path) from e
  with archive, errors.located(path):
    names = archive.namelist()
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
      raise errors.CorruptFileError(f'members stored more than once: {repeated}')
    yield archive


@contextlib.contextmanager
def zip_member(archive: zipfile.ZipFile, name: str, *,
               field: Optional[str] = None) -> Iterator[IO[bytes]]:
  """Member `name`, after checking its declared size against the expansion limit; damaged data
  read in the block raises CorruptFileError naming `field` (default: `name`)."""
  field = field or name
  try:
    info = archive.getinfo(name)
  except KeyError:
    raise errors.SchemaError(f'missing member {field!r} (has {sorted(archive.namelist())})',
                             field=field) from None
  limit = expansion_limit(info.compress_size, DEFLATE)
  if info.file_size > limit:
    raise size_limit_error(info.file_size, limit, field=field, what='the zip member declares')
  try:
    member = _inflated_member(archive, info) or archive.open(info)
  except (*_ZIP_READ_ERRORS, NotImplementedError, RuntimeError, ValueError) as e:
    # NotImplementedError: a zip version or compression method zipfile cannot read; RuntimeError:
    # an encrypted member.
    raise errors.CorruptFileError(f'unsupported or damaged zip member: {type(e).__name__}: {e}',
                                  field=field) from e
  try:
    with member:
      yield member
  except errors.RLDSSuiteError as e:
    if e.field:
      raise
    raise type(e)(e.problem, path=e.path, field=field) from e
  except _ZIP_READ_ERRORS as e:
    raise errors.CorruptFileError(f'damaged or truncated zip member: {type(e).__name__}: {e}',
                                  field=field) from e


def _inflated_member(archive: zipfile.ZipFile,
                     info: zipfile.ZipInfo) -> Optional[io.BufferedReader]:
  """A deflated, unencrypted member of an archive opened from a path, inflated by ISA-L with its
  own file handle (None for any other member: zipfile reads those). zipfile's checks are kept:
  the local header's signature and name, then at the end the declared size, the deflate stream's
  end and the CRC-32. zipfile's inflate and CRC take ~3x as long (il-representations' 0.5 GB
  Atari members)."""
  if (info.compress_type != zipfile.ZIP_DEFLATED or info.flag_bits & 0x1 or
      not isinstance(archive.filename, str)):
    return None
  raw = open(archive.filename, 'rb')  # pylint: disable=consider-using-with
  try:
    raw.seek(info.header_offset)
    header = raw.read(_LOCAL_HEADER.size)
    if len(header) != _LOCAL_HEADER.size:
      raise zipfile.BadZipFile('truncated local file header')
    signature, name_length, extra_length = _LOCAL_HEADER.unpack(header)
    name = raw.read(name_length)
    raw.seek(extra_length, os.SEEK_CUR)
    expected = info.orig_filename.encode('utf-8' if info.flag_bits & 0x800 else 'cp437')
    if signature != b'PK\x03\x04' or name != expected:
      raise zipfile.BadZipFile(f'bad local file header for {info.orig_filename!r}')
  except BaseException:
    raw.close()
    raise
  return io.BufferedReader(_InflatedMember(raw, info), _READ_BLOCK)


class _InflatedMember(io.RawIOBase):
  """The inflated bytes of one deflated zip member whose data starts at `raw`'s position."""

  def __init__(self, raw: IO[bytes], info: zipfile.ZipInfo):
    super().__init__()
    self._raw, self._info = raw, info
    self._inflate = isal_zlib.decompressobj(-15)
    self._compressed_left = info.compress_size
    self._left = info.file_size
    self._crc = 0
    self._checked = False

  def readable(self) -> bool:
    return True

  def readinto(self, buffer: Any) -> int:
    view = memoryview(buffer).cast('B')
    while self._left and len(view):
      source = self._next_input()
      data = self._inflate.decompress(source, min(len(view), self._left))
      if data:
        view[:len(data)] = data
        self._crc = isal_zlib.crc32(data, self._crc)
        self._left -= len(data)
        return len(data)
      if self._inflate.eof or not source:
        raise EOFError('the compressed data ended before the declared size')
    if not self._left and not self._checked:
      self._check_end()
    return 0

  def _next_input(self) -> bytes:
    """What the inflater takes next: its unconsumed input, else more of the member's compressed
    bytes, else nothing (which drains output it still holds)."""
    if self._inflate.unconsumed_tail or not self._compressed_left:
      return self._inflate.unconsumed_tail
    data = self._raw.read(min(self._compressed_left, _READ_BLOCK))
    if not data:
      raise EOFError('the archive ended inside the member')
    self._compressed_left -= len(data)
    return data

  def _check_end(self) -> None:
    """At the declared size: the deflate stream must end there, with the declared CRC-32."""
    while not self._inflate.eof:
      source = self._next_input()
      if self._inflate.decompress(source, 1):
        raise zipfile.BadZipFile(f'data after the declared {self._info.file_size} bytes')
      if not source and not self._inflate.eof:
        raise EOFError('the deflate stream does not end')
    if self._crc != self._info.CRC:
      raise zipfile.BadZipFile(f'Bad CRC-32 for file {self._info.orig_filename!r}')
    self._checked = True

  def close(self) -> None:
    if not self.closed:
      self._raw.close()
    super().close()


def expect_end(f: IO[bytes], what: str, *, field: Optional[str] = None) -> None:
  """`f` must end here; reading its end also runs the container's check (a zip member's CRC)."""
  if f.read(1):
    raise errors.CorruptFileError(f'data after the end of {what}', field=field)


def load_npz(path: errors.PathLike) -> dict[str, np.ndarray]:
  """Every member of an .npz archive, without np.load(allow_pickle=True).

  Object arrays (e.g. arrays of info dicts) are read with the restricted unpickler, so they can only
  hold plain data and the known benchmark classes; anything else raises UnsafePickleError.
  """
  arrays = {}
  with open_zip(path) as archive:
    for member in archive.infolist():
      name = member.filename[:-len('.npy')] if member.filename.endswith('.npy') else member.filename
      with zip_member(archive, member.filename, field=name) as f:
        arrays[name] = _read_npy(f, name, member.file_size, source=os.fspath(path))
  return arrays


def _read_npy(f: IO[bytes], name: str, member_bytes: int, source: str) -> np.ndarray:
  """One .npy member: numeric arrays from their raw bytes, object arrays via safe_pickle."""
  header = read_npy_header(f, field=name)
  if header.dtype.hasobject:
    array = safe_pickle.load(f, source=source)
    if not isinstance(array, np.ndarray) or array.shape != header.shape:
      raise errors.SchemaError(f'expected an object array of shape {header.shape}, got '
                               f'{type(array).__name__} {np.shape(array)}', field=name)
  else:
    array = read_npy_data(f, header, available=member_bytes - header.header_bytes, field=name)
  expect_end(f, 'the .npy array', field=name)
  return array
