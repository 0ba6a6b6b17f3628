"""Keeps TensorFlow's C++ logs out of the user's way unless they asked for them.

TensorFlow 2.21 writes its start-up lines (oneDNN, CUDA, CPU features) through absl before
`TF_CPP_MIN_LOG_LEVEL` is read, and tf.data logs per-element ERROR lines such as "Tensor RefCount
not reliable" that are not errors of the user's. Unless the user set `TF_CPP_MIN_LOG_LEVEL`
(or the command line's `--verbose` asks), we set it to 3 and, while TensorFlow's module first
runs, filter those start-up lines from the process's standard error (file descriptor 2, where C++
writes); every other line is passed on once the import ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from typing import Iterator

from rlds_suite.compat import post_import

LEVEL_VARIABLE = 'TF_CPP_MIN_LOG_LEVEL'
# Set by the user before rlds_suite was imported: then we change nothing.
USER_CHOSE_LEVEL = LEVEL_VARIABLE in os.environ

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


def quiet_by_default() -> None:
  """Quiets TensorFlow's C++ logging unless the user chose a level; idempotent."""
  if USER_CHOSE_LEVEL:
    return
  os.environ.setdefault(LEVEL_VARIABLE, '3')
  post_import.around_import('tensorflow', filtered_stderr)


def verbose() -> None:
  """Lets every TensorFlow log line through (the command line's --verbose)."""
  if not USER_CHOSE_LEVEL:
    os.environ[LEVEL_VARIABLE] = '0'
  post_import.around_import_cancel('tensorflow')
