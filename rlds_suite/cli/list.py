"""`rlds-suite list [--local DATA_DIR]`: every registered builder, its configs, how it is prepared."""

from __future__ import annotations


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'list', help='List the registered builders, their configs, and the prepared datasets.')
  parser.add_argument('--local', metavar='DATA_DIR', nargs='?', const='', default=None,
                      help='also list the datasets prepared under DATA_DIR (default: TFDS\'s '
                      'data dir when the flag is given without a value)')
  parser.add_argument('--configs', action='store_true', help='print every config name')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.tfds import registry  # pylint: disable=g-import-not-at-top
  entries = registry.entries()
  prepared = registry.prepared(args.local or None) if args.local is not None else {}
  width = max(len(entry.name) for entry in entries)
  for entry in entries:
    source = ('download (checksums) or --manual_dir' if entry.downloads and entry.reads_manual_dir
              else 'download' if entry.downloads else '--manual_dir' if entry.reads_manual_dir
              else 'local files (see its README)')
    configs = f'{len(entry.configs)} configs' if entry.configs else 'configured by arguments'
    print(f'{entry.name:<{width}}  {configs:<24} {source:<38} {entry.description}')
    if args.configs and entry.configs:
      print(' ' * (width + 2) + ', '.join(entry.configs))
  if args.local is not None:
    print(f'\nprepared ({args.local or "TFDS default data dir"}):')
    for name, versions in prepared.items() or [('(none)', [])]:
      print(f'  {name} {" ".join(versions)}')
  return 0
