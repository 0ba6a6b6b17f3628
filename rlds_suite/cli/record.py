"""`rlds-suite record --env gymnasium:CartPole-v1 --policy random --episodes 10 --out DIR`."""

from __future__ import annotations

import argparse
import json
import sys


def register(subparsers) -> None:
  parser = subparsers.add_parser('record', help='Roll a policy out in an environment into an RLDS '
                                 'dataset directory.')
  parser.add_argument('--env', required=True,
                      help='family:name, e.g. gymnasium:CartPole-v1, atari:Pong, '
                      'dm_control:cartpole-swingup, procgen:coinrun')
  parser.add_argument('--policy', default='random', choices=('random',),
                      help="policy (only 'random' from the command line; a callable from Python)")
  parser.add_argument('--episodes', type=_at_least_one, required=True,
                      help='number of episodes to record')
  parser.add_argument('--out', required=True, help='dataset directory (appended to if it exists)')
  parser.add_argument('--name', default=None,
                      help='dataset name (default: after the environment, e.g. gymnasium_cartpole_v1)')
  parser.add_argument('--seed', type=int, default=None,
                      help='seeds the environment and the random policy')
  parser.add_argument('--max_episode_steps', type=int, default=None,
                      help='cut episodes after this many actions (truncation)')
  parser.add_argument('--option', action='append', default=[], metavar='KEY=VALUE',
                      help='environment option, e.g. frame_skip=4, pixels=true (JSON values)')
  parser.add_argument('--flush_seconds', type=float, default=5.0,
                      help='write ended episodes to disk at least this often: a SIGKILL loses at '
                      'most the last flush_seconds and the episode in flight')
  parser.add_argument('--no_progress', action='store_true', help='no progress bar')
  parser.set_defaults(func=run)


def _at_least_one(text: str) -> int:
  """argparse type: refuses 0 and negative counts (nothing to record) before anything starts."""
  try:
    value = int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f'not an integer: {text!r}') from None
  if value < 1:
    raise argparse.ArgumentTypeError(f'{value}: nothing to record; give 1 or more')
  return value


def _parse_options(pairs: list[str]) -> dict:
  options = {}
  for pair in pairs:
    key, _, value = pair.partition('=')
    try:
      options[key] = json.loads(value)
    except json.JSONDecodeError:
      options[key] = value
  return options


def run(args) -> int:
  """Records; Ctrl-C says what was kept and exits 130 (the shell's code for SIGINT)."""
  from rlds_suite import envs  # pylint: disable=g-import-not-at-top
  envs.check_spec(args.env)  # A misspelt environment is told before TensorFlow is imported.
  try:
    from rlds_suite import recording  # pylint: disable=g-import-not-at-top
    writer = recording.record(args.env, args.policy, episodes=args.episodes, data_dir=args.out,
                              name=args.name, seed=args.seed,
                              env_options=_parse_options(args.option),
                              max_episode_steps=args.max_episode_steps,
                              flush_seconds=args.flush_seconds, progress=not args.no_progress)
  except KeyboardInterrupt as e:
    kept = e.writer.num_episodes_written if hasattr(e, 'writer') else 0
    print(f'interrupted: {kept} episodes kept in {args.out}', file=sys.stderr)
    return 130
  summary = {'out': args.out, 'episodes_written': writer.num_episodes_written}
  if writer.recovery_report.changed:  # What a killed earlier run left, salvaged first.
    summary['recovered'] = writer.recovery_report.summary()
  print(json.dumps(summary))
  return 0
