"""rlds_suite: RL and imitation-learning demonstrations as RLDS datasets.

`import rlds_suite` registers every builder in rlds_suite.builders with TFDS. Importing TensorFlow
takes seconds, so the registration runs when `tensorflow_datasets` is imported (at once if it
already is); the other heavy names below load on first use.
"""

import importlib as _importlib
import pathlib as _pathlib

# Installed, the builder folders are the subpackage rlds_suite/builders; in a source tree (Bazel's
# runfiles, or a checkout on PYTHONPATH) they sit beside the package as builders/.
if not (_pathlib.Path(__file__).parent / 'builders').is_dir():
  __path__.append(str(_pathlib.Path(__file__).parent.parent))  # pylint: disable=undefined-variable

from rlds_suite.compat import post_import as _post_import
from rlds_suite.compat import quiet_tensorflow as _quiet_tensorflow
from rlds_suite.core import errors
from rlds_suite.core.episodes import Ending, Episode, Trajectory

__version__ = '0.1.0'

__all__ = ['errors', 'validate', 'Ending', 'Episode', 'Trajectory', 'builders', 'RLDSWriter',
           'record', 'streams', 'stream', 'load_dict_dataset', 'as_numpy', 'write_episodes']

_quiet_tensorflow.quiet_by_default()

_registration_deferred = False


def register_builders(finishing: str = '') -> None:
  """Imports rlds_suite.builders (registering them with TFDS) unless the TFDS-edge modules they
  import are still being imported: then the last of those to finish (or `finishing`, the module
  calling this from its last line) registers them."""
  global _registration_deferred
  import sys  # pylint: disable=g-import-not-at-top
  if 'tensorflow_datasets' not in sys.modules:
    return
  for name, module in list(sys.modules.items()):
    spec = getattr(module, '__spec__', None)
    if (name.startswith(('rlds_suite.tfds.', 'rlds_suite.builders')) and name != finishing
        and getattr(spec, '_initializing', False)):
      _registration_deferred = True
      return
  _registration_deferred = False
  _importlib.import_module('rlds_suite.builders')


def register_deferred_builders(finishing: str) -> None:
  """Called last by the modules builders import: registers builders if that was put off."""
  if _registration_deferred:
    register_builders(finishing)


# Names that pull in TensorFlow or EnvLogger, imported on first use.
_LAZY = {'validate': 'rlds_suite.tfds.datasets', 'RLDSWriter': 'rlds_suite.recording',
         'record': 'rlds_suite.recording', 'stream': 'rlds_suite.streams',
         'load_dict_dataset': 'rlds_suite.streams', 'as_numpy': 'rlds_suite.streams',
         'write_episodes': 'rlds_suite.tfds.writing'}


def __getattr__(name):
  if name in _LAZY:
    return getattr(_importlib.import_module(_LAZY[name]), name)
  # Subpackages (rlds_suite.streams, .tfds, .builders, ...), wherever __path__ finds them.
  if any((_pathlib.Path(path) / name / '__init__.py').exists() for path in __path__):
    return _importlib.import_module(f'{__name__}.{name}')
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


_post_import.when_imported('tensorflow_datasets', lambda _: register_builders())
# EnvLogger's own Riegeli backend needs its codec fixed on numpy 2 (compat/envlogger_compat.py).
_post_import.when_imported(
    'envlogger.converters.codec',
    lambda _: _importlib.import_module('rlds_suite.compat.envlogger_compat').patch_envlogger_codec())
# ... and its BackendWriter.__del__ not to close a writer whose constructor raised (same module).
_post_import.when_imported(
    'envlogger.backends.backend_writer',
    lambda _: _importlib.import_module('rlds_suite.compat.envlogger_compat').patch_backend_writer_del())
