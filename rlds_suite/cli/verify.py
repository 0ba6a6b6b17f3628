"""`rlds-suite verify NAME_OR_DIR [--manual_dir DIR]`: hash a dataset's files and sources again."""

from __future__ import annotations

import json


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'verify', help="Re-hash a dataset's own files and (when present) its source files against "
      'the sizes and sha256 recorded when it was built or recorded; exit 1 on any difference.')
  parser.add_argument('source', help='registered dataset name or dataset directory')
  parser.add_argument('--manual_dir', default=None,
                      help='where the source files are now (default: where they were at build time)')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir of a registered name')
  parser.set_defaults(func=run)


def run(args) -> int:
  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import datasets
  from rlds_suite.tfds import provenance
  # pylint: enable=g-import-not-at-top
  builder = datasets.load_builder(args.source, args.data_dir)
  report = provenance.verify(str(builder.data_dir), manual_dir=args.manual_dir)
  for problem in report.problems:
    print(f'DIFFERENT {problem}')
  print(json.dumps({'dataset_dir': report.dataset_dir, 'ok': report.ok,
                    'dataset_files_checked': report.checked_dataset_files,
                    'sources_checked': report.checked_sources,
                    'sources_skipped': report.sources_skipped,
                    'differences': len(report.problems)}))
  return 0 if report.ok else 1
