"""Environments for recording: `make('family:name', **options)` -> a dm_env.Environment.

  gymnasium:CartPole-v1      any registered gymnasium id (extra: gymnasium)
  atari:Pong                 ale-py, with frame_skip, grayscale, resize, frame_stack (extra: atari)
  dm_control:cartpole-swingup  state, or pixels=True (extra: dm_control; headless via MUJOCO_GL=egl)
  procgen:coinrun            procgen's gym3 API (scripts/setup_envs.sh installs it)

Optional packages are imported only when a family is made; a missing one raises
MissingDependencyError naming the extra to install.
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Optional

import dm_env
import numpy as np

from rlds_suite.core import errors

FRAME = 'frame'  # Step-metadata key of rendered frames.

# family -> (module under rlds_suite.envs, factory function).
_FAMILIES = {
    'gymnasium': ('gymnasium_envs', 'make_gymnasium'),
    'atari': ('atari', 'make_atari'),
    'dm_control': ('control_suite', 'make_dm_control'),
    'procgen': ('procgen_games', 'make_procgen'),
}


def check_spec(spec: str) -> tuple[str, str]:
  """(family, name) of a 'family:name' spec, refused in one line before anything heavy is
  imported; a gymnasium id is looked up in gymnasium's registry (no environment is made)."""
  family, sep, name = spec.partition(':')
  if not sep or family not in _FAMILIES or not name:
    raise errors.RLDSSuiteError(
        f'expected "family:name" with family in {sorted(_FAMILIES)}, got {spec!r}', field='env')
  if family == 'gymnasium':
    try:
      import gymnasium  # pylint: disable=g-import-not-at-top
    except ImportError:
      return family, name  # make() names the extra to install.
    try:
      gymnasium.spec(name)
    except gymnasium.error.Error as e:
      raise errors.UnknownEnvironmentError(f'{spec}: {e}', field='env') from None
  return family, name


def make(spec: str, *, seed: Optional[int] = None, **options: Any) -> dm_env.Environment:
  """A dm_env environment from 'family:name' (see the module docstring); `options` go to the
  family's factory (e.g. `frame_skip=4`, `pixels=True`, `render_frames=True`)."""
  family, _ = check_spec(spec)
  name = spec.partition(':')[2]
  module, factory = _FAMILIES[family]
  make_family = getattr(importlib.import_module(f'rlds_suite.envs.{module}'), factory)
  try:
    return make_family(name, seed=seed, **options)
  except errors.RLDSSuiteError:
    raise
  except TypeError as e:
    if 'unexpected keyword argument' not in str(e):
      raise
    raise errors.UnknownEnvironmentError(
        f'{spec} takes no option {_unexpected_keyword(e)!r} (options: {", ".join(options)})',
        field='option') from e
  except Exception as e:  # pylint: disable=broad-except
    if type(e).__name__ not in ('NameNotFound', 'NamespaceNotFound', 'VersionNotFound',
                                'DeprecatedEnv', 'UnregisteredEnv'):
      raise
    raise errors.UnknownEnvironmentError(f'{spec}: {e}', field='env') from e


def _unexpected_keyword(error: TypeError) -> str:
  """The keyword a TypeError says was unexpected ('?' when it does not say)."""
  found = re.search(r"unexpected keyword argument '([^']+)'", str(error))
  return found.group(1) if found else '?'


def require(module: str, extra: str, hint: str = '') -> Any:
  """Imports an optional module, or raises MissingDependencyError naming the extra."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    install = hint or f'pip install rlds_suite[{extra}]'
    raise errors.MissingDependencyError(
        f'{module} is needed for this environment and failed to import ({e}); install it with: '
        f'{install}', field=extra) from e


def image_fields(env: dm_env.Environment) -> tuple[str, ...]:
  """Paths ('observation', 'observation/pixels', 'frame') the environment declares as images."""
  return tuple(getattr(env, 'image_fields', ()) or ())


def records_frames(env: dm_env.Environment) -> bool:
  return bool(getattr(env, 'records_frames', False))


def frame_step_fn(timestep: dm_env.TimeStep, action: Any, env: Any) -> dict[str, np.ndarray]:  # pylint: disable=unused-argument
  """An EnvLogger `step_fn` recording the rendered frame of each timestep as step metadata."""
  return {FRAME: env.render_frame()}


__all__ = ['make', 'image_fields', 'records_frames', 'frame_step_fn', 'require', 'FRAME']
