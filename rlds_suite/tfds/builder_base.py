"""The base class of rlds_suite's TFDS builders."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from typing import Any, Callable, Iterator, Optional

from etils import epath
import tensorflow_datasets as tfds

import rlds_suite

from rlds_suite.core import progress
from rlds_suite.tfds import provenance


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

  def download_and_prepare(self, *, download_dir: Optional[str] = None,
                           download_config: Optional[tfds.download.DownloadConfig] = None,
                           **kwargs: Any) -> None:
    """TFDS's preparation, then the dataset's provenance (tfds/provenance.py) once it is complete."""
    super().download_and_prepare(download_dir=download_dir, download_config=download_config,
                                 **kwargs)
    directory = str(self.data_dir)
    if not (epath.Path(directory) / provenance.FILE_NAME).exists():
      manual_dir = download_config.manual_dir if download_config else None
      provenance.write(directory, source_root=manual_dir and str(manual_dir), produced_by={
          'builder': self.name, 'version': str(self.version),
          'config': _config_record(self.builder_config)})


def _with_progress(split_generators: Callable[..., Any]) -> Callable[..., Any]:
  """Wraps each split's example generator (not Beam transforms) in a progress bar."""

  @functools.wraps(split_generators)
  def wrapped(self, *args: Any, **kwargs: Any) -> Any:
    splits = split_generators(self, *args, **kwargs)
    if not isinstance(splits, dict):
      return splits
    return {split: _progress(examples, f'{self.name} {split}')
            if isinstance(examples, types.GeneratorType) else examples
            for split, examples in splits.items()}

  return wrapped


def _progress(examples: Iterator[Any], description: str) -> Iterator[Any]:
  """Passes examples through, showing episodes, steps and steps/s on a terminal (tqdm)."""
  from tqdm import auto  # pylint: disable=g-import-not-at-top
  steps = 0
  with auto.tqdm(desc=description, unit=' episodes', disable=None) as bar:
    for key_and_example in examples:
      example = key_and_example[1] if isinstance(key_and_example, tuple) else key_and_example
      steps += _num_steps(example)
      progress.count_episode(bar, steps)
      yield key_and_example


def _num_steps(example: Any) -> int:
  steps = example.get('steps') if isinstance(example, dict) else None
  if isinstance(steps, list):
    return len(steps)
  if isinstance(steps, dict):
    for leaf in steps.values():
      if hasattr(leaf, '__len__') and not isinstance(leaf, dict):
        return len(leaf)
  return 0


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
