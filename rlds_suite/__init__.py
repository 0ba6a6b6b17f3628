"""rlds_suite: RL and imitation-learning demonstrations as RLDS datasets.

`import rlds_suite` registers every builder in rlds_suite.builders with TFDS.
"""

import pathlib as _pathlib

# Installed, the builder folders are the subpackage rlds_suite/builders; in a source tree (Bazel's
# runfiles, or a checkout on PYTHONPATH) they sit beside the package as builders/.
if not (_pathlib.Path(__file__).parent / 'builders').is_dir():
  __path__.append(str(_pathlib.Path(__file__).parent.parent))  # pylint: disable=undefined-variable

from rlds_suite.core import errors
from rlds_suite.tfds.datasets import validate
from rlds_suite.core.episodes import Ending, Episode, Trajectory

from rlds_suite import builders  # Registers the TFDS builders.  # pylint: disable=g-bad-import-order

__all__ = ['errors', 'validate', 'Ending', 'Episode', 'Trajectory', 'builders', 'RLDSWriter',
           'record', 'streams', 'stream', 'load_dict_dataset', 'as_numpy', 'write_episodes']

# Recording pulls in envlogger; it is imported on first use of these names.
_LAZY = {'RLDSWriter': 'rlds_suite.recording', 'record': 'rlds_suite.recording',
         'stream': 'rlds_suite.streams', 'load_dict_dataset': 'rlds_suite.streams',
         'as_numpy': 'rlds_suite.streams', 'write_episodes': 'rlds_suite.tfds.writing'}


def __getattr__(name):
  if name in _LAZY:
    import importlib  # pylint: disable=g-import-not-at-top
    return getattr(importlib.import_module(_LAZY[name]), name)
  if name == 'streams':
    import importlib  # pylint: disable=g-import-not-at-top
    return importlib.import_module('rlds_suite.streams')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
