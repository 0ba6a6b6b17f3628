"""procgen:<game> environments through procgen's gym3 API (procgen-mirror).

gym3 environments never reset on request: after an episode ends they start the next one
themselves, and `observe()` reports `first=True` with the reward of the previous episode's last
step and the next episode's first observation. The final observation of an episode is therefore
not available: the last step repeats the observation the last action was taken at, and the next
`reset()` returns the observation gym3 already started the next episode with. Procgen does not say why an episode ended; episodes that reach procgen's step limit
(`timeout_steps`, 1000 for every game) are truncations, all others (death, level completed)
terminations.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from typing import Any, Optional

import dm_env
from dm_env import specs
import numpy as np

from rlds_suite import envs
from rlds_suite.core import errors

SETUP_HINT = ('bash scripts/setup_envs.sh (procgen-mirror declares numpy<2 and old gym; the script '
              'installs procgen-mirror, gym3 and gym 0.26 with --no-deps, which work on numpy 2)')


class ProcgenEnvironment(dm_env.Environment):
  """One procgen game (num=1) as a dm_env environment with observation {'rgb': [64, 64, 3]}."""

  def __init__(self, game: str, *, seed: Optional[int] = None, start_level: int = 0,
               num_levels: int = 0, distribution_mode: str = 'hard', timeout_steps: int = 1000,
               render_frames: bool = False):
    # procgen imports gym 0.26, which prints a deprecation notice to stderr when first imported.
    with contextlib.redirect_stderr(io.StringIO()):
      procgen = envs.require('procgen', 'procgen', SETUP_HINT)
    games = importlib.import_module('procgen.env').ENV_NAMES
    if game not in games:  # procgen itself aborts the process on an unknown game (C++ map::at).
      raise errors.UnknownEnvironmentError(
          f'no procgen game {game!r}; games: {", ".join(games)}', field='env')
    self._make = lambda: procgen.ProcgenGym3Env(
        num=1, env_name=game, start_level=start_level, num_levels=num_levels,
        distribution_mode=distribution_mode, rand_seed=0 if seed is None else seed,
        render_mode='rgb_array' if render_frames else None)
    self._env = self._make()
    self._timeout = timeout_steps
    self._steps: Optional[int] = None  # None: no episode in progress.
    self._next_first: Optional[np.ndarray] = None
    self._previous_rgb: Optional[np.ndarray] = None
    self._num_actions = int(self._env.ac_space.eltype.n)
    self.image_fields = ('observation/rgb',) + ((envs.FRAME,) if render_frames else ())
    self.records_frames = render_frames

  def reset(self) -> dm_env.TimeStep:
    if self._steps is not None:
      self._env.close()  # Mid-episode: gym3 cannot reset, so start afresh.
      self._env = self._make()
      self._next_first = None
    if self._next_first is None:
      self._next_first = self._env.observe()[1]['rgb'][0]
    self._steps = 0
    self._previous_rgb, self._next_first = self._next_first, None
    return dm_env.restart({'rgb': self._previous_rgb})

  def step(self, action: Any) -> dm_env.TimeStep:
    if self._steps is None:
      return self.reset()
    self._env.act(np.asarray([action], dtype=np.int32))
    reward, observation, first = self._env.observe()
    self._steps += 1
    reward = np.float32(reward[0])
    if not first[0]:
      self._previous_rgb = observation['rgb'][0]
      return dm_env.transition(reward, {'rgb': self._previous_rgb})
    final = {'rgb': self._previous_rgb}  # See the module docstring.
    self._next_first = observation['rgb'][0]
    ended_by_timeout = self._steps >= self._timeout
    self._steps = None
    if ended_by_timeout:
      return dm_env.truncation(reward, final)
    return dm_env.termination(reward, final)

  def observation_spec(self) -> Any:
    return {'rgb': specs.BoundedArray((64, 64, 3), np.uint8, 0, 255, name='rgb')}

  def action_spec(self) -> Any:
    return specs.DiscreteArray(self._num_actions, dtype=np.int32, name='action')

  def reward_spec(self) -> Any:
    return specs.Array((), np.float32, name='reward')

  def render_frame(self) -> np.ndarray:
    return np.asarray(self._env.get_info()[0]['rgb'])

  def close(self) -> None:
    self._env.close()


def make_procgen(game: str, *, seed: Optional[int] = None, **options: Any) -> dm_env.Environment:
  return ProcgenEnvironment(game, seed=seed, **options)
