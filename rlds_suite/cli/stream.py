"""`rlds-suite stream --config JSON`: build a stream from dataset_configs, print its buffer sizes,
spec and speed."""

from __future__ import annotations

import itertools
import json
import sys
import time
from typing import Any

from rlds_suite.core import errors
from rlds_suite.core import nested

UNITS = ('steps', 'transitions', 'n_step', 'windows', 'pairs')


def describe_spec(spec: Any) -> str:
  """A batch's fields, one a line in the stream's order: `  observation: float32[256, 4]` (None
  for a dimension that varies, such as a last batch's size)."""
  lines = ['batch fields:']
  for path, field in nested.flatten_paths(spec).items():
    lines.append(f'  {path}: {field.dtype.name}{field.shape.as_list()}')
  return '\n'.join(lines)


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'stream', help='Stream batches from dataset_configs entries; print the buffer sizes chosen '
      'under the memory budget, the batch spec and the throughput.')
  parser.add_argument('--config', required=True,
                      help='JSON list of dataset_configs entries ({} / {"type": "random"} / ...), '
                      'TFDS names or dataset directories')
  parser.add_argument('--env_cfg', default=None, help='JSON default env_cfg (the current task)')
  parser.add_argument('--register', action='append', default=[], metavar='TYPE/BENCHMARK/TASK=PATH',
                      help='register a dataset directory or TFDS name for an entry (repeatable)')
  parser.add_argument('--data_dir', default=None, help='where TFDS names are looked up')
  parser.add_argument('--unit', choices=UNITS, default='steps',
                      help='what one batch row is (default steps)')
  parser.add_argument('--n', type=int, default=3, help='n of n_step, length of windows, '
                      'offset of pairs')
  parser.add_argument('--batch', type=int, default=256, help='units per batch')
  parser.add_argument('--take', type=int, default=100, help='batches to read')
  parser.add_argument('--seed', type=int, default=0, help='seed of the shuffle and the mix')
  parser.add_argument('--memory_budget', default=None, metavar='BYTES',
                      help="bytes the stream's buffers may take ('512MiB', '2G'; default an "
                      "eighth of this machine's memory)")
  parser.add_argument('--shuffle_episodes', type=int, default=16,
                      help='episodes in the shuffle buffer, at most')
  parser.add_argument('--shuffle_units', type=int, default=10_240,
                      help='units permuted together (a block), at most')
  parser.add_argument('--no_shuffle', action='store_true',
                      help='keep file order (buffers then sized under the default budget)')
  parser.add_argument('--cache_dir', default=None,
                      help='cache decoded steps there (filled once, read on every epoch)')
  parser.add_argument('--exhaustion', choices=('repeat', 'stop', 'drop'), default='repeat',
                      help='what a mix does when a dataset runs out (default repeat)')
  parser.add_argument('--projection', choices=('none', 'common_keys', 'pad'), default='none',
                      help='how datasets with different specs are made to agree (default: refuse)')
  parser.add_argument('--num_shards', type=int, default=1, help='hosts sharing the stream')
  parser.add_argument('--shard_index', type=int, default=0, help="this host's shard (0-based)")
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top
  from rlds_suite.streams import budget  # pylint: disable=g-import-not-at-top
  catalog = streams.Catalog()
  for registration in args.register:
    key, _, path = registration.partition('=')
    parts = key.split('/')
    if len(parts) != 3 or not all(parts) or not path:
      raise errors.SchemaError(f'expected TYPE/BENCHMARK/TASK=PATH, got {registration!r}',
                               field='--register')
    catalog.register(*parts, path)
  config = _json_argument(args.config, '--config')
  env_cfg = _json_argument(args.env_cfg, '--env_cfg') if args.env_cfg else None
  unit = {
      'steps': lambda: streams.StepUnit(),
      'transitions': lambda: streams.Transitions(),
      'n_step': lambda: streams.NStepTransitions(args.n),
      'windows': lambda: streams.Windows(args.n),
      'pairs': lambda: streams.TargetPairs(args.n),
  }[args.unit]()
  try:
    memory_budget = None if args.memory_budget is None else budget.parse_bytes(args.memory_budget)
    shuffle = None if args.no_shuffle else streams.Shuffle(
        args.shuffle_episodes, args.shuffle_units, memory_budget=memory_budget)
    stream = streams.stream(
        config, unit=unit, batch_size=args.batch, seed=args.seed, shuffle=shuffle,
        mix=streams.Mix(exhaustion=streams.Exhaustion(args.exhaustion)),
        projection=streams.Projection(args.projection), num_shards=args.num_shards,
        shard_index=args.shard_index, env_cfg=env_cfg,
        catalog=catalog, cache_dir=args.cache_dir, data_dir=args.data_dir)
  except ValueError as e:  # Sizes that cannot work (budget, batch, shards); typed errors go on.
    if isinstance(e, errors.RLDSSuiteError):
      raise
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(stream.description)
  print(describe_spec(stream.element_spec))
  start, batches, units = time.perf_counter(), 0, 0
  for batch in itertools.islice(streams.as_numpy(stream), args.take):
    batches += 1
    units += len(batch[streams.DATASET_INDEX])
  seconds = time.perf_counter() - start
  print(json.dumps({'batches': batches, 'units': units, 'seconds': round(seconds, 3),
                    'units_per_second': round(units / max(seconds, 1e-9))}))
  return 0


def _json_argument(text: str, flag: str):
  try:
    return json.loads(text)
  except json.JSONDecodeError as e:
    raise errors.SchemaError(f'not JSON: {e}', field=flag) from None
