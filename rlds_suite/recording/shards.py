"""Crash-safe sequential TFDS shards: each shard is written to a hidden temporary file and renamed
into place when complete, and the metadata (dataset_info.json, features.json with shard lengths) is
rewritten, also by rename, right after. A directory therefore always holds complete shards and
metadata naming exactly those shards, whenever the process dies.

The files follow TFDS's SequentialWriter layout ('{name}-{split}.tfrecord-{SHARD_INDEX}'), so the
directory loads with `tfds.builder_from_directory`, and a later run appends new shards.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Mapping, Optional

import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.core import errors

_TEMPLATE = '{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_INDEX}'
_IN_PROGRESS = '.in_progress'


class ShardedDatasetWriter:
  """Appends serialized examples to one split of a TFDS dataset directory, shard by shard."""

  def __init__(self, directory: str, *, name: str, features: tfds.features.FeaturesDict,
               version: str = '1.0.0', split: str = 'train', description: str = '',
               metadata: Optional[Mapping[str, Any]] = None):
    self.directory = os.fspath(directory)
    self.split = split
    os.makedirs(self.directory, exist_ok=True)
    self._remove_in_progress_files()
    existing = _existing_info(self.directory)
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
    self._template = tfds.core.ShardedFileTemplate(
        data_dir=self.directory, template=_TEMPLATE, dataset_name=self.info.name,
        split=split, filetype_suffix='tfrecord')
    self._recover_unlisted_shards()
    self._writer: Optional[tf.io.TFRecordWriter] = None
    self._shard_examples = 0
    self._shard_bytes = 0
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

  def write(self, serialized: bytes) -> None:
    if self._writer is None:
      self._writer = tf.io.TFRecordWriter(_in_progress(self._shard_path(len(self._shard_lengths))))
    self._writer.write(serialized)
    self._shard_examples += 1
    self._shard_bytes += len(serialized)

  def finish_shard(self) -> None:
    """Closes the open shard (if it has examples), renames it into place, rewrites metadata."""
    if self._writer is None:
      return
    self._writer.flush()
    self._writer.close()
    self._writer = None
    final = self._shard_path(len(self._shard_lengths))
    _fsync(_in_progress(final))
    os.replace(_in_progress(final), final)
    self._shard_lengths.append(self._shard_examples)
    self._num_bytes += self._shard_bytes
    self._shard_examples = self._shard_bytes = 0
    self.write_metadata()

  def write_metadata(self) -> None:
    """Writes dataset_info.json and features.json for the completed shards, each by rename."""
    split_info = tfds.core.SplitInfo(
        name=self.split, shard_lengths=list(self._shard_lengths), num_bytes=self._num_bytes,
        filename_template=self._template)
    others = [info for key, info in self.info.splits.items() if key != self.split]
    self.info.set_splits(tfds.core.SplitDict(others + [split_info]))
    staging = tempfile.mkdtemp(prefix='.metadata-', dir=self.directory)
    try:
      self.info.write_to_directory(staging)
      for filename in sorted(os.listdir(staging)):
        source = os.path.join(staging, filename)
        _fsync(source)
        os.replace(source, os.path.join(self.directory, filename))
    finally:
      shutil.rmtree(staging, ignore_errors=True)

  def close(self) -> None:
    self.finish_shard()

  def _shard_path(self, index: int) -> str:
    return os.fspath(self._template.sharded_filepath(shard_index=index, num_shards=None))

  def _remove_in_progress_files(self) -> None:
    """Drops what a killed run left unfinished: open shards and staged metadata."""
    for filename in os.listdir(self.directory):
      path = os.path.join(self.directory, filename)
      if filename.startswith('.') and filename.endswith(_IN_PROGRESS):
        os.remove(path)
      elif filename.startswith('.metadata-') and os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)

  def _recover_unlisted_shards(self) -> None:
    """Adds complete shards renamed into place by a run killed before it rewrote the metadata."""
    recovered = False
    while os.path.exists(self._shard_path(len(self._shard_lengths))):
      path = self._shard_path(len(self._shard_lengths))
      records = [len(r.numpy()) for r in tf.data.TFRecordDataset(path)]
      self._shard_lengths.append(len(records))
      self._num_bytes += sum(records)
      recovered = True
    if recovered:
      self.write_metadata()


def _existing_info(directory: str) -> Optional[tfds.core.DatasetInfo]:
  if not os.path.exists(os.path.join(directory, 'dataset_info.json')):
    return None
  try:
    return tfds.builder_from_directory(directory).info
  except Exception as e:  # pylint: disable=broad-except
    raise errors.SchemaError(f'cannot append: existing metadata does not load: {e}',
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


def _in_progress(path: str) -> str:
  """The hidden name a shard has while it is written."""
  return os.path.join(os.path.dirname(path), '.' + os.path.basename(path) + _IN_PROGRESS)


def _fsync(path: str) -> None:
  with open(path, 'rb') as f:
    os.fsync(f.fileno())
