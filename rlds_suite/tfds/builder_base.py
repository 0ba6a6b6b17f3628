"""The base class of rlds_suite's TFDS builders."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Optional

from etils import epath
import tensorflow_datasets as tfds

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


def _config_record(config: Optional[tfds.core.BuilderConfig]) -> Optional[dict[str, Any]]:
  """A builder config's fields as JSON-friendly values."""
  if config is None:
    return None
  values = ({f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
            if dataclasses.is_dataclass(config) else dict(vars(config)))
  return {key: value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)
          for key, value in values.items()}
