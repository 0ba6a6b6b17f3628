"""Finding and reading RLDS datasets: registered TFDS names, dataset directories, tf.data episodes.

TensorFlow is imported only where tf.data is used: building and validating a dataset our writers
wrote (`rlds-suite build`) reads its shards with `shard_reader` in numpy instead.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Optional, Union

from etils import epath
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.core import progress
from rlds_suite.core import spaces
from rlds_suite.core import validation
from rlds_suite.core.episodes import Episode
from rlds_suite.tfds import beam
from rlds_suite.tfds import registry
from rlds_suite.tfds import shard_reader

if TYPE_CHECKING:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

Source = Union[str, os.PathLike, tfds.core.DatasetBuilder]


def load_builder(source: Source, data_dir: Optional[str] = None) -> tfds.core.DatasetBuilder:
  """A prepared builder from a TFDS name ('magical_demos/move_to_region') or a dataset directory."""
  if isinstance(source, tfds.core.DatasetBuilder):
    return source
  path = os.fspath(source)
  if os.path.isdir(path):
    try:
      builder = tfds.builder_from_directory(_version_dir(path))
    except errors.RLDSSuiteError:
      raise
    except Exception as e:  # pylint: disable=broad-except
      raise errors.SchemaError(f'not a TFDS dataset directory: {e}', path=path) from e
    if not any(split.num_examples for split in builder.info.splits.values()):
      # What a recorder leaves before its first shard completes (TFDS: 'Instruction [] corresponds
      # to no data!').
      raise errors.UnfinishedRecordingError(
          f'no complete shard yet: recording in progress or interrupted: run rlds-suite recover '
          f'{path}', path=path)
    return builder
  _check_not_a_file(path, 'a dataset directory or a registered dataset name')
  registry.check_name(path)
  try:
    builder = tfds.builder(path, data_dir=data_dir)
  except Exception as e:  # pylint: disable=broad-except
    raise errors.SchemaError(f'no such registered dataset or directory: {e}', path=path) from e
  if not builder.is_prepared():
    raise errors.SchemaError(
        f'dataset is not prepared in {builder.data_dir}; build it first (rlds-suite build or '
        f'tfds build)', path=path)
  return builder


def build(name: str, manual_dir: Optional[str] = None, data_dir: Optional[str] = None,
          beam_options: Any = None, **builder_kwargs: Any) -> tfds.core.DatasetBuilder:
  """Prepares the registered dataset `name` ('builder/config'), reading native files from
  `manual_dir`; `builder_kwargs` go to the builder (e.g. d4rl's time_limit), `beam_options`
  (PipelineOptions or a function making them, as `beam.options_for` yields; default: the
  DirectRunner) to Beam builders. Apache Beam (~3 s to import) is imported only for a builder that
  needs it. A failed build leaves only TFDS's `incomplete.*` directory behind."""
  registry.check_name(name)
  if manual_dir is not None:
    _check_not_a_file(manual_dir, 'a directory of native files (--manual_dir)')
  if manual_dir is not None and not any(os.scandir(manual_dir) if os.path.isdir(manual_dir) else ()):
    # TFDS itself stops on an empty manual_dir with a bare AssertionError.
    raise errors.EmptyInputError('manual_dir is missing or empty', path=manual_dir)
  builder = tfds.builder(name, data_dir=data_dir, **builder_kwargs)
  if not beam.needs_beam(builder):
    config = tfds.download.DownloadConfig(manual_dir=manual_dir)
  else:  # DirectRunner options by default: TFDS asks on stdin without any.
    config = beam.download_config(
        manual_dir, beam_options=beam_options() if callable(beam_options) else beam_options)
  builder.download_and_prepare(download_config=config)
  return builder


def _check_not_a_file(path: str, expected: str) -> None:
  if os.path.isfile(path):
    raise errors.SchemaError(f'is a file; expected {expected}', path=path)


def _version_dir(path: str) -> str:
  """The directory holding dataset_info.json: `path` itself or its newest version sub-directory."""
  if (epath.Path(path) / 'dataset_info.json').exists():
    return path
  candidates = []
  for root, _, files in os.walk(path):
    if 'dataset_info.json' in files:
      candidates.append(root)
  if not candidates:
    raise errors.EmptyInputError('no dataset_info.json below this directory', path=path)
  return sorted(candidates)[-1]


def episodes(source: Source, split: Optional[str] = None,
             data_dir: Optional[str] = None) -> tf.data.Dataset:
  """The episodes of every split (or of `split`) as a tf.data.Dataset of RLDS episodes."""
  builder = load_builder(source, data_dir)
  if split is None:
    split = '+'.join(sorted(builder.info.splits.keys()))
  return builder.as_dataset(split=split)


def numpy_episodes(dataset: tf.data.Dataset) -> Iterator[dict[str, Any]]:
  """Episodes as numpy dicts whose 'steps' hold one array row per step.

  Step fields of varying shape (e.g. variable-length sequences) become object arrays with one
  value per step.
  """
  tf = _tf()
  step_specs = tf.nest.flatten(dataset.element_spec[fields.STEPS].element_spec)
  if not all(spec.shape.is_fully_defined() for spec in step_specs):
    for episode in dataset:
      rows = list(tfds.as_numpy(episode[fields.STEPS]))
      metadata = {k: v for k, v in episode.items() if k != fields.STEPS}
      yield {**tfds.as_numpy(metadata), fields.STEPS: nested.stack_rows_allowing_ragged(rows)}
    return

  def batch_steps(episode):
    steps = episode[fields.STEPS]
    return {**episode, fields.STEPS: steps.batch(2**31 - 1).get_single_element()}

  yield from tfds.as_numpy(dataset.map(batch_steps))


def validate(source: Union[Source, tf.data.Dataset, Iterable[Episode | Mapping[str, Any]]],
             split: Optional[str] = None, data_dir: Optional[str] = None,
             progress_bar: bool = False) -> validation.ValidationReport:
  """Validates episodes given as a name, a directory, a builder, a tf.data.Dataset or numpy
  episodes; `progress_bar` counts a dataset's episodes out of their total on a terminal. A dataset
  whose features `shard_reader` decodes is read in numpy, one episode at a time (no TensorFlow)."""
  if 'tensorflow' in sys.modules and isinstance(source, _tf().data.Dataset):
    return validation.validate_episodes(numpy_episodes(source))
  if isinstance(source, (str, os.PathLike, tfds.core.DatasetBuilder)):
    builder = load_builder(source, data_dir)
    name = builder.info.full_name
    found = (shard_reader.read_episodes(builder.info, split)
             if shard_reader.can_read(builder.info, split) else read_episodes(builder, split))
    if progress_bar:
      found = progress.episodes(found, progress.split_total(builder.info.splits, split), 'validate')
    return validation.validate_episodes(found, name=name,
                                        declared=spaces.from_metadata(builder.info.metadata))
  return validation.validate_episodes(source)


def read_episodes(source: Source, split: Optional[str] = None, data_dir: Optional[str] = None,
                  skip: int = 0, take: Optional[int] = None) -> Iterator[dict[str, Any]]:
  """`numpy_episodes` of a dataset's episodes (`skip` first, at most `take`); a corrupt or
  truncated shard raises CorruptFileError naming it (TF's DataLossError names no file)."""
  builder = load_builder(source, data_dir)
  dataset = episodes(builder, split).skip(skip)
  if take is not None:
    dataset = dataset.take(take)
  try:
    yield from numpy_episodes(dataset)
  except _shard_read_errors() as e:
    splits = [split] if split else list(builder.info.splits.keys())
    files = [os.fspath(path) for name in splits for path in builder.info.splits[name].filepaths]
    raise corrupt_shard_error(files, e, builder.info.full_name) from None


def _tf() -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,redefined-outer-name
  return tf


def _shard_read_errors() -> tuple[type[Exception], ...]:
  """What reading a prepared dataset's TFRecord shards raises when one is damaged or missing."""
  tf = _tf()
  return (tf.errors.DataLossError, tf.errors.NotFoundError)


def __getattr__(name: str) -> Any:
  """SHARD_READ_ERRORS, which needs TensorFlow, on first use."""
  if name == 'SHARD_READ_ERRORS':
    return _shard_read_errors()
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def corrupt_shard_error(files: Iterable[str], error: 'tf.errors.OpError', name: str,
                        **read_options: Any) -> errors.CorruptFileError:
  """The typed error for a SHARD_READ_ERRORS error met reading `files` of dataset `name`: it
  names the first file that is missing or does not read back (`read_options` as
  TFRecordDataset's)."""
  missing = _missing_shard_error(files, name)
  if missing is not None:
    return missing
  located = locate_corrupt_file(files, **read_options)
  if located is None:
    return errors.CorruptFileError(f'a TFRecord shard is corrupt: {_op_error_text(error)}',
                                   path=name)
  return errors.CorruptFileError(f'corrupt TFRecord shard of {name}: {located[1]}',
                                 path=located[0])


def check_shards(builder: tfds.core.DatasetBuilder, splits: Iterable[str]) -> None:
  """Raises the typed error naming the first missing shard file of `splits`, if any (before
  anything reads them: TF's NotFoundError names no dataset)."""
  files = [os.fspath(path) for name in splits for path in builder.info.splits[name].filepaths]
  missing = _missing_shard_error(files, builder.info.full_name)
  if missing is not None:
    raise missing


def _missing_shard_error(files: Iterable[str], name: str) -> Optional[errors.CorruptFileError]:
  missing = [path for path in dict.fromkeys(files) if not epath.Path(path).exists()]
  if not missing:
    return None
  more = f' ({len(missing) - 1} more missing)' if len(missing) > 1 else ''
  return errors.CorruptFileError(f'missing TFRecord shard of {name} (deleted or moved?){more}',
                                 path=missing[0])


def locate_corrupt_file(files: Iterable[str], compression_type: Optional[str] = None,
                        buffer_size: Optional[int] = None) -> Optional[tuple[str, str]]:
  """(file, problem) of the first of `files` whose TFRecord frames do not all read back, or None."""
  tf = _tf()
  for path in dict.fromkeys(files):
    try:
      tf.data.TFRecordDataset(path, compression_type=compression_type,
                              buffer_size=buffer_size).reduce(
                                  tf.constant(0, tf.int64), lambda count, _: count + 1)
    except (*_shard_read_errors(), tf.errors.OutOfRangeError) as e:
      return path, _op_error_text(e)
  return None


def _op_error_text(error: 'tf.errors.OpError') -> str:
  """A TensorFlow error's own words, without its function-node prefix and op suffix."""
  text = re.sub(r'\{\{.*?\}\}\s*', '', error.message.splitlines()[0])
  return text.split(' [Op:')[0].strip()
