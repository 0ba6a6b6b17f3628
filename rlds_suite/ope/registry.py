"""DOPE's policy registries (deep_ope's d4rl_policies.json and rlunplugged_policies.json, shipped
as package data; see registries/README.md): policy paths, tasks, agents and Monte Carlo returns."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Optional, Sequence

from rlds_suite.core import errors

_HERE = os.path.join(os.path.dirname(__file__), 'registries')
REGISTRIES = {'d4rl': 'd4rl_policies.json', 'rlunplugged': 'rlunplugged_policies.json'}


@dataclasses.dataclass(frozen=True)
class PolicyEntry:
  policy_path: str
  tasks: tuple[str, ...]
  agent: str
  return_mean: float
  return_std: float
  registry: str


def _entry(raw: Any, registry: str, source: str) -> PolicyEntry:
  if not isinstance(raw, dict) or 'policy_path' not in raw or 'return_mean' not in raw:
    raise errors.SchemaError('registry entries need policy_path and return_mean', path=source)
  tasks = raw.get('task.task_names') or [raw.get('task.task_name', '')]
  std = raw.get('return_std:', raw.get('return_std', float('nan')))  # d4rl's key has a colon.
  return PolicyEntry(str(raw['policy_path']), tuple(str(t) for t in tasks),
                     str(raw.get('agent_name', '')), float(raw['return_mean']), float(std), registry)


def load(path: str, registry: str = 'custom') -> list[PolicyEntry]:
  """Entries of a registry file in deep_ope's schema (a JSON list of objects)."""
  try:
    with open(path) as f:
      raw = json.load(f)
  except OSError as e:
    raise errors.SchemaError(f'cannot read registry: {e.strerror}', path=path) from None
  except json.JSONDecodeError as e:
    raise errors.SchemaError(f'not JSON: {e}', path=path) from None
  if not isinstance(raw, list):
    raise errors.SchemaError('a policy registry is a JSON list of policies', path=path)
  return [_entry(r, registry, path) for r in raw]


def shipped_path(name: str) -> str:
  path = os.path.join(_HERE, REGISTRIES[name])
  if not os.path.exists(path):
    raise errors.SchemaError('registry file missing from the package', path=path)
  return path


def entries(task: Optional[str] = None,
            registries: Sequence[str] = tuple(REGISTRIES)) -> list[PolicyEntry]:
  """Shipped entries, those evaluated on `task` ('halfcheetah-medium-v0', 'cartpole_swingup')
  only when given."""
  found = [e for name in registries for e in load(shipped_path(name), name)]
  return [e for e in found if task is None or task in e.tasks]


def ground_truth(path: str, policies: Sequence[str]) -> dict[str, float]:
  """True values of `policies` from a JSON file: a {policy: value} object, or a list in deep_ope's
  registry schema matched on policy_path (the policy's path ends with it)."""
  try:
    with open(path) as f:
      raw = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise errors.SchemaError(f'cannot read ground truth: {e}', path=path) from None
  if isinstance(raw, dict):
    table = {str(k): float(v) for k, v in raw.items()}
  else:
    table = {e.policy_path: e.return_mean for e in load(path)}
  found = {}
  for policy in policies:
    match = [v for k, v in table.items()
             if policy == k or os.fspath(policy).replace(os.sep, '/').endswith('/' + k) or
             os.path.basename(policy) == k]
    if match:
      found[policy] = match[0]
  return found
