"""The `rlds-suite` command line: a thin shell over the library, one module per command.

Each command module defines `register(subparsers)`, which adds its parser and sets `func`, a
function of the parsed arguments that makes one library call, prints, and returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from typing import Optional, Sequence

from rlds_suite.compat import post_import
from rlds_suite.compat import quiet_tensorflow
from rlds_suite.core import errors

# Command modules under rlds_suite.cli, in the order `--help` lists them.
# Commands whose `source` is a dataset directory or a registered name, checked before TensorFlow.
DATASET_COMMANDS = ('validate', 'export', 'show', 'stats', 'verify', 'browse')
COMMAND_MODULES = ('demo', 'build', 'validate', 'stream', 'record', 'recover', 'convert', 'export', 'creator', 'browse', 'list', 'show', 'stats', 'verify', 'evaluate', 'policies')


class _Parser(argparse.ArgumentParser):
  """argparse, but a mistake is one line (`rlds-suite build: error: ...`) and exit code 2."""

  def error(self, message: str):
    self.exit(2, f'{self.prog}: error: {message} (see {self.prog} --help)\n')


def make_parser() -> argparse.ArgumentParser:
  parser = _Parser(prog='rlds-suite', description='RL/IL demonstrations as RLDS datasets.')
  parser.add_argument('--verbose', action='store_true',
                      help="show TensorFlow's C++ logs and Python warnings")
  subparsers = parser.add_subparsers(dest='command', required=True, parser_class=_Parser,
                                     metavar='COMMAND')
  for name in COMMAND_MODULES:
    importlib.import_module(f'rlds_suite.cli.{name}').register(subparsers)
  return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
  args = make_parser().parse_args(argv)
  if args.verbose:
    quiet_tensorflow.verbose()
  else:
    warnings.simplefilter('ignore')
  from absl import logging  # pylint: disable=g-import-not-at-top
  if not args.verbose:
    logging.set_verbosity(logging.ERROR)
  # Commands check their arguments before they import TensorFlow (seconds); TFDS's own bars
  # (counts without totals) give way to ours.
  post_import.when_imported('tensorflow_datasets', lambda tfds: tfds.disable_progress_bar())
  try:
    if args.command in DATASET_COMMANDS:  # Their source: a dataset directory or registered name.
      from rlds_suite.tfds import registry  # pylint: disable=g-import-not-at-top
      registry.check_source(args.source)
    return int(args.func(args) or 0)
  except errors.RLDSSuiteError as e:
    print(f'error: {type(e).__name__}: {e}', file=sys.stderr)
    return 2
  except BrokenPipeError:  # The output's reader (e.g. `| head`) stopped early.
    sys.stderr.close()
    return 0
