"""`rlds-suite convert RIEGELI_DIR --out DIR`: EnvLogger Riegeli logs -> an RLDS/TFDS dataset.

Prints the episodes written, and how many of them are only a reset (no action): those are kept as
one-step episodes, as TFDS's EnvLogger reader keeps them.
"""

from __future__ import annotations

import json


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
  print(json.dumps({'out': args.out, 'episodes_written': done.num_episodes_written,
                    'reset_only_episodes': done.reset_only, 'logs': len(done.log_directories)}))
  return 0
