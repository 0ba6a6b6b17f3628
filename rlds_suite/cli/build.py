"""`rlds-suite build NAME --manual_dir DIR`: convert native files into an RLDS dataset, validate it."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys

from rlds_suite.cli import validate


def register(subparsers) -> None:
  parser = subparsers.add_parser('build', help='Build a registered dataset from native files.')
  parser.add_argument('name', help='registered TFDS name, e.g. magical_demos/move_to_region')
  parser.add_argument('--manual_dir', default=None, help='directory with the native files')
  parser.add_argument('--data_dir', default=None, help='TFDS data_dir to write to')
  parser.add_argument('--download', action='store_true',
                      help="let a builder download its files (TFDS's own builders, and ours "
                      'with checksummed URLs when --manual_dir is not given); refused without it')
  parser.add_argument('--beam_runner', default='direct',
                      help='Beam builders (dqn_replay, rlu_*, minari): direct (worker threads in '
                      'this process, the default), dask (a dask.distributed LocalCluster of '
                      'worker processes), or '
                      'any Beam runner with its flags in --beam_options (README: Dataflow, Flink, '
                      'Spark)')
  parser.add_argument('--workers', type=int, default=2,
                      help='workers of the direct and dask runners (default 2)')
  parser.add_argument('--beam_options', default='',
                      help="more Beam pipeline flags, one string, e.g. '--runner=FlinkRunner "
                      "--flink_master=localhost:8081 --environment_type=LOOPBACK'")
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.tfds import registry  # pylint: disable=g-import-not-at-top
  # Names, configs and --manual_dir are checked before TensorFlow is imported (seconds).
  registry.check_buildable(args.name, manual_dir=args.manual_dir, data_dir=args.data_dir,
                           download=args.download)
  from rlds_suite.tfds import beam  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  try:
    with beam.options_for(args.beam_runner, args.workers,
                          shlex.split(args.beam_options)) as options:
      builder = datasets.build(args.name, manual_dir=args.manual_dir, data_dir=args.data_dir,
                               beam_options=options)
  except KeyboardInterrupt as e:
    return _stopped(e)
  if getattr(builder, 'beam_log_path', None):
    print(f'Beam and worker logs: {builder.beam_log_path}')
  report = datasets.validate(builder, progress_bar=True)
  status = validate.print_report(report, data_dir=str(builder.data_dir))
  _mark_validation(str(builder.data_dir), report)
  return status


def _mark_validation(directory: str, report) -> None:
  """A dataset that fails validation is kept (nothing written is lost) but marked: its report in
  DIRECTORY/VALIDATION_FAILED.json, and a last line on stderr naming it. A build whose validation
  passes removes an earlier mark."""
  from rlds_suite.tfds import provenance  # pylint: disable=g-import-not-at-top
  marker = os.path.join(directory, provenance.VALIDATION_FAILED)
  if report.ok:
    with contextlib.suppress(FileNotFoundError):
      os.remove(marker)
    return
  with open(marker, 'w') as f:
    json.dump({**report.summary(), 'findings': [str(g) for g in report.groups()]}, f, indent=2)
  episodes = len({violation.episode for violation in report.violations})
  print(f'rlds-suite build: {directory} was written but FAILED validation '
        f'({len(report.violations)} violation(s) in {episodes} of {report.num_episodes} episodes): '
        f'kept, marked by {provenance.VALIDATION_FAILED} there (the report); rlds-suite validate '
        f'{shlex.quote(directory)} shows it again', file=sys.stderr)


def _stopped(interrupt: KeyboardInterrupt) -> int:
  """Ctrl-C or a stop signal: says what was kept; exit status 128 + the signal's number."""
  from rlds_suite.tfds import writing  # pylint: disable=g-import-not-at-top
  name = interrupt.signal_name if isinstance(interrupt, writing.BuildStopped) else 'SIGINT'
  if isinstance(interrupt, writing.BuildStopped) and interrupt.shards:
    print(f'stopped ({name}): {interrupt.episodes} episodes in {interrupt.shards} shards kept in '
          f'{interrupt.directory}; run the same command to resume', file=sys.stderr)
  else:
    print(f'stopped ({name}) before a shard was complete: nothing kept', file=sys.stderr)
  return 128 + int(getattr(signal, name))
