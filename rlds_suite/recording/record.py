"""`record`: roll a policy out in an environment and write the episodes as an RLDS dataset."""

from __future__ import annotations

import contextlib
import datetime
import os
import re
from typing import Any, Callable, Iterable, Mapping, Optional, Union

import dm_env
import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import progress as progress_lib
from rlds_suite.recording import backend as backend_lib
from rlds_suite.recording import signals

Policy = Callable[[dm_env.TimeStep], Any]


def random_policy(action_spec: Any, seed: Optional[int] = None) -> Policy:
  """A policy drawing uniform actions within a (nested) bounded or discrete dm_env action spec."""
  import tree  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)

  def sample(spec):
    minimum = getattr(spec, 'minimum', None)
    maximum = getattr(spec, 'maximum', None)
    if minimum is None or maximum is None:
      raise errors.SchemaError(f'a random policy needs bounded action specs, got {spec!r}',
                               field='action')
    dtype = np.dtype(spec.dtype)
    low = np.broadcast_to(minimum, spec.shape)
    high = np.broadcast_to(maximum, spec.shape)
    if np.issubdtype(dtype, np.integer) or dtype == np.bool_:
      return rng.integers(low, high, endpoint=True, size=spec.shape).astype(dtype)
    return rng.uniform(low, high, size=spec.shape).astype(dtype)

  def policy(timestep: dm_env.TimeStep) -> Any:  # pylint: disable=unused-argument
    return tree.map_structure(sample, action_spec)

  return policy


def record(env: Union[str, dm_env.Environment],
           policy: Union[str, Policy] = 'random',
           *,
           episodes: int,
           data_dir: Union[str, os.PathLike],
           name: Optional[str] = None,
           seed: Optional[int] = None,
           env_options: Optional[Mapping[str, Any]] = None,
           max_episode_steps: Optional[int] = None,
           step_fn: Optional[Callable[..., Any]] = None,
           episode_fn: Optional[Callable[..., Any]] = None,
           image_fields: Optional[Iterable[str]] = None,
           progress: bool = True,
           handle_signals: bool = True,
           **writer_kwargs) -> backend_lib.RLDSWriter:
  """Records `episodes` episodes of `policy` in `env` into the dataset directory `data_dir`.

  `env` is a dm_env environment or an `rlds_suite.envs.make` spec ('gymnasium:CartPole-v1',
  made with `env_options`); `policy` maps a timestep to an action, or is 'random'. Episodes cut at
  `max_episode_steps` actions are written as truncated. The dataset is named after the environment
  unless `name` is given. With `handle_signals`, SIGUSR1 and SIGTERM checkpoint (see
  rlds_suite.recording.signals). The dataset's provenance (environment, options, seed, policy,
  start and end time, files' sha256) is written when recording ends. Returns the closed writer
  (counts of episodes written).
  """
  import envlogger  # pylint: disable=g-import-not-at-top
  from rlds_suite import envs  # pylint: disable=g-import-not-at-top
  owns_env = isinstance(env, str)
  env_spec = env if owns_env else type(env).__name__
  name = name or dataset_name_for(env_spec)
  started = _now()
  if owns_env:
    env = envs.make(env, seed=seed, **(env_options or {}))
  if image_fields is None:
    image_fields = envs.image_fields(env)
  policy_name = policy if isinstance(policy, str) else getattr(policy, '__qualname__', repr(policy))
  if isinstance(policy, str):
    if policy != 'random':
      raise errors.RLDSSuiteError(f"unknown policy {policy!r}; use 'random' or a callable",
                                  field='policy')
    policy = random_policy(env.action_spec(), seed)
  if step_fn is None and envs.records_frames(env):
    step_fn = envs.frame_step_fn
  writer = backend_lib.RLDSWriter(data_dir, name=name, env=env, image_fields=image_fields,
                                  **writer_kwargs)
  logged = envlogger.EnvLogger(env, backend=writer, step_fn=step_fn, episode_fn=episode_fn)
  bar = _progress_bar(episodes, progress)
  try:
    with (signals.preemption_handlers(writer) if handle_signals else contextlib.nullcontext()):
      steps = 0
      for _ in range(episodes):
        timestep = logged.reset()
        actions = 0
        while not timestep.last():
          if max_episode_steps is not None and actions >= max_episode_steps:
            break
          timestep = logged.step(policy(timestep))
          actions += 1
        steps += actions
        progress_lib.count_episode(bar, steps)
      writer.close()
  finally:
    bar.close()
    writer.close()
    if owns_env:
      env.close()
  if writer.num_episodes_written:
    from rlds_suite.tfds import provenance  # pylint: disable=g-import-not-at-top
    provenance.write(data_dir, previous_runs=True, produced_by={
        'recording': {'env': env_spec, 'env_options': dict(env_options or {}), 'seed': seed,
                      'policy': policy_name, 'episodes_requested': episodes,
                      'episodes_written': writer.num_episodes_written,
                      'max_episode_steps': max_episode_steps, 'started': started,
                      'ended': _now()}})
  return writer


def dataset_name_for(env_spec: str) -> str:
  """A TFDS dataset name from an environment spec: 'gymnasium:CartPole-v1' -> 'gymnasium_cartpole_v1'."""
  name = re.sub(r'[^a-z0-9]+', '_', env_spec.lower())
  name = name.strip('_') or 'rollouts'
  return name if name[0].isalpha() else f'env_{name}'


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')


def _progress_bar(total: int, enabled: bool):
  from tqdm import auto  # pylint: disable=g-import-not-at-top
  return auto.tqdm(total=total, unit='episode', disable=not enabled)
