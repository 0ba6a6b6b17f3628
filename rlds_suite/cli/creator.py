"""`rlds-suite creator --port 8080 [--data_dir DIR] [--db URL] [--token TOKEN]`: the web tool where
people play study environments in the browser and every step is recorded as RLDS."""

from __future__ import annotations

import os


def register(subparsers) -> None:
  parser = subparsers.add_parser('creator', help='Serve the web tool for human data collection.')
  parser.add_argument('--port', type=int, default=8080, help='TCP port to serve on (default 8080)')
  parser.add_argument('--host', default='127.0.0.1',
                      help='address to listen on (0.0.0.0 to accept other machines)')
  parser.add_argument('--data_dir', default='creator_data',
                      help='where episodes (RLDS datasets) and the default SQLite database live')
  parser.add_argument('--db', default=None,
                      help='SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db '
                      '(default: sqlite under --data_dir)')
  parser.add_argument('--token', default=os.environ.get('RLDS_CREATOR_TOKEN'),
                      help='designer token (default: $RLDS_CREATOR_TOKEN, else generated and '
                      'printed)')
  parser.add_argument('--pause_timeout', type=float, default=300.0,
                      help='seconds a paused episode, or one whose connection dropped, waits '
                      'for its player before it is ABANDONED')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.creator import server  # pylint: disable=g-import-not-at-top
  server.serve(args.data_dir, host=args.host, port=args.port, designer_token=args.token,
               db_url=args.db, pause_timeout=args.pause_timeout)
  return 0
