"""The `rlds-suite` command line: a thin shell over the library, one module per command.

Each command module defines `register(subparsers)`, which adds its parser and sets `func`, a
function of the parsed arguments that makes one library call, prints, and returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Optional, Sequence

from rlds_suite.core import errors

# Command modules under rlds_suite.cli, in the order `--help` lists them.
COMMAND_MODULES = ('demo', 'build', 'validate', 'stream', 'record', 'convert')


def make_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog='rlds-suite', description='RL/IL demonstrations as RLDS datasets.')
  subparsers = parser.add_subparsers(dest='command', required=True)
  for name in COMMAND_MODULES:
    importlib.import_module(f'rlds_suite.cli.{name}').register(subparsers)
  return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  args = make_parser().parse_args(argv)
  from absl import logging  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.ERROR)
  tfds.disable_progress_bar()
  try:
    return int(args.func(args) or 0)
  except errors.RLDSSuiteError as e:
    print(f'error: {type(e).__name__}: {e}', file=sys.stderr)
    return 2
