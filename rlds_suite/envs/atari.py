"""atari:<Game> environments (ale-py through gymnasium), with the usual preprocessing."""

from __future__ import annotations

from typing import Optional

import dm_env

from rlds_suite import envs


def make_atari(game: str, *, seed: Optional[int] = None, frame_skip: int = 4,
               grayscale: bool = False, resize: Optional[int] = None, frame_stack: int = 1,
               sticky_actions: float = 0.25, noop_max: int = 0, full_action_space: bool = False,
               max_episode_steps: Optional[int] = None,
               render_frames: bool = False) -> dm_env.Environment:
  """ALE `game` ('Pong') as a dm_env environment.

  Observations are [H, W, 3] RGB or [H, W, 1] grayscale frames, declared as images; `resize` makes
  them `resize` x `resize` (AtariPreprocessing, which needs OpenCV); `frame_stack` > 1 stacks the
  last frames as a [k, H, W, C] tensor (not an image). Episodes cut at `max_episode_steps` are
  truncations. `sticky_actions` is ALE v5's repeat-action probability.
  """
  gym = envs.require('gymnasium', 'atari')
  ale_py = envs.require('ale_py', 'atari')
  envs.require('dm_env_wrappers', 'gymnasium')
  from gymnasium import wrappers  # pylint: disable=g-import-not-at-top
  from rlds_suite.envs import gymnasium_adapter  # pylint: disable=g-import-not-at-top
  gym.register_envs(ale_py)
  common = dict(repeat_action_probability=sticky_actions, full_action_space=full_action_space,
                render_mode='rgb_array' if render_frames else None)
  if resize is None and noop_max == 0:
    env = gym.make(f'ALE/{game}-v5', frameskip=frame_skip,
                   obs_type='grayscale' if grayscale else 'rgb', **common)
    if grayscale:
      env = wrappers.ReshapeObservation(env, env.observation_space.shape + (1,))
  else:
    envs.require('cv2', 'atari')
    env = gym.make(f'ALE/{game}-v5', frameskip=1, **common)
    height, width = env.observation_space.shape[:2]
    env = wrappers.AtariPreprocessing(
        env, frame_skip=frame_skip, noop_max=noop_max,
        screen_size=resize if resize is not None else (width, height),
        grayscale_obs=grayscale, grayscale_newaxis=True)
  if frame_stack > 1:
    env = wrappers.FrameStackObservation(env, frame_stack)
  if max_episode_steps is not None:
    env = wrappers.TimeLimit(env, max_episode_steps)  # Counts agent steps, after frame skipping.
  images = (('observation',) if frame_stack == 1 else ()) + ((envs.FRAME,) if render_frames else ())
  return gymnasium_adapter.GymnasiumEnvironment(env, seed=seed, image_fields=images,
                                                records_frames=render_frames)
