"""Run a function right after a module is first imported (or at once), or around its import.

`import rlds_suite` must register our builders with TFDS and make EnvLogger's codec work on numpy 2,
but importing TensorFlow costs seconds, which the command line (`rlds-suite --help`) and users who
only want the readers should not pay. So both are tied to the import of the module they concern:
the registration runs when `tensorflow_datasets` is imported (before or after `rlds_suite`), the
codec fix when `envlogger.converters.codec` is. `around_import` wraps a module's first execution
in a context manager (compat/quiet_tensorflow.py filters TensorFlow's C++ start-up lines with it).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
import types
from typing import Callable, ContextManager, Optional, Sequence

Hook = Callable[[types.ModuleType], None]

_HOOKS: dict[str, list[Hook]] = {}
_AROUND: dict[str, Callable[[], ContextManager]] = {}
_LOCK = threading.RLock()


def when_imported(module_name: str, hook: Hook) -> None:
  """Calls `hook(module)` once `module_name` is imported: now if it already is, else right after."""
  with _LOCK:
    module = sys.modules.get(module_name)
    if module is None:
      _HOOKS.setdefault(module_name, []).append(hook)
      _install_finder()
      return
  hook(module)


def around_import(module_name: str, context: Callable[[], ContextManager]) -> bool:
  """Runs `module_name`'s first execution inside `context()`; False if it is already imported."""
  with _LOCK:
    if module_name in sys.modules:
      return False
    _AROUND[module_name] = context
    _install_finder()
    return True


def around_import_cancel(module_name: str) -> None:
  """Forgets an `around_import` that has not run yet."""
  with _LOCK:
    _AROUND.pop(module_name, None)


def _install_finder() -> None:
  if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _PostImportFinder())


def _run_hooks(module_name: str, module: types.ModuleType) -> None:
  with _LOCK:
    hooks = _HOOKS.pop(module_name, [])
  for hook in hooks:
    hook(module)


class _PostImportFinder(importlib.abc.MetaPathFinder):
  """Finds hooked modules with the other finders and wraps their loader to run the hooks after."""

  def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                target: Optional[types.ModuleType] = None):
    if fullname not in _HOOKS and fullname not in _AROUND:
      return None
    for finder in sys.meta_path:
      if finder is self or not hasattr(finder, 'find_spec'):
        continue
      spec = finder.find_spec(fullname, path, target)
      if spec is not None:
        break
    else:
      return None
    if spec.loader is None or not hasattr(spec.loader, 'exec_module'):
      return spec
    spec.loader = _LoaderThenHooks(spec.loader, fullname)
    return spec


class _LoaderThenHooks(importlib.abc.Loader):
  """Delegates to the real loader, restores it once the module ran, then runs the hooks."""

  def __init__(self, loader: importlib.abc.Loader, fullname: str):
    self._loader = loader
    self._fullname = fullname

  def __getattr__(self, name: str):
    return getattr(self._loader, name)

  def create_module(self, spec: importlib.machinery.ModuleSpec):
    return self._loader.create_module(spec)

  def exec_module(self, module: types.ModuleType) -> None:
    module.__loader__ = self._loader
    if module.__spec__ is not None:
      module.__spec__.loader = self._loader
    with _LOCK:
      context = _AROUND.pop(self._fullname, None)
    if context is None:
      self._loader.exec_module(module)
    else:
      with context():
        self._loader.exec_module(module)
    _run_hooks(self._fullname, module)
