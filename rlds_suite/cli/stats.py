"""`rlds-suite stats NAME_OR_DIR [--out FILE.png]`: episode, length, return and field statistics."""

from __future__ import annotations

import json


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'stats', help='Print (and plot) episode count, length and return distributions, endings and '
      'per-dimension observation/action statistics; reads one episode at a time.')
  parser.add_argument('source', help='registered dataset name or dataset directory')
  parser.add_argument('--out', default=None, help='also plot the statistics to this PNG file')
  parser.add_argument('--split', default=None, help='split to read (default: all)')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir of a registered name')
  parser.add_argument('--json', action='store_true', help='print the summary as JSON')
  parser.set_defaults(func=run)


def run(args) -> int:
  # pylint: disable=g-import-not-at-top
  import numpy as np
  from rlds_suite.core import progress
  from rlds_suite.inspection import statistics
  from rlds_suite.tfds import datasets
  from rlds_suite import scores
  # pylint: enable=g-import-not-at-top
  builder = datasets.load_builder(args.source, args.data_dir)
  stats = statistics.compute(progress.episodes(
      datasets.read_episodes(builder, split=args.split),
      progress.split_total(builder.info.splits, args.split), 'stats'))
  reference = scores.directory_reference(str(builder.data_dir))
  normalized = reference.normalize(stats.returns).tolist() if reference and stats.returns else None
  if args.json:
    print(json.dumps({'episodes': stats.episodes, 'steps': stats.steps,
                      'terminated': stats.terminated, 'truncated': stats.truncated,
                      'returns': stats.returns, 'lengths': stats.lengths,
                      'normalized_returns': normalized,
                      'reference': None if reference is None else reference.as_metadata()}))
  else:
    print(statistics.summary_table(stats))
    if normalized is not None:
      print(f'normalised return (100 * (R - {reference.low:.6g}) / ({reference.high:.6g} - '
            f'{reference.low:.6g}), {reference.source}): mean {100 * np.mean(normalized):.2f}  '
            f'min {100 * np.min(normalized):.2f}  max {100 * np.max(normalized):.2f}')
  if args.out:
    from rlds_suite.inspection import plots  # pylint: disable=g-import-not-at-top
    plots.plot_statistics(stats, args.out, title=str(args.source), normalized_returns=normalized)
    if not args.json:
      print(f'plot: {args.out}')
  return 0
