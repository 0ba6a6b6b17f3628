"""A dm_env wrapper that declares what recording needs to know and the environment cannot say."""

from __future__ import annotations

from typing import Any, Callable, Optional

import dm_env
import numpy as np


class DeclaredEnvironment(dm_env.Environment):
  """Forwards everything to `env`, and declares `image_fields` (paths stored as images) and how to
  render a frame (`render_frame`, recorded as step metadata when `records_frames`)."""

  def __init__(self, env: dm_env.Environment, *, image_fields: tuple[str, ...] = (),
               render: Optional[Callable[[], np.ndarray]] = None, records_frames: bool = False):
    self._environment = env
    self.image_fields = tuple(image_fields)
    self._render = render
    self.records_frames = records_frames

  def reset(self) -> dm_env.TimeStep:
    return self._environment.reset()

  def step(self, action: Any) -> dm_env.TimeStep:
    return self._environment.step(action)

  def observation_spec(self) -> Any:
    return self._environment.observation_spec()

  def action_spec(self) -> Any:
    return self._environment.action_spec()

  def reward_spec(self) -> Any:
    return self._environment.reward_spec()

  def discount_spec(self) -> Any:
    return self._environment.discount_spec()

  def render_frame(self) -> np.ndarray:
    if self._render is None:
      raise NotImplementedError('this environment declares no frame renderer')
    return np.asarray(self._render())

  def close(self) -> None:
    self._environment.close()

  @property
  def environment(self) -> dm_env.Environment:
    return self._environment

  def __getattr__(self, name: str) -> Any:
    if name.startswith('__'):
      raise AttributeError(name)
    return getattr(self._environment, name)
