"""Keeps TensorFlow's C++ logs out of the user's way unless they asked for them.

TensorFlow 2.21 writes its start-up lines (oneDNN, CUDA, CPU features) through absl before
`TF_CPP_MIN_LOG_LEVEL` is read, and tf.data logs per-element ERROR lines such as "Tensor RefCount
not reliable" that are not errors of the user's. Unless the user set `TF_CPP_MIN_LOG_LEVEL`
(a JAX imported first sets 1 of its own, which is not the user's) or the command line's
`--verbose` asks, we set it to 3 and, while TensorFlow's module first runs, filter those start-up
lines from the process's standard error (file descriptor 2, where C++ writes); every other line
is passed on once the import ends. Apache Beam's "apitools not found" warning goes the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
from typing import Container, Iterator, Mapping, Optional

from rlds_suite.compat import post_import

LEVEL_VARIABLE = 'TF_CPP_MIN_LOG_LEVEL'
# What `import jax` sets the variable to when it is unset (os.environ.setdefault).
JAX_DEFAULT_LEVEL = '1'


def user_chose_level(environ: Mapping[str, str], modules: Container[str],
                     initial_environment: Optional[bytes]) -> bool:
  """Whether the user set TF_CPP_MIN_LOG_LEVEL: it is set, and not by a JAX imported first (JAX
  sets '1' unless the process started with a value; `initial_environment` is the process's own,
  None when unknown)."""
  if LEVEL_VARIABLE not in environ:
    return False
  if 'jax' in modules and environ[LEVEL_VARIABLE] == JAX_DEFAULT_LEVEL:
    if initial_environment is None:
      return True
    prefix = f'{LEVEL_VARIABLE}='.encode()
    return any(entry.startswith(prefix) for entry in initial_environment.split(b'\0'))
  return True


def _initial_environment() -> Optional[bytes]:
  """The environment this process started with (Linux), or None."""
  try:
    with open('/proc/self/environ', 'rb') as f:
      return f.read()
  except OSError:
    return None


# Set by the user before rlds_suite was imported: then we change nothing.
USER_CHOSE_LEVEL = user_chose_level(os.environ, sys.modules, _initial_environment())

_STARTUP_NOISE = re.compile(
    r'^([IWE]\d{4} [\d:.]+\s+\d+ \S+:\d+\]|WARNING: All log messages before '
    r'absl::InitializeLog\(\) is called|To enable the following instructions:|This TensorFlow '
    r'binary is optimized)')


def is_startup_noise(line: str) -> bool:
  """Whether a standard-error line is one of TensorFlow's C++ log lines."""
  return bool(_STARTUP_NOISE.match(line))


@contextlib.contextmanager
def filtered_stderr() -> Iterator[None]:
  """Collects file descriptor 2 meanwhile, then writes back every line that is not C++ log noise."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as collected:
    os.dup2(collected.fileno(), 2)
    try:
      yield
    finally:
      os.dup2(saved, 2)
      os.close(saved)
      collected.seek(0)
      kept = [line for line in collected.read().decode(errors='replace').splitlines()
              if not is_startup_noise(line)]
      if kept:
        sys.stderr.write('\n'.join(kept) + '\n')


# Apache Beam's BigQuery client package warns when it is imported that apitools is missing; we use
# no BigQuery, and the warning came on every build and demo.
BEAM_BIGQUERY = 'apache_beam.io.gcp.internal.clients.bigquery'
APITOOLS_WARNING = 'apitools not found'


class _DropMessages(logging.Filter):
  """Drops log records whose message starts with `prefix`."""

  def __init__(self, prefix: str):
    super().__init__()
    self.prefix = prefix

  def filter(self, record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(self.prefix)


@contextlib.contextmanager
def without_apitools_warning() -> Iterator[None]:
  """Drops Apache Beam's apitools warning from the root logger meanwhile."""
  drop = _DropMessages(APITOOLS_WARNING)
  logging.getLogger().addFilter(drop)
  try:
    yield
  finally:
    logging.getLogger().removeFilter(drop)


def quiet_by_default() -> None:
  """Quiets TensorFlow's C++ logging unless the user chose a level, and Apache Beam's apitools
  warning; idempotent."""
  post_import.around_import(BEAM_BIGQUERY, without_apitools_warning)
  if USER_CHOSE_LEVEL:
    return
  os.environ[LEVEL_VARIABLE] = '3'  # Replaces JAX's '1'; unset otherwise.
  post_import.around_import('tensorflow', filtered_stderr)


def verbose() -> None:
  """Lets every TensorFlow log line and warning through (the command line's --verbose)."""
  if not USER_CHOSE_LEVEL:
    os.environ[LEVEL_VARIABLE] = '0'
  post_import.around_import_cancel('tensorflow')
  post_import.around_import_cancel(BEAM_BIGQUERY)
