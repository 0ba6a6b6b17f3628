"""`rlds-suite export NAME_OR_DIR --to FORMAT OUT`: a dataset as another stack's native files."""

from __future__ import annotations

import argparse
import json

# Kept in step with rlds_suite.exports.FORMATS (tests check it); listed here so that --help does
# not import the library.
FORMATS = ('npz', 'd4rl', 'il_representations_dict', 'il_representations')


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'export', help='Write a dataset\'s episodes in another format (flat arrays, D4RL HDF5, '
      'il-representations dict or shard).',
      description='npz and d4rl: one row per transition with observations, actions, rewards, '
      'next_observations, terminals and timeouts kept apart (D4RL\'s layout); '
      'il_representations_dict: its obs/next_obs/acts/dones/rews dict as .npz; '
      'il_representations: a processed shard (demos.tar.zst) that load_wds_datasets reads.')
  parser.add_argument('source', help='registered TFDS name (name/config) or dataset directory')
  parser.add_argument('out', help='file to write (.npz, .hdf5 or .tar.zst)')
  parser.add_argument('--to', required=True, choices=FORMATS, help='target format')
  parser.add_argument('--split', default=None, help='split to export (default: all)')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir for registered names')
  parser.add_argument('--env_cfg', default=None, type=_json_object,
                      help='il_representations only: env_cfg JSON (benchmark_name, task_name, ...) '
                      'for datasets that do not carry one')
  parser.set_defaults(func=run)


def _json_object(text: str) -> dict:
  try:
    value = json.loads(text)
  except json.JSONDecodeError as e:
    raise argparse.ArgumentTypeError(f'not JSON: {e}') from None
  if not isinstance(value, dict):
    raise argparse.ArgumentTypeError('expected a JSON object')
  return value


def run(args) -> int:
  from rlds_suite import exports  # pylint: disable=g-import-not-at-top
  options = {'env_cfg': args.env_cfg} if args.to == 'il_representations' else {}
  if args.env_cfg is not None and args.to != 'il_representations':
    print('warning: --env_cfg only applies to --to il_representations; ignored')
  written = exports.export(args.source, args.to, args.out, split=args.split,
                           data_dir=args.data_dir, **options)
  if isinstance(written, int):
    print(f'wrote {args.out} ({args.to}): {written} frames')
    return 0
  rows = max(shape[0] for shape in written.values())
  print(f'wrote {args.out} ({args.to}): {len(written)} arrays, {rows} rows')
  width = max(len(name) for name in written)
  for name, shape in sorted(written.items()):
    print(f'  {name:<{width}}  {tuple(shape)}')
  return 0
