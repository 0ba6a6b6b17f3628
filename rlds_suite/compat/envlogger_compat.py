"""The one place that makes envlogger 1.2's codec work on numpy 2.

envlogger/converters/codec.py builds a list naming `np.unicode_` (removed in numpy 2) every time it
encodes a non-float32 array, so EnvLogger's Riegeli backend cannot encode even the environment
specs. We give that module (only it) a numpy stand-in with `unicode_ = np.str_`; numpy itself is
untouched. tests/test_riegeli_ingest.py fails once upstream no longer needs this.
"""

from __future__ import annotations

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
