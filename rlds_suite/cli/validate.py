"""`rlds-suite validate NAME_OR_DIR`: check RLDS episode invariants, report violations by kind."""

from __future__ import annotations

import json
from typing import Any


def register(subparsers) -> None:
  parser = subparsers.add_parser('validate', help='Check a dataset\'s episodes (boundaries, '
                                 'discounts, specs, rewards).')
  parser.add_argument('source', help='registered TFDS name (name/config) or dataset directory')
  parser.add_argument('--split', default=None, help='split to check (default: all)')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir for registered names')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  return print_report(datasets.validate(args.source, split=args.split, data_dir=args.data_dir,
                                       progress_bar=True))


def print_report(report, **extra: Any) -> int:
  """Prints the violations and warnings grouped by kind (count, first locations), then the summary
  as JSON; the exit code is 1 if anything is invalid (warnings alone do not fail)."""
  for found in report.groups():
    print(found)
  print(json.dumps({**extra, **report.summary()}, indent=2))
  return 0 if report.ok else 1
