"""The one place that makes `rlds` importable on TF 2.21, where dm-reverb cannot load.

rlds 0.1.8 imports `reverb` at the top of rlds/transformations/pattern.py, and only
`pattern_map`/`pattern_map_from_transform` use it. When reverb is importable we use it untouched.
Otherwise rlds is imported against a stand-in whose every call raises MissingDependencyError, and
the stand-in is removed from sys.modules afterwards so no other library mistakes it for reverb.

Use `from rlds_suite.compat.rlds_compat import rlds` instead of `import rlds`.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from rlds_suite.core import errors

REVERB_MISSING_MESSAGE = (
    'rlds.transformations.pattern_map needs dm-reverb, which is not importable here (dm-reverb 0.14 '
    'cannot load on TensorFlow 2.21). Every other rlds transformation works without it; for '
    'windows and transitions use rlds_suite streams instead.')


class _MissingReverb(types.ModuleType):
  """Stands in for `reverb` and any attribute path below it; calling anything raises."""

  def __init__(self, path: str = 'reverb'):
    super().__init__(path)
    self._path = path

  def __getattr__(self, name: str) -> Any:
    if name.startswith('__'):
      raise AttributeError(name)
    return _MissingReverb(f'{self._path}.{name}')

  def __call__(self, *args, **kwargs):
    raise errors.MissingDependencyError(f'{REVERB_MISSING_MESSAGE} (called {self._path})')


def _reverb_importable() -> bool:
  try:
    import reverb  # pylint: disable=g-import-not-at-top,unused-import
    return True
  except Exception:  # pylint: disable=broad-except
    # ImportError when absent; dm-reverb 0.14 on TF 2.21 fails with other errors while loading.
    sys.modules.pop('reverb', None)
    return False


def _import_rlds() -> types.ModuleType:
  if 'rlds' in sys.modules or _reverb_importable():
    import rlds as module  # pylint: disable=g-import-not-at-top
    return module
  sys.modules['reverb'] = _MissingReverb()
  try:
    import rlds as module  # pylint: disable=g-import-not-at-top
  finally:
    del sys.modules['reverb']
  # Fail at the call, before pattern_map touches its arguments, with a message that says why.
  for name in ('pattern_map', 'pattern_map_from_transform'):
    for namespace in (module.transformations, module.transformations.pattern):
      if hasattr(namespace, name):
        setattr(namespace, name, _missing_reverb_function(name))
  return module


def _missing_reverb_function(name: str):

  def unavailable(*args, **kwargs):
    raise errors.MissingDependencyError(f'{REVERB_MISSING_MESSAGE} (called rlds.transformations.{name})')

  unavailable.__name__ = name
  return unavailable


rlds = _import_rlds()
REVERB_AVAILABLE = not isinstance(rlds.transformations.pattern.reverb, _MissingReverb)
