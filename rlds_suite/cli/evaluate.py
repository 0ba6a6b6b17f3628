"""`rlds-suite evaluate DATASET --policies P1 P2 ...`: off-policy estimates of each policy's value
from the dataset alone, with intervals, DOPE's metrics against ground truth, and a scatter plot."""

from __future__ import annotations

import os

ESTIMATORS = ('fqe', 'wis', 'dr', 'mb')


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'evaluate', help='Off-policy evaluation: estimate policies\' values from a dataset (FQE, '
      'weighted IS, doubly robust, model-based) and rank them.')
  parser.add_argument('source', help='dataset directory or registered TFDS name')
  parser.add_argument('--policies', nargs='+', required=True,
                      help='DOPE D4RL policy pickles (.pkl) or SavedModel directories')
  parser.add_argument('--policy_dir', default=None,
                      help='directory the policy paths are relative to (a local copy of '
                      'gs://gresearch/deep-ope/d4rl)')
  parser.add_argument('--estimator', choices=ESTIMATORS, default='fqe',
                      help="default fqe; mb: rollouts in a model made of the dataset's own "
                      'transitions (nearest observation)')
  parser.add_argument('--ground_truth', default=None, metavar='JSON',
                      help='true values: {policy: value} or a DOPE registry (d4rl_policies.json)')
  parser.add_argument('--behaviour', default=None,
                      help='behaviour policy (for wis/dr when the dataset has no log-probs)')
  parser.add_argument('--log_prob_field', default=None,
                      help='step field of behaviour log-probs (default: infos/action_log_probs, '
                      'action_log_probs, ...)')
  parser.add_argument('--discount', type=float, default=0.99,
                      help='discount of the returns estimated (DOPE uses 0.99 for its D4RL tasks)')
  parser.add_argument('--steps', type=int, default=10_000, help='FQE updates per policy')
  parser.add_argument('--batch_size', type=int, default=256, help='transitions per FQE update')
  parser.add_argument('--hidden', default='256,256', help="FQE's hidden layer sizes")
  parser.add_argument('--learning_rate', type=float, default=3e-4, help="FQE's Adam learning rate")
  parser.add_argument('--target_update_period', type=int, default=100,
                      help='FQE updates between copies of the Q network into its target')
  parser.add_argument('--seed', type=int, default=0,
                      help='seeds FQE, the policies\' samples and the bootstrap')
  parser.add_argument('--bootstraps', type=int, default=200, help='resamples for the intervals')
  parser.add_argument('--fqe_refits', type=int, default=0,
                      help="fqe: refit FQE on this many resamples of the episodes for its interval "
                      "(costs as many fits); default 0: resample initial states with Q fixed")
  parser.add_argument('--in_memory', action='store_true',
                      help='FQE reads transitions from memory instead of rlds_suite.streams')
  parser.add_argument('--cache_dir', default=None,
                      help="the stream's decoded-step cache (reused across runs; it speeds up "
                      "FQE's first pass over the stream)")
  parser.add_argument('--store_dir', default=None,
                      help="where FQE keeps the transitions of the stream's first pass for the "
                      'later passes, removed at the end (default: the system temporary directory; '
                      'needs about the decoded dataset\'s size on disk)')
  parser.add_argument('--checkpoint_dir', default=None, help='FQE checkpoints (resumed)')
  parser.add_argument('--plot', default=None, metavar='PNG',
                      help='estimate vs truth scatter (needs --ground_truth)')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.core import errors  # pylint: disable=g-import-not-at-top
  from rlds_suite.ope import evaluation  # pylint: disable=g-import-not-at-top
  from rlds_suite.ope import fqe  # pylint: disable=g-import-not-at-top
  from rlds_suite.ope import registry  # pylint: disable=g-import-not-at-top
  try:
    hidden = tuple(int(h) for h in args.hidden.split(',') if h.strip())
  except ValueError:
    raise errors.UsageError(f'--hidden takes comma-separated sizes, not {args.hidden!r}',
                            field='hidden') from None
  paths = [os.path.join(args.policy_dir, p) if args.policy_dir else p for p in args.policies]
  truth = None
  if args.ground_truth:  # matched on the full paths, keyed by the names as given
    found = registry.ground_truth(args.ground_truth, paths)
    truth = {name: found[path] for name, path in zip(args.policies, paths) if path in found}
  config = fqe.FQEConfig(discount=args.discount, hidden=hidden, learning_rate=args.learning_rate,
                         batch_size=args.batch_size, num_steps=args.steps,
                         target_update_period=args.target_update_period, seed=args.seed)
  report = evaluation.evaluate(args.source, paths, estimator=args.estimator, config=config,
                               behaviour=args.behaviour, ground_truth=truth,
                               resamples=args.bootstraps, use_stream=not args.in_memory,
                               progress=True, log_prob_field=args.log_prob_field,
                               names=args.policies, checkpoint_dir=args.checkpoint_dir,
                               cache_dir=args.cache_dir, store_dir=args.store_dir,
                               fqe_refits=args.fqe_refits)
  print(report.table())
  if args.plot:
    evaluation.plot(report, args.plot, title=f'{args.source}')
    print(f'plot: {args.plot}')
  return 0
