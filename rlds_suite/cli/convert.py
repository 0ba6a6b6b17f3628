"""`rlds-suite convert RIEGELI_DIR --out DIR`: EnvLogger Riegeli logs -> an RLDS/TFDS dataset."""

from __future__ import annotations

import json


def register(subparsers) -> None:
  parser = subparsers.add_parser('convert', help='Convert EnvLogger Riegeli logs into an RLDS '
                                 'dataset directory.')
  parser.add_argument('source', help='directory holding EnvLogger logs (metadata.riegeli)')
  parser.add_argument('--out', required=True, help='dataset directory (appended to if it exists)')
  parser.add_argument('--name', default='envlogger_rollouts', help='dataset name')
  parser.add_argument('--image_field', action='append', default=[],
                      help="path stored as an image, e.g. 'observation/pixels' (repeatable)")
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.recording import riegeli_ingest  # pylint: disable=g-import-not-at-top
  writer = riegeli_ingest.convert(args.source, args.out, name=args.name,
                                  image_fields=args.image_field)
  print(json.dumps({'out': args.out, 'episodes_written': writer.num_episodes_written}))
  return 0
