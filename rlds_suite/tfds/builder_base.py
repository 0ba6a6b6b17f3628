"""The base class of rlds_suite's TFDS builders."""

from __future__ import annotations

import inspect

from etils import epath
import tensorflow_datasets as tfds


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
