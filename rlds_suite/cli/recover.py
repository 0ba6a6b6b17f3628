"""`rlds-suite recover DIR`: salvage what an interrupted recording left and rewrite the metadata."""

from __future__ import annotations

import json


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'recover', help='Keep every complete episode of the unfinished shard a killed recording left '
      'in DIR (a torn last record is dropped) and rewrite the metadata so the dataset loads.')
  parser.add_argument('directory',
                      help='dataset directory written by rlds-suite record or RLDSWriter')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.recording import recovery  # pylint: disable=g-import-not-at-top
  report = recovery.recover(args.directory)
  print(json.dumps(report.summary(), indent=2))
  return 0
