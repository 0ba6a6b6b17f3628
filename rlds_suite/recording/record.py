"""`record`: roll a policy out in an environment and write the episodes as an RLDS dataset."""

from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Callable, Iterable, Mapping, Optional, Union

import dm_env
import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import progress as progress_lib
from rlds_suite.recording import backend as backend_lib
from rlds_suite.recording import run_provenance
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


class RecordingInterrupted(KeyboardInterrupt):
  """Ctrl-C stopped `record`: the writer was closed first (the episode in flight written as
  truncated); `writer` says how many episodes were kept."""

  def __init__(self, writer: backend_lib.RLDSWriter):
    super().__init__(f'{writer.num_episodes_written} episodes kept in {writer.data_directory}')
    self.writer = writer


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
  unless `name` is given; a directory holding another dataset is refused before the first step.
  With `handle_signals`, SIGUSR1 and SIGTERM checkpoint and Ctrl-C stops between writes (see
  rlds_suite.recording.signals). Ctrl-C closes the writer, then raises RecordingInterrupted. The
  dataset's provenance (environment, options, seed, policy, start and end time, files' sha256) is
  written as recording starts and kept current. Returns the closed writer (counts of episodes
  written).
  """
  import envlogger  # pylint: disable=g-import-not-at-top
  from rlds_suite import envs  # pylint: disable=g-import-not-at-top
  if episodes < 1:
    raise errors.UsageError(f'nothing to record: episodes must be at least 1, not {episodes}',
                            field='episodes')
  owns_env = isinstance(env, str)
  env_spec = env if owns_env else type(env).__name__
  name = name or dataset_name_for(env_spec)
  started = run_provenance.timestamp()
  if owns_env:
    env = envs.make(env, seed=seed, **(env_options or {}))
  policy_name = policy if isinstance(policy, str) else getattr(policy, '__qualname__', repr(policy))
  try:
    if image_fields is None:
      image_fields = envs.image_fields(env)
    if isinstance(policy, str):
      if policy != 'random':
        raise errors.RLDSSuiteError(f"unknown policy {policy!r}; use 'random' or a callable",
                                    field='policy')
      policy = random_policy(env.action_spec(), seed)
    if step_fn is None and envs.records_frames(env):
      step_fn = envs.frame_step_fn
    writer = backend_lib.RLDSWriter(data_dir, name=name, env=env, image_fields=image_fields,
                                    provenance={
                                        'env': env_spec, 'env_options': dict(env_options or {}),
                                        'seed': seed, 'policy': policy_name,
                                        'episodes_requested': episodes,
                                        'max_episode_steps': max_episode_steps,
                                        'started': started},
                                    **writer_kwargs)
    logged = envlogger.EnvLogger(env, backend=writer, step_fn=step_fn, episode_fn=episode_fn)
    interrupted = _roll_out(logged, policy, writer, episodes, max_episode_steps, progress,
                            handle_signals)
  finally:
    if owns_env:
      env.close()
  if interrupted:
    raise RecordingInterrupted(writer)
  return writer


def _roll_out(logged: dm_env.Environment, policy: Policy, writer: backend_lib.RLDSWriter,
              episodes: int, max_episode_steps: Optional[int], progress: bool,
              handle_signals: bool) -> bool:
  """Runs the episodes and closes `writer`; returns whether Ctrl-C stopped them."""
  bar = _progress_bar(episodes, progress)
  interrupted = False
  try:
    with (signals.preemption_handlers(writer) if handle_signals else contextlib.nullcontext()):
      try:
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
      except KeyboardInterrupt:
        interrupted = True
        writer.provenance['status'] = 'interrupted'
      writer.close()
  finally:
    bar.close()
    writer.close()
  return interrupted


def dataset_name_for(env_spec: str) -> str:
  """A TFDS dataset name from an environment spec: 'gymnasium:CartPole-v1' -> 'gymnasium_cartpole_v1'."""
  name = re.sub(r'[^a-z0-9]+', '_', env_spec.lower())
  name = name.strip('_') or 'rollouts'
  return name if name[0].isalpha() else f'env_{name}'


def _progress_bar(total: int, enabled: bool):
  from tqdm import auto  # pylint: disable=g-import-not-at-top
  return auto.tqdm(total=total, unit='episode', disable=not enabled)
