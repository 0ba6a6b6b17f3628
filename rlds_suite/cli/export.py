"""`rlds-suite export NAME_OR_DIR --to FORMAT OUT`: a dataset as another stack's native files."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import tempfile

from rlds_suite.core import errors

# Kept in step with rlds_suite.exports.FORMATS (tests check it); listed here so that --help does
# not import the library.
FORMATS = ('npz', 'd4rl', 'il_representations_dict', 'il_representations')
# Errors writing the output (others, e.g. a missing source file, are not the output's).
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


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


def _check_writable(out: str) -> None:
  """A read-only (or missing and uncreatable) output directory: one line, before any work."""
  directory = os.path.dirname(os.path.abspath(out))
  try:
    os.makedirs(directory, exist_ok=True)
    tempfile.TemporaryFile(dir=directory).close()
  except OSError as e:
    raise errors.OutputWriteError.from_os_error(e, out) from e


def run(args) -> int:
  """Exports; the file appears under its name only when complete (rlds_suite.exports writes a
  temporary file and renames it), so Ctrl-C or a full disk leaves nothing that looks complete."""
  _check_writable(args.out)
  options = {'env_cfg': args.env_cfg} if args.to == 'il_representations' else {}
  if args.env_cfg is not None and args.to != 'il_representations':
    print('warning: --env_cfg only applies to --to il_representations; ignored')
  try:
    from rlds_suite import exports  # pylint: disable=g-import-not-at-top
    written = exports.export(args.source, args.to, args.out, split=args.split,
                             data_dir=args.data_dir, **options)
  except KeyboardInterrupt:
    print(f'interrupted: nothing written to {args.out}', file=sys.stderr)
    return 130
  except OSError as e:
    if isinstance(e, errors.RLDSSuiteError) or e.errno not in _WRITE_ERRNOS:
      raise
    raise errors.OutputWriteError.from_os_error(e, args.out) from e
  if isinstance(written, int):
    print(f'wrote {args.out} ({args.to}): {written} frames')
    return 0
  rows = max(shape[0] for name, shape in written.items() if not name.startswith('metadata/'))
  print(f'wrote {args.out} ({args.to}): {len(written)} arrays, {rows} rows')
  width = max(len(name) for name in written)
  for name, shape in sorted(written.items()):
    print(f'  {name:<{width}}  {tuple(shape)}')
  return 0
