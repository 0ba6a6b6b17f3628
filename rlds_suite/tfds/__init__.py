"""The TensorFlow Datasets edge: feature declarations, the builder base, the one writer of
in-memory episodes, and finding, building, reading and validating datasets."""

import importlib as _importlib
import pathlib as _pathlib


def __getattr__(name):
  """`rlds_suite.tfds.datasets` and the like work after `import rlds_suite` alone."""
  if (_pathlib.Path(__file__).parent / f'{name}.py').exists():
    return _importlib.import_module(f'{__name__}.{name}')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
