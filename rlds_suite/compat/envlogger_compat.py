"""The one place that makes envlogger 1.2 work on today's stack.

* envlogger/converters/codec.py builds a list naming `np.unicode_` (removed in numpy 2) every time
  it encodes a non-float32 array, so EnvLogger's Riegeli backend cannot encode even the environment
  specs. We give that module (only it) a numpy stand-in with `unicode_ = np.str_`; numpy itself is
  untouched. tests/test_riegeli_ingest.py fails once upstream no longer needs this.
* `BackendWriter.__del__` calls `close()` even when the writer's constructor raised (an unknown
  keyword, e.g. `EnvLogger(env, data_directory=D, max_episodes_per_shard=10)`): close() then fails
  on attributes the constructor never set, and since the error's traceback keeps the half-built
  writer alive, Python prints 'Exception ignored in: <function BackendWriter.__del__>' at exit,
  after the real error. A writer whose BackendWriter constructor raised is not closed by __del__.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import numpy as np


class _NumpyWithUnicode(types.ModuleType):
  """numpy, plus the `unicode_` alias numpy 2 removed."""
  unicode_ = np.str_

  def __getattr__(self, name: str) -> Any:
    return getattr(np, name)


def codec_needs_unicode_alias(codec: Any = None) -> bool:
  """Whether envlogger's codec, with the real numpy, fails to encode a float64 array."""
  if codec is None:
    from envlogger.converters import codec  # pylint: disable=g-import-not-at-top,redefined-outer-name
  real = codec.np if not isinstance(codec.np, _NumpyWithUnicode) else np
  patched, codec.np = codec.np, real
  try:
    codec.encode(np.zeros(2, dtype=np.float64))
    return False
  except AttributeError:
    return True
  finally:
    codec.np = patched


def patch_envlogger_codec() -> None:
  """Applies the alias to envlogger's codec when needed; idempotent."""
  from envlogger.converters import codec  # pylint: disable=g-import-not-at-top
  if isinstance(codec.np, _NumpyWithUnicode) or hasattr(np, 'unicode_'):
    return
  if codec_needs_unicode_alias(codec):
    codec.np = _NumpyWithUnicode('numpy')


_INIT_FAILED = '_rlds_suite_init_failed'


def patch_backend_writer_del() -> None:
  """Makes BackendWriter.__del__ skip writers whose BackendWriter constructor raised; idempotent."""
  from envlogger.backends import backend_writer  # pylint: disable=g-import-not-at-top
  cls = backend_writer.BackendWriter
  if getattr(cls.__del__, _INIT_FAILED, False):
    return
  original_init, original_del = cls.__init__, cls.__del__

  @functools.wraps(original_init)
  def __init__(self, *args, **kwargs):
    try:
      original_init(self, *args, **kwargs)
    except BaseException:
      self.__dict__[_INIT_FAILED] = True
      raise

  @functools.wraps(original_del)
  def __del__(self):
    if not self.__dict__.get(_INIT_FAILED):
      original_del(self)

  setattr(__del__, _INIT_FAILED, True)
  cls.__init__, cls.__del__ = __init__, __del__
