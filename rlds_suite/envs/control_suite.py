"""dm_control:<domain>-<task> environments (the DeepMind Control Suite), state or pixels.

The environment runs in a child process (`_dm_control_worker.py`) that never imports TensorFlow:
with TensorFlow loaded, importing dm_control's EGL renderer crashes the process. Rendering there is
headless (MUJOCO_GL=egl unless set; needs the apt packages libegl1 and libgl1).
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import struct
import subprocess
import sys
from typing import Any, Optional

import dm_env

from rlds_suite import envs
from rlds_suite.core import errors
from rlds_suite.envs import declared

_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_dm_control_worker.py')


class SubprocessEnvironment(dm_env.Environment):
  """A dm_control environment living in a child process; calls are forwarded over a pipe."""

  def __init__(self, options: dict[str, Any]):
    child_env = dict(os.environ)
    child_env.setdefault('MUJOCO_GL', 'egl')
    self._process = subprocess.Popen([sys.executable, _WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=child_env)
    self._closed = False
    specs = self._call('init', options)
    self._observation_spec, self._action_spec, self._reward_spec, self._discount_spec = specs

  def _call(self, command: str, argument: Any = None) -> Any:
    data = pickle.dumps((command, argument), protocol=pickle.HIGHEST_PROTOCOL)
    try:
      self._process.stdin.write(struct.pack('<Q', len(data)) + data)
      self._process.stdin.flush()
      header = self._process.stdout.read(8)
      if len(header) < 8:
        raise EOFError('no reply')
      status, value = pickle.loads(self._process.stdout.read(struct.unpack('<Q', header)[0]))
    except (EOFError, OSError) as e:
      raise errors.RLDSSuiteError(
          f'the dm_control worker process died during {command!r} (exit code '
          f'{self._process.poll()}); see its stderr', field='dm_control') from e
    if status == 'error':
      raise errors.RLDSSuiteError(f'dm_control failed during {command!r}:\n{value}',
                                  field='dm_control')
    return value

  def reset(self) -> dm_env.TimeStep:
    return self._call('reset')

  def step(self, action: Any) -> dm_env.TimeStep:
    return self._call('step', action)

  def render(self, **render_kwargs: Any):
    return self._call('render', render_kwargs)

  def observation_spec(self) -> Any:
    return self._observation_spec

  def action_spec(self) -> Any:
    return self._action_spec

  def reward_spec(self) -> Any:
    return self._reward_spec

  def discount_spec(self) -> Any:
    return self._discount_spec

  def close(self) -> None:
    if self._closed:
      return
    self._closed = True
    try:
      self._call('close')
    except errors.RLDSSuiteError:
      pass
    self._process.stdin.close()
    self._process.wait(timeout=30)

  def __del__(self):
    if not getattr(self, '_closed', True):
      self._process.kill()


def make_dm_control(domain_task: str, *, seed: Optional[int] = None, pixels: bool = False,
                    pixels_only: bool = True, height: int = 84, width: int = 84,
                    camera_id: int = 0, time_limit: Optional[float] = None,
                    render_frames: bool = False) -> dm_env.Environment:
  """`suite.load(domain, task)`; with `pixels`, observation 'pixels' is an [height, width, 3] image.

  `time_limit` is in seconds of simulated time; episodes end by it as truncations (discount 1).
  """
  domain, sep, task = domain_task.partition('-')
  if not sep:
    raise errors.RLDSSuiteError(f'expected dm_control:<domain>-<task>, got {domain_task!r}',
                                field='env')
  for module in ('dm_control', 'mujoco'):
    if importlib.util.find_spec(module) is None:
      raise errors.MissingDependencyError(
          f'{module} is needed for dm_control environments; install it with: '
          f'pip install rlds_suite[dm_control]', field='dm_control')
  render_kwargs = dict(height=height, width=width, camera_id=camera_id)
  env = SubprocessEnvironment(dict(
      domain=domain, task=task.replace('-', '_'), seed=seed, time_limit=time_limit,
      pixels=pixels, pixels_only=pixels_only, render_kwargs=render_kwargs))
  images = ('observation/pixels',) if pixels else ()
  return declared.DeclaredEnvironment(
      env, image_fields=images + ((envs.FRAME,) if render_frames else ()),
      render=lambda: env.render(**render_kwargs), records_frames=render_frames)
