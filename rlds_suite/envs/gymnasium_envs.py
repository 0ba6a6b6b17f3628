"""gymnasium:<id> environments."""

from __future__ import annotations

from typing import Any, Optional

import dm_env

from rlds_suite import envs


def make_gymnasium(env_id: str, *, seed: Optional[int] = None, render_frames: bool = False,
                   max_episode_steps: Optional[int] = None, **kwargs: Any) -> dm_env.Environment:
  """`gymnasium.make(env_id)` as a dm_env environment; `render_frames` records rgb frames."""
  gym = envs.require('gymnasium', 'gymnasium')
  envs.require('dm_env_wrappers', 'gymnasium')
  from rlds_suite.envs import gymnasium_adapter  # pylint: disable=g-import-not-at-top
  if render_frames:
    kwargs['render_mode'] = 'rgb_array'
  env = gym.make(env_id, max_episode_steps=max_episode_steps, **kwargs)
  return gymnasium_adapter.GymnasiumEnvironment(
      env, seed=seed, image_fields=(envs.FRAME,) if render_frames else (),
      records_frames=render_frames)
