"""`rlds-suite demo`: convert the bundled sample datasets, validate and summarise each."""

from __future__ import annotations

import tempfile


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'demo', help='Convert the bundled sample data, validate it, print a summary per dataset.')
  parser.add_argument('--data_dir', default=None,
                      help='where to write the datasets (default: a temporary directory)')
  parser.set_defaults(func=run)


def format_summary(summary: dict) -> str:
  ok = 'valid' if summary['valid'] else f'INVALID ({summary["violations"]} violations)'
  return '\n'.join([
      f'== {summary["name"]}: {ok}',
      f'   episodes {summary["episodes"]}, steps {summary["steps"]}',
      f'   return mean {summary["return_mean"]:.4g}, min {summary["return_min"]:.4g}, '
      f'max {summary["return_max"]:.4g}',
      f'   observation {summary["observation_spec"]}',
      f'   action {summary["action_spec"]}',
  ])


def run(args) -> int:
  from rlds_suite import demo  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    summaries = demo.run(args.data_dir or tmp, on_sample=lambda s: print(format_summary(s),
                                                                         flush=True))
  return 0 if all(s['valid'] for s in summaries) else 1
