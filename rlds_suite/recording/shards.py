"""Crash-safe sequential TFDS shards. The open shard is a hidden '.NAME.in_progress' file that
examples are appended to as they come (`flush` hands them to the OS: TFRecord frames are
self-delimiting and checksummed, so what a killed process flushed is recoverable record by record,
see `recovery`); a complete shard is renamed into place and the metadata (dataset_info.json,
features.json with shard lengths) is rewritten, also by rename, right after. The listed shards are
therefore always complete and the metadata names exactly those, whenever the process dies.

A failed write (a full disk, a quota, an I/O error) abandons the open shard where it is, never
renaming it into place: its complete records are salvaged by `recovery` like a killed writer's.

The files follow TFDS's SequentialWriter layout ('{name}-{split}.tfrecord-{SHARD_INDEX}'), so the
directory loads with `tfds.builder_from_directory`, and a later run appends new shards.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.core import errors

_TEMPLATE = '{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_INDEX}'
IN_PROGRESS_SUFFIX = '.in_progress'
# Metadata is staged in a hidden directory with this prefix, then renamed file by file.
METADATA_STAGING_PREFIX = '.metadata-'


@contextlib.contextmanager
def writing(path: str) -> Iterator[None]:
  """Raises OutputWriteError ('disk full while writing PATH') for an OS or TensorFlow I/O error
  met in the block."""
  try:
    yield
  except errors.OutputWriteError:
    raise
  except OSError as e:
    raise errors.OutputWriteError.from_os_error(e, path) from e
  except tf.errors.OpError as e:
    raise errors.OutputWriteError.from_os_error(_as_os_error(e), path) from e


def _as_os_error(error: tf.errors.OpError) -> OSError:
  """TensorFlow's file errors carry no errno; its message ends with the OS's words."""
  message = error.message or ''
  if isinstance(error, tf.errors.ResourceExhaustedError):
    code = errno.EDQUOT if 'quota' in message.lower() else errno.ENOSPC
  elif isinstance(error, tf.errors.PermissionDeniedError):
    code = errno.EROFS if 'read-only' in message.lower() else errno.EACCES
  else:
    return OSError(errno.EIO, message.rsplit('; ', 1)[-1] or type(error).__name__)
  return OSError(code, os.strerror(code))


class ShardedDatasetWriter:
  """Appends serialized examples to one split of a TFDS dataset directory, shard by shard."""

  def __init__(self, directory: str, *, name: str, features: tfds.features.FeaturesDict,
               version: str = '1.0.0', split: str = 'train', description: str = '',
               metadata: Optional[Mapping[str, Any]] = None,
               on_metadata: Callable[[], None] = lambda: None):
    """`on_metadata` runs each time the metadata was written (a shard completed)."""
    self.directory = os.fspath(directory)
    self.split = split
    self._on_metadata = on_metadata
    with writing(self.directory):
      os.makedirs(self.directory, exist_ok=True)
    existing = read_info(self.directory)
    if existing is not None:
      _check_compatible(existing, name, features, self.directory)
      self.info = existing
      split_info = existing.splits[split] if split in existing.splits else None
      self._shard_lengths = list(split_info.shard_lengths) if split_info else []
      self._num_bytes = split_info.num_bytes if split_info else 0
    else:
      identity = tfds.core.dataset_info.DatasetIdentity(
          name=name, version=tfds.core.Version(version), data_dir=self.directory, module_name='')
      self.info = tfds.core.DatasetInfo(
          builder=identity, description=description, features=features,
          metadata=tfds.core.MetadataDict(metadata or {}), disable_shuffling=True)
      self.info.set_file_format('tfrecord')
      self._shard_lengths, self._num_bytes = [], 0
    self._template = shard_template(self.directory, self.info.name, split)
    self._check_nothing_unfinished()
    self._writer: Optional[tf.io.TFRecordWriter] = None
    self._shard_examples = 0
    self._shard_bytes = 0
    self.failed = False  # A write failed: the open shard was abandoned, nothing more is written.
    if existing is None:
      self.write_metadata()

  @property
  def num_examples(self) -> int:
    """Examples in completed shards."""
    return sum(self._shard_lengths)

  @property
  def shard_lengths(self) -> list[int]:
    return list(self._shard_lengths)

  @property
  def open_shard_examples(self) -> int:
    return self._shard_examples

  @property
  def open_shard_bytes(self) -> int:
    return self._shard_bytes

  @property
  def open_shard_path(self) -> str:
    """The hidden file the open (or next) shard is written to."""
    return in_progress_path(self._shard_path(len(self._shard_lengths)))

  def write(self, serialized: bytes) -> None:
    with self._guard(self.open_shard_path):
      if self._writer is None:
        self._writer = tf.io.TFRecordWriter(self.open_shard_path)
      self._writer.write(serialized)
    self._shard_examples += 1
    self._shard_bytes += len(serialized)

  def flush(self) -> None:
    """Hands the open shard's buffered records to the OS: they survive the process being killed."""
    if self._writer is not None:
      with self._guard(self.open_shard_path):
        self._writer.flush()

  def finish_shard(self) -> None:
    """Closes the open shard (if it has examples), renames it into place, rewrites metadata."""
    if self._writer is None:
      return
    final = self._shard_path(len(self._shard_lengths))
    with self._guard(in_progress_path(final)):
      self._writer.flush()
      self._writer.close()
      self._writer = None
      fsync(in_progress_path(final))
      os.replace(in_progress_path(final), final)
    self._shard_lengths.append(self._shard_examples)
    self._num_bytes += self._shard_bytes
    self._shard_examples = self._shard_bytes = 0
    self.write_metadata()

  def write_metadata(self) -> None:
    """Writes dataset_info.json and features.json for the completed shards, each by rename."""
    with self._guard(os.path.join(self.directory, 'dataset_info.json')):
      write_metadata(self.directory, self.info, self.split, self._shard_lengths, self._num_bytes)
    self._on_metadata()

  def close(self) -> None:
    if not self.failed:
      self.finish_shard()

  @contextlib.contextmanager
  def _guard(self, path: str) -> Iterator[None]:
    """On a write error: abandons the open shard unrenamed (its torn last record is for
    `recovery` to trim), stops writing, raises OutputWriteError."""
    if self.failed:
      raise errors.OutputWriteError('an earlier write failed: nothing more is written',
                                    path=self.directory)
    try:
      with writing(path):
        yield
    except errors.OutputWriteError:
      self.abandon()
      raise

  def abandon(self) -> None:
    """Stops writing: closes the open shard where it is (unrenamed, for `recovery`)."""
    self.failed = True
    writer, self._writer = self._writer, None
    if writer is not None:
      with contextlib.suppress(Exception):  # Its buffered records reach the file if they can.
        writer.close()

  def _shard_path(self, index: int) -> str:
    return os.fspath(self._template.sharded_filepath(shard_index=index, num_shards=None))

  def _check_nothing_unfinished(self) -> None:
    """Refuses to write over what an interrupted run left: `recovery.recover` salvages it first."""
    path = self._shard_path(len(self._shard_lengths))
    for leftover in (path, in_progress_path(path)):
      if os.path.exists(leftover):
        raise errors.UnfinishedRecordingError(
            f'{os.path.basename(leftover)} is not listed in the metadata: an interrupted recording '
            f'left it; run rlds-suite recover', path=self.directory)


def shard_template(directory: str, name: str, split: str) -> tfds.core.ShardedFileTemplate:
  return tfds.core.ShardedFileTemplate(data_dir=directory, template=_TEMPLATE, dataset_name=name,
                                       split=split, filetype_suffix='tfrecord')


def write_metadata(directory: str, info: tfds.core.DatasetInfo, split: str,
                   shard_lengths: Sequence[int], num_bytes: int) -> None:
  """Rewrites dataset_info.json and features.json of `directory` so that `split` lists
  `shard_lengths`; each file is staged, fsynced and renamed into place."""
  split_info = tfds.core.SplitInfo(
      name=split, shard_lengths=list(shard_lengths), num_bytes=num_bytes,
      filename_template=shard_template(directory, info.name, split))
  others = [value for key, value in info.splits.items() if key != split]
  info.set_splits(tfds.core.SplitDict(others + [split_info]))
  staging = tempfile.mkdtemp(prefix=METADATA_STAGING_PREFIX, dir=directory)
  try:
    info.write_to_directory(staging)  # A full disk raises here, before any file is replaced.
    for filename in sorted(os.listdir(staging)):
      source = os.path.join(staging, filename)
      fsync(source)
      os.replace(source, os.path.join(directory, filename))
  finally:
    shutil.rmtree(staging, ignore_errors=True)


def read_info(directory: str) -> Optional[tfds.core.DatasetInfo]:
  """The metadata of the dataset in `directory`, or None if it has none yet."""
  if not os.path.exists(os.path.join(directory, 'dataset_info.json')):
    return None
  try:
    return tfds.builder_from_directory(directory).info
  except Exception as e:  # pylint: disable=broad-except
    raise errors.SchemaError(f'existing metadata does not load: {e}',
                             path=directory) from e


def _check_compatible(info: tfds.core.DatasetInfo, name: str,
                      features: tfds.features.FeaturesDict, directory: str) -> None:
  if info.name != name:
    raise errors.SpecMismatchError(f'cannot append dataset {name!r} to dataset {info.name!r}',
                                   path=directory)
  if repr(info.features) != repr(features):
    raise errors.SpecMismatchError(
        f'cannot append: features differ.\nexisting: {info.features!r}\nnew: {features!r}',
        path=directory, field='features.json')


def in_progress_path(path: str) -> str:
  """The hidden name a shard has while it is written."""
  return os.path.join(os.path.dirname(path), '.' + os.path.basename(path) + IN_PROGRESS_SUFFIX)


def fsync(path: str) -> None:
  with open(path, 'rb') as f:
    os.fsync(f.fileno())
