"""`rlds-suite build NAME --manual_dir DIR`: convert native files into an RLDS dataset, validate it."""

from __future__ import annotations

from rlds_suite.cli import validate


def register(subparsers) -> None:
  parser = subparsers.add_parser('build', help='Build a registered dataset from native files.')
  parser.add_argument('name', help='registered TFDS name, e.g. magical_demos/move_to_region')
  parser.add_argument('--manual_dir', default=None, help='directory with the native files')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir to write to')
  parser.add_argument('--download', action='store_true',
                      help="let a builder download its files (TFDS's own builders, and ours "
                      'with checksummed URLs when --manual_dir is not given); refused without it')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.tfds import registry  # pylint: disable=g-import-not-at-top
  # Names, configs and --manual_dir are checked before TensorFlow is imported (seconds).
  registry.check_buildable(args.name, manual_dir=args.manual_dir, data_dir=args.data_dir,
                           download=args.download)
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  builder = datasets.build(args.name, manual_dir=args.manual_dir, data_dir=args.data_dir)
  return validate.print_report(datasets.validate(builder, progress_bar=True),
                               data_dir=str(builder.data_dir))
