"""What `envs.make` offers on this machine, for the new-study form: per family, whether it can be
made here, its environment names and its options (from the family factory's signature).

Families whose packages are missing are listed with the reason, not hidden.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any, Callable

# family -> (module under rlds_suite.envs, factory, lister of names). The factories are those
# envs.make calls; a name lister imports the family's package only when the catalogue is asked for.
_FAMILIES: dict[str, tuple[str, str, str]] = {
    'gymnasium': ('gymnasium_envs', 'make_gymnasium', '_gymnasium_ids'),
    'atari': ('atari', 'make_atari', '_atari_games'),
    'dm_control': ('control_suite', 'make_dm_control', '_dm_control_tasks'),
    'procgen': ('procgen_games', 'ProcgenEnvironment', '_procgen_games'),
}
_TYPES = {'int': 'int', 'float': 'float', 'bool': 'bool', 'str': 'text'}


@functools.lru_cache(maxsize=1)
def catalogue() -> list[dict[str, Any]]:
  """[{family, available, error, names, options: [{name, type, default, nullable}], extra}]."""
  out = []
  for family, (module, factory, lister) in _FAMILIES.items():
    entry: dict[str, Any] = {'family': family, 'available': False, 'error': '', 'names': [],
                             'options': [], 'extra_options': False}
    try:
      make = getattr(importlib.import_module(f'rlds_suite.envs.{module}'), factory)
      entry['options'], entry['extra_options'] = _options(make)
      entry['names'] = globals()[lister]()
      entry['available'] = bool(entry['names'])
    except Exception as e:  # pylint: disable=broad-except  # Any missing piece: not available.
      entry['error'] = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
    out.append(entry)
  return out


def _options(make: Callable[..., Any]) -> tuple[list[dict[str, Any]], bool]:
  """The keyword options of a family factory, typed from its annotations."""
  options, extra = [], False
  for parameter in list(inspect.signature(make).parameters.values())[1:]:
    if parameter.kind == parameter.VAR_KEYWORD:
      extra = True
      continue
    annotation = str(parameter.annotation)
    nullable = 'Optional' in annotation or 'None' in annotation
    kind = next((t for name, t in _TYPES.items() if name in annotation.replace('Optional', '')),
                'text')
    default = None if parameter.default is inspect.Parameter.empty else parameter.default
    options.append({'name': parameter.name, 'type': kind, 'default': default,
                    'nullable': nullable})
  return options, extra


def _gymnasium_ids() -> list[str]:
  import gymnasium  # pylint: disable=g-import-not-at-top
  return sorted(name for name, spec in gymnasium.envs.registry.items()
                if '/' not in name and str(spec.entry_point).startswith('gymnasium'))


def _atari_games() -> list[str]:
  import ale_py  # pylint: disable=g-import-not-at-top
  import gymnasium  # pylint: disable=g-import-not-at-top
  gymnasium.register_envs(ale_py)
  return sorted(name[len('ALE/'):-len('-v5')] for name in gymnasium.envs.registry
                if name.startswith('ALE/') and name.endswith('-v5'))


def _dm_control_tasks() -> list[str]:
  from dm_control import suite  # pylint: disable=g-import-not-at-top
  return sorted(f'{domain}-{task}' for domain, task in suite.ALL_TASKS)


def _procgen_games() -> list[str]:
  return sorted(importlib.import_module('procgen.env').ENV_NAMES)
