"""One factor that raises every limit guarding memory against hostile files.

Decompressed sizes (readers.files.expansion_limit) and what one pickle load may build
(core.safe_pickle.MAX_BUILT) are bounded so that a small hostile file cannot take the machine's
memory; a genuine file past a bound is allowed by raising them all with `EXPANSION_FACTOR` (or the
environment variable RLDS_SUITE_EXPANSION_FACTOR, which wins), and each refusal says so.
"""

from __future__ import annotations

import os

from rlds_suite.core import errors

EXPANSION_FACTOR = 1.0  # Multiplies every limit; RLDS_SUITE_EXPANSION_FACTOR overrides it.
EXPANSION_FACTOR_ENV = 'RLDS_SUITE_EXPANSION_FACTOR'


def factor() -> float:
  """The factor in force: the environment variable's, else EXPANSION_FACTOR."""
  setting = os.environ.get(EXPANSION_FACTOR_ENV)
  try:
    return float(setting) if setting else float(EXPANSION_FACTOR)
  except ValueError:
    raise errors.SchemaError(f'expected a number, got {setting!r}',
                             field=EXPANSION_FACTOR_ENV) from None


def how_to_allow() -> str:
  """The end of a refusal's message: how to raise the limit it hit."""
  return f'to allow it, set {EXPANSION_FACTOR_ENV} to a factor above {factor():g}'
