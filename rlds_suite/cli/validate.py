"""`rlds-suite validate NAME_OR_DIR`: check RLDS episode invariants, list every violation."""

from __future__ import annotations

import json


def register(subparsers) -> None:
  parser = subparsers.add_parser('validate', help='Check a dataset\'s episodes (boundaries, specs, '
                                 'rewards).')
  parser.add_argument('source', help='registered TFDS name (name/config) or dataset directory')
  parser.add_argument('--split', default=None, help='split to check (default: all)')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir for registered names')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite import datasets  # pylint: disable=g-import-not-at-top
  report = datasets.validate(args.source, split=args.split, data_dir=args.data_dir)
  for violation in report.violations:
    print(violation)
  print(json.dumps(report.summary(), indent=2))
  return 0 if report.ok else 1
