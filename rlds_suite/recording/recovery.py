"""Recovering what an interrupted recording left: its unfinished shard, record by record.

A killed writer leaves its open shard as a hidden '.NAME.in_progress' file (see `shards`), which
holds every record it flushed, perhaps followed by the first bytes of a record it was writing.
TFRecord frames are self-delimiting and checksummed ([length][crc of length][data][crc of data]),
so `recover` keeps every complete record, drops only a torn last record, renames the file into
place as the next shard and rewrites the metadata; the dataset then loads with every salvaged
episode. It also lists complete shards that were renamed into place by a run killed before it
rewrote the metadata, trimming a torn last record there too (older writers renamed a shard whose
last write failed on a full disk). Nothing is deleted unless it is reported: a file whose bad bytes are not a
torn last record (a checksum failing in the middle) is left as it is and raises CorruptFileError.

A recording holds `DirectoryLock` on its directory while it writes (the kernel drops the lock when
the process dies, SIGKILL included), so recovery never touches a live recording's files.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import re
import shutil
import threading
from typing import Any, Optional

import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.recording import run_provenance
from rlds_suite.recording import shards
from rlds_suite.tfds import tfrecord_files

LOCK_FILENAME = '.recording.lock'


class DirectoryLock:
  """An exclusive lock on a dataset directory, held while one writer records into it.

  A POSIX record lock on DIR/.recording.lock (which holds the owner's pid): other processes are
  refused, and forked children do not inherit it; a set of held directories refuses a second
  holder in the same process. The directory is created if needed. `release` removes the file.
  """

  _held: set[str] = set()  # Real paths of the directories locked by this process.
  _held_lock = threading.Lock()

  def __init__(self, directory: str | os.PathLike):
    self.directory = os.fspath(directory)
    self._path = os.path.join(self.directory, LOCK_FILENAME)
    with shards.writing(self._path):  # A read-only directory: one line.
      os.makedirs(self.directory, exist_ok=True)
      self._key = os.path.realpath(self.directory)
      with DirectoryLock._held_lock:
        if self._key in DirectoryLock._held:
          raise self._busy(os.getpid())
        self._fd: Optional[int] = self._acquire()
        DirectoryLock._held.add(self._key)

  def release(self) -> None:
    """Removes the lock file and releases the lock. Idempotent."""
    with DirectoryLock._held_lock:
      if self._fd is None:
        return
      try:
        os.unlink(self._path)  # Still locked: nobody can take the lock on this file meanwhile.
      except FileNotFoundError:
        pass
      os.close(self._fd)
      self._fd = None
      DirectoryLock._held.discard(self._key)

  def _acquire(self) -> int:
    while True:
      fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
      try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except OSError as e:
        os.close(fd)
        if e.errno not in (errno.EACCES, errno.EAGAIN):
          raise
        raise self._busy(_read_pid(self._path)) from None
      try:  # The previous holder may have removed the file between our open and lock.
        current = os.stat(self._path).st_ino == os.fstat(fd).st_ino
      except FileNotFoundError:
        current = False
      if current:
        os.ftruncate(fd, 0)
        os.write(fd, f'{os.getpid()}\n'.encode())
        return fd
      os.close(fd)

  def _busy(self, pid: Optional[int]) -> errors.UnfinishedRecordingError:
    holder = 'this process' if pid == os.getpid() else f'process {pid or "?"}'
    return errors.UnfinishedRecordingError(
        f'a recording ({holder}) is writing into this directory', path=self.directory)


def _read_pid(path: str) -> Optional[int]:
  try:
    with open(path) as f:
      return int(f.read().strip() or 0) or None
  except (OSError, ValueError):
    return None


@dataclasses.dataclass(frozen=True)
class RecordScan:
  """The complete records at the start of a TFRecord file."""
  records: int  # Complete records whose checksums hold.
  valid_bytes: int  # Their frames' bytes: the file's good prefix.
  payload_bytes: int  # Their data bytes (TFDS's num_bytes).
  file_bytes: int

  @property
  def torn_bytes(self) -> int:
    """Bytes after the complete records: a record the writer had not finished."""
    return self.file_bytes - self.valid_bytes


def scan_records(path: str) -> RecordScan:
  """Counts the complete records of a TFRecord file. Bytes after them must be a torn last record
  (a frame cut short by the end of the file, or zero-filled); anything else raises
  CorruptFileError naming the record and its offset."""
  reader = tfrecord_files.RecordReader(path)
  payload = sum(len(record) for record in reader.complete_records())  # Stops at a bad frame.
  records, valid = reader.records, reader.offset
  size = os.path.getsize(path)
  if valid < size and not _is_torn(path, valid, reader.bad_frame):
    raise errors.CorruptFileError(
        f'record {records} at byte {valid} fails its checksum and {size - valid} bytes follow '
        f'it: not a torn last record; move the file away to keep the records before it',
        path=path)
  return RecordScan(records=records, valid_bytes=valid, payload_bytes=payload, file_bytes=size)


def _is_torn(path: str, offset: int, bad_frame: Optional[tfrecord_files.BadFrame]) -> bool:
  """Whether the bytes of `path` from `offset` (where `bad_frame` was found) are a frame that was
  being written when the process died: a partial header, a frame that runs past the end of the
  file, or zeros where the file system extended the file without its data."""
  if bad_frame is tfrecord_files.BadFrame.TRUNCATED:
    return True
  with open(path, 'rb') as f:  # A complete frame whose data checksum fails: only if zero-filled.
    f.seek(offset + (tfrecord_files.HEADER_BYTES
                     if bad_frame is tfrecord_files.BadFrame.DATA_CRC else 0))
    return _zeros_from(f)


def _zeros_from(f: Any) -> bool:
  while True:
    chunk = f.read(1 << 20)
    if not chunk:
      return True
    if chunk.count(0) != len(chunk):
      return False


@dataclasses.dataclass(frozen=True)
class SalvagedShard:
  """One unfinished shard file and what became of it."""
  unfinished: str  # The '.NAME.in_progress' file.
  shard: Optional[str]  # The shard its records now form; None when it held no complete record.
  records: int
  torn_bytes: int  # The torn last record's bytes, dropped.


@dataclasses.dataclass
class RecoveryReport:
  """What `recover` did to a dataset directory."""
  directory: str
  salvaged: list[SalvagedShard] = dataclasses.field(default_factory=list)
  unlisted_shards: list[str] = dataclasses.field(default_factory=list)  # Added to the metadata.
  removed_staging: list[str] = dataclasses.field(default_factory=list)  # Half-written metadata.

  @property
  def changed(self) -> bool:
    return bool(self.salvaged or self.unlisted_shards or self.removed_staging)

  @property
  def recovered_examples(self) -> int:
    return sum(shard.records for shard in self.salvaged)

  def summary(self) -> dict[str, Any]:
    return {
        'directory': self.directory,
        'recovered_episodes': self.recovered_examples,
        'salvaged': [dataclasses.asdict(shard) for shard in self.salvaged],
        'unlisted_shards': self.unlisted_shards,
        'removed_metadata_staging': self.removed_staging,
    }

  def __str__(self) -> str:
    if not self.changed:
      return f'{self.directory}: nothing to recover'
    parts = [f'{os.path.basename(s.unfinished)}: {s.records} complete episodes kept'
             f'{" in " + os.path.basename(s.shard) if s.shard else ""}, '
             f'{s.torn_bytes} bytes of a torn last record dropped' for s in self.salvaged]
    parts += [f'{os.path.basename(p)}: complete shard added to the metadata'
              for p in self.unlisted_shards]
    parts += [f'{os.path.basename(p)}: unfinished metadata staging removed'
              for p in self.removed_staging]
    return f'{self.directory}: recovered an interrupted recording: ' + '; '.join(parts)


def recover(directory: str | os.PathLike, lock: Optional[DirectoryLock] = None,
            note_provenance: bool = True) -> RecoveryReport:
  """Salvages an interrupted recording in `directory` and rewrites its metadata so it loads.

  Takes the directory's lock for the duration unless the caller holds it (`lock`); raises
  UnfinishedRecordingError if a live recording holds it. Idempotent: a directory with nothing
  unfinished is left as it is. What it changed is added to the dataset's provenance
  (`note_provenance`), so that `verify` holds. A full disk raises OutputWriteError: free space and
  run it again.
  """
  directory = os.fspath(directory)
  if not os.path.isdir(directory):
    raise errors.EmptyInputError('no such dataset directory', path=directory)
  held = lock if lock is not None else DirectoryLock(directory)
  try:
    report = _recover(directory)
    if report.changed and note_provenance:
      run_provenance.note_recovery(directory, report.summary())
    return report
  finally:
    if lock is None:
      held.release()


def _recover(directory: str) -> RecoveryReport:
  report = RecoveryReport(directory)
  names = sorted(os.listdir(directory))
  for name in names:  # Each holds a copy of metadata that was being replaced: the real files stand.
    path = os.path.join(directory, name)
    if name.startswith(shards.METADATA_STAGING_PREFIX) and os.path.isdir(path):
      shutil.rmtree(path)
      report.removed_staging.append(path)
  unfinished = [name for name in names if name.startswith('.') and
                name.endswith(shards.IN_PROGRESS_SUFFIX)]
  info = shards.read_info(directory)
  if info is None:
    if unfinished:
      raise errors.SchemaError(f'{len(unfinished)} unfinished shard files but no metadata to '
                               f'read them with', path=directory, field='dataset_info.json')
    return report
  pattern = re.compile(rf'^\.{re.escape(info.name)}-(?P<split>.+)\.tfrecord-(?P<index>\d+)'
                       rf'{re.escape(shards.IN_PROGRESS_SUFFIX)}$')
  by_split: dict[str, list[tuple[int, str]]] = {split: [] for split in info.splits.keys()}
  for name in unfinished:
    match = pattern.match(name)
    if match is None:
      raise errors.SchemaError(f'unfinished file {name} does not belong to dataset {info.name!r}',
                               path=directory)
    by_split.setdefault(match['split'], []).append((int(match['index']),
                                                    os.path.join(directory, name)))
  for split, files in by_split.items():
    _recover_split(directory, info, split, [path for _, path in sorted(files)], report)
  return report


def _recover_split(directory: str, info: tfds.core.DatasetInfo, split: str,
                   unfinished: list[str], report: RecoveryReport) -> None:
  """Appends unlisted complete shards, then each unfinished file's complete records, to `split`."""
  listed = info.splits[split] if split in info.splits else None
  lengths = list(listed.shard_lengths) if listed else []
  num_bytes = listed.num_bytes if listed else 0
  template = shards.shard_template(directory, info.name, split)

  def shard_path(index: int) -> str:
    return os.fspath(template.sharded_filepath(shard_index=index, num_shards=None))

  changed = False
  while os.path.exists(shard_path(len(lengths))):  # Renamed into place, metadata not rewritten.
    path = shard_path(len(lengths))
    scan = scan_records(path)
    if scan.torn_bytes:  # Renamed with a torn last record (by a writer before the disk-full fix).
      final = _keep_complete_records(path, scan, shard_path(len(lengths)), report)
      if final is None:
        break
    else:
      report.unlisted_shards.append(path)
    lengths.append(scan.records)
    num_bytes += scan.payload_bytes
    changed = True
  for path in unfinished:
    scan = scan_records(path)
    if _keep_complete_records(path, scan, shard_path(len(lengths)), report) is None:
      continue
    lengths.append(scan.records)
    num_bytes += scan.payload_bytes
    changed = True
  if changed:
    with shards.writing(os.path.join(directory, 'dataset_info.json')):
      shards.write_metadata(directory, info, split, lengths, num_bytes)


def _keep_complete_records(path: str, scan: RecordScan, final: str,
                           report: RecoveryReport) -> Optional[str]:
  """Trims the torn last record of `path` and renames it to `final` (it may be `path`); removes
  it if no record is complete (returns None). Reported."""
  if scan.records == 0:
    os.remove(path)  # Only a torn record: nothing to keep.
    report.salvaged.append(SalvagedShard(path, None, 0, scan.torn_bytes))
    return None
  with shards.writing(path):
    if scan.torn_bytes:
      os.truncate(path, scan.valid_bytes)
    shards.fsync(path)
    os.replace(path, final)
  report.salvaged.append(SalvagedShard(path, final, scan.records, scan.torn_bytes))
  return final
