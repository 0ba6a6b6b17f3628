"""`rlds-suite convert RIEGELI_DIR --out DIR`: EnvLogger Riegeli logs -> an RLDS/TFDS dataset.

Prints the episodes written and the count of reset-only episodes (a reset and no action), which are
not written.
"""

from __future__ import annotations

import json
import sys


def register(subparsers) -> None:
  parser = subparsers.add_parser('convert', help='Convert EnvLogger Riegeli logs into an RLDS '
                                 'dataset directory.')
  parser.add_argument('source', help='directory holding EnvLogger logs (metadata.riegeli)')
  parser.add_argument('--out', required=True,
                      help='dataset directory (appended to if it exists); all or nothing: a failed '
                      'conversion leaves it as it was')
  parser.add_argument('--name', default='envlogger_rollouts', help='dataset name')
  parser.add_argument('--image_field', action='append', default=[],
                      help="path stored as an image, e.g. 'observation/pixels' (repeatable)")
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.recording import riegeli_ingest  # pylint: disable=g-import-not-at-top
  done = riegeli_ingest.convert(args.source, args.out, name=args.name,
                                image_fields=args.image_field)
  if done.reset_only_dropped:
    print(f'{done.reset_only_dropped} episode(s) with a reset and no action were not written '
          f'(an RLDS episode needs an action)', file=sys.stderr)
  print(json.dumps({'out': args.out, 'episodes_written': done.num_episodes_written,
                    'reset_only_episodes_dropped': done.reset_only_dropped,
                    'logs': len(done.log_directories)}))
  return 0
