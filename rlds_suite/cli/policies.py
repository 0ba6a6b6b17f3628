"""`rlds-suite policies list [--task T]`: DOPE's published policies (deep_ope's registries)."""

from __future__ import annotations


def register(subparsers) -> None:
  parser = subparsers.add_parser(
      'policies', help="List DOPE's published policies for off-policy evaluation (path, agent, "
      'Monte Carlo return).')
  actions = parser.add_subparsers(dest='action', required=True, metavar='ACTION',
                                  help='list: the registries\' policies')
  listing = actions.add_parser('list', help='list the policies (of one task)')
  listing.add_argument('--task', default=None,
                       help="only the policies of this task ('halfcheetah-medium-v0', "
                       "'cartpole_swingup')")
  listing.add_argument('--registry', choices=('d4rl', 'rlunplugged'), action='append',
                       default=None, help='which registry (default both; repeatable)')
  parser.set_defaults(func=run)


def run(args) -> int:
  from rlds_suite.ope import registry  # pylint: disable=g-import-not-at-top
  names = args.registry or list(registry.REGISTRIES)
  found = registry.entries(args.task, names)
  width = max([len(e.policy_path) for e in found] + [11])
  print(f'{"policy_path":<{width}}  {"agent":<8} {"return_mean":>12} {"return_std":>11}  tasks')
  for e in found:
    print(f'{e.policy_path:<{width}}  {e.agent:<8} {e.return_mean:12.2f} {e.return_std:11.2f}  '
          f'{",".join(e.tasks)}')
  print(f'{len(found)} policies; files: gs://gresearch/deep-ope/<registry>/<policy_path> '
        '(pass a local copy with --policy_dir)')
  return 0
