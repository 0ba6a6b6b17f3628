"""`rlds-suite browse NAME_OR_DIR [--port 8081]`: a read-only web page over a dataset's episodes."""

from __future__ import annotations


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'browse', help='Serve a read-only page over a prepared dataset: the episode list (sortable, '
      'filterable), each episode played (image fields as video, vector fields plotted) and the '
      'dataset statistics; reads one episode at a time.')
  parser.add_argument('source', help='registered dataset name or dataset directory')
  parser.add_argument('--port', type=int, default=8081, help='TCP port to serve on (default 8081)')
  parser.add_argument('--host', default='127.0.0.1',
                      help='address to listen on (0.0.0.0 to accept other machines)')
  parser.add_argument('--split', default=None, help='split to browse (default: all)')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir of a registered name')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.browse import memory  # pylint: disable=g-import-not-at-top
  memory.limit_malloc_arenas()  # Before TensorFlow's threads start.
  from rlds_suite.browse import server  # pylint: disable=g-import-not-at-top
  server.serve(args.source, data_dir=args.data_dir, split=args.split, host=args.host,
               port=args.port)
  return 0
