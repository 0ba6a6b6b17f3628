"""gymnasium -> dm_env, built on dm-env-wrappers' `GymnasiumWrapper`.

We keep its step logic (terminated -> termination with discount 0, truncated -> truncation with
discount 1, rewards cast to the reward spec) and fix what it gets wrong or lacks:
  * `Discrete(n, start=k)` and `MultiDiscrete(nvec, start=k)` specs ignore `start`, so a spec-driven
    policy would send invalid actions; we declare [start, start + n - 1] bounds.
  * `reset` cannot seed; we pass `seed` to the first reset (gymnasium's way to seed an episode
    stream) and to the action space.
  * Tuple spaces give every element the tuple's name; we name them by position.
  * Rendered frames: `render_frame()` returns the gymnasium env's `rgb_array` render.

Imports gymnasium: import this module only through `rlds_suite.envs`, which checks the extra first.
"""

from __future__ import annotations

from typing import Any, Optional

import dm_env
from dm_env import specs
from dm_env_wrappers._src import gymnasium_wrapper
from gymnasium import spaces
import numpy as np

from rlds_suite.core import errors


def space_to_spec(space: spaces.Space, name: Optional[str] = None) -> Any:
  """A gymnasium space -> a (nested) dm_env spec (Box, Discrete, MultiDiscrete, MultiBinary, Dict,
  Tuple)."""
  if isinstance(space, spaces.Discrete):
    start = int(space.start)
    if start == 0:
      return specs.DiscreteArray(num_values=int(space.n), dtype=space.dtype, name=name)
    return specs.BoundedArray((), space.dtype, minimum=start, maximum=start + int(space.n) - 1,
                              name=name)
  if isinstance(space, spaces.MultiDiscrete):
    start = np.asarray(space.start, dtype=space.dtype)
    return specs.BoundedArray(space.shape, space.dtype, minimum=start,
                              maximum=start + space.nvec - 1, name=name)
  if isinstance(space, spaces.Tuple):
    return tuple(space_to_spec(s, f'{name}/{i}' if name else str(i))
                 for i, s in enumerate(space.spaces))
  if isinstance(space, spaces.Dict):
    return {key: space_to_spec(value, key) for key, value in space.spaces.items()}
  try:
    return gymnasium_wrapper._convert_to_spec(space, name=name)  # pylint: disable=protected-access
  except ValueError as e:
    raise errors.SchemaError(f'unsupported gymnasium space {space}', field=name) from e


class GymnasiumEnvironment(gymnasium_wrapper.GymnasiumWrapper):
  """A gymnasium env as a dm_env environment (see the module docstring)."""

  def __init__(self, env: Any, seed: Optional[int] = None, image_fields: tuple[str, ...] = (),
               records_frames: bool = False):
    super().__init__(env)
    self._observation_spec = space_to_spec(env.observation_space, 'observation')
    self._action_spec = space_to_spec(env.action_space, 'action')
    self._seed = seed
    self.image_fields = tuple(image_fields)
    self.records_frames = records_frames
    if seed is not None:
      env.action_space.seed(seed)

  def reset(self) -> dm_env.TimeStep:
    self._reset_next_step = False
    seed, self._seed = self._seed, None
    observation, info = self._environment.reset(seed=seed)
    self._last_info = info
    return dm_env.restart(observation)

  def render_frame(self) -> np.ndarray:
    return np.asarray(self._environment.render())
