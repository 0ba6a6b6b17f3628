"""The base class of rlds_suite's TFDS builders."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import os
import sys
import time
import shutil
import types
from typing import Any, Callable, Optional

from etils import epath
import tensorflow_datasets as tfds

import rlds_suite

from rlds_suite.core import progress
from rlds_suite.tfds import provenance
from rlds_suite.tfds import writing


class RLDSBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """A GeneratorBasedBuilder whose folder (README, CITATIONS, checksums, dummy_data) is found.

  Builder folders live in builders/ and are installed as rlds_suite.builders.NAME; TFDS's
  module-based lookup of a builder's folder misses them in editable installs, so each subclass
  records the file it is defined in.
  """
  VERSION = tfds.core.Version('1.0.0')
  RELEASE_NOTES = {'1.0.0': 'Initial release.'}

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    cls.code_path = epath.Path(inspect.getfile(cls))
    cls.pkg_dir_path = cls.code_path.parent
    if '_split_generators' in cls.__dict__:
      cls._split_generators = _with_progress(cls.__dict__['_split_generators'])

  # Non-Beam splits are written by rlds_suite.tfds.writing: worker processes (None: one per core)
  # and the serialized bytes per shard.
  writer_workers: Optional[int] = None
  writer_shard_bytes: int = writing.SHARD_BYTES
  # True: TFDS's own writer instead (per-example encoding, shuffling; not resumable), kept so that
  # benchmarks can compare both in one run.
  tfds_writer: bool = False

  def _log_download_bytes(self) -> None:
    """TFDS prints 'Downloading and preparing dataset Unknown size ...' before every build: a
    conversion of local files downloads nothing, so only downloads are announced."""
    if self.info.download_size:
      super()._log_download_bytes()

  def _log_download_done(self) -> None:
    if self.info.download_size:
      super()._log_download_done()

  def download_and_prepare(self, *, download_dir: Optional[str] = None,
                           download_config: Optional[tfds.download.DownloadConfig] = None,
                           **kwargs: Any) -> None:
    """TFDS's preparation, then the dataset's provenance (tfds/provenance.py) once it is complete.

    Non-Beam splits resume after a kill (tfds/writing.py): the work directory is removed once the
    dataset is in place, kept when shards are complete, and an empty one is not left behind.
    """
    self._final_data_dir = os.fspath(self.data_dir)
    self._work: Optional[writing.WorkDir] = None
    _remove_empty_incomplete_dirs(os.path.dirname(self._final_data_dir))
    try:
      super().download_and_prepare(download_dir=download_dir, download_config=download_config,
                                   **kwargs)
    except BaseException:
      if self._work is not None and self._work.progress.num_shards:
        self._work.release()
      else:
        if self._work is not None:
          self._work.remove()
        _remove_empty_parents(os.path.dirname(self._final_data_dir),
                              stop=os.fspath(self._data_dir_root))
      raise
    if self._work is not None:
      self._work.remove()
    else:
      writing.WorkDir.discard_stale(self._final_data_dir)
    directory = str(self.data_dir)
    if not (epath.Path(directory) / provenance.FILE_NAME).exists():
      manual_dir = download_config.manual_dir if download_config else None
      provenance.write(directory, source_root=manual_dir and str(manual_dir), produced_by={
          'builder': self.name, 'version': str(self.version),
          'config': _config_record(self.builder_config)})


  def _generate_splits(self, dl_manager: tfds.download.DownloadManager,
                       download_config: tfds.download.DownloadConfig) -> list[Any]:
    """Splits given as example generators are written by rlds_suite.tfds.writing (resumable,
    parallel); anything else (Beam transforms) the way TFDS writes it."""
    splits = self._split_generators(dl_manager)
    if self.tfds_writer or not (isinstance(splits, dict) and splits and all(
        isinstance(examples, (types.GeneratorType, list, tuple)) for examples in splits.values())):
      return super()._generate_splits(dl_manager, download_config)
    self.info.as_proto.disable_shuffling = True  # Written in the order generated.
    self._work = writing.WorkDir(self._final_data_dir, self._resume_identity(dl_manager),
                                 in_use=os.fspath(self.data_dir))
    progress = self._work.progress
    if progress.num_shards:
      print(f'resuming: {progress.num_shards} shards done ({progress.num_examples} episodes) in '
            f'{self._work.path}', file=sys.stderr, flush=True)
    for split, examples in splits.items():
      writing.write_split(examples, features=self.info.features, work=self._work, split=split,
                          workers=self.writer_workers, shard_bytes=self.writer_shard_bytes)
    return [writing.publish_split(self._work, split, self._get_filename_template(split),
                                  os.fspath(self.data_dir)) for split in splits]

  def _resume_identity(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
    """What must match for a build to continue another's shards: builder, config, version,
    features, the builder's settings, and the source files (names, sizes, times)."""
    settings = {key: repr(value) for key, value in sorted(vars(self).items())
                if isinstance(value, (bool, int, float, str, tuple, type(None)))
                and not key.startswith(('_data_dir', '_final_data_dir', '_work'))}
    return {'builder': self.name, 'config': repr(self.builder_config),
            'version': str(self.version), 'settings': settings,
            'features': hashlib.sha256(repr(self.info.features).encode()).hexdigest(),
            'source': _source_fingerprint(dl_manager)}


def _source_fingerprint(dl_manager: tfds.download.DownloadManager) -> Optional[str]:
  """A hash of the manual_dir's file names, sizes and modification times (None without one)."""
  try:
    root = dl_manager.manual_dir
  except Exception:  # pylint: disable=broad-except  # TFDS asserts a manual_dir was given.
    return None
  digest = hashlib.sha256()
  for directory, _, names in sorted(os.walk(os.fspath(root))):
    for name in sorted(names):
      path = os.path.join(directory, name)
      with contextlib.suppress(OSError):
        stat = os.stat(path)
        digest.update(f'{os.path.relpath(path, root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n'.encode())
  return digest.hexdigest()


def _remove_empty_incomplete_dirs(parent: str, min_age_s: float = 60.0) -> None:
  """Empty `incomplete.*` directories that killed builds (Beam ones too) left in `parent`; one
  younger than `min_age_s` may belong to a build starting now, and is left."""
  with contextlib.suppress(OSError):
    for entry in os.scandir(parent):
      if (entry.name.startswith('incomplete.') and entry.is_dir() and
          time.time() - entry.stat().st_mtime > min_age_s):
        with contextlib.suppress(OSError):  # Not empty: not ours to judge here.
          os.rmdir(entry.path)


def _remove_empty_parents(directory: str, stop: str) -> None:
  """Removes `directory` and its parents up to (not including) `stop` while they hold nothing but
  TFDS's `.config` bookkeeping."""
  directory, stop = os.path.abspath(directory), os.path.abspath(stop)
  while directory.startswith(stop + os.sep) and os.path.isdir(directory):
    entries = set(os.listdir(directory))
    if entries - {'.config'}:
      return
    shutil.rmtree(directory, ignore_errors=True)
    directory = os.path.dirname(directory)


def _with_progress(split_generators: Callable[..., Any]) -> Callable[..., Any]:
  """Wraps each split's example generator (not Beam transforms) in a progress bar, out of the
  totals the builder declared with `progress.expect` where it knows them."""

  @functools.wraps(split_generators)
  def wrapped(self, *args: Any, **kwargs: Any) -> Any:
    splits = split_generators(self, *args, **kwargs)
    if not isinstance(splits, dict):
      return splits
    return {split: progress.episodes(examples, progress.expected(examples), f'{self.name} {split}')
            if isinstance(examples, types.GeneratorType) else examples
            for split, examples in splits.items()}

  return wrapped


def _config_record(config: Optional[tfds.core.BuilderConfig]) -> Optional[dict[str, Any]]:
  """A builder config's fields as JSON-friendly values."""
  if config is None:
    return None
  values = ({f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
            if dataclasses.is_dataclass(config) else dict(vars(config)))
  return {key: value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
          for key, value in values.items()}


# Builders import this module: if registering them was put off while it was imported, do it now.
rlds_suite.register_deferred_builders(__name__)
