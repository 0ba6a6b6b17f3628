"""HumanCompatibleAI/imitation rollouts: the npz format of `types.save` and the older pickle.

npz (imitation 0.2-0.3, `np.savez_compressed`): `obs` (all trajectories' T+1 observations
concatenated), `acts`, `infos` (object array of dicts), `rews` (only when every trajectory has
rewards), `terminal` (one flag per trajectory) and `indices = cumsum(len(traj) for traj in
trajs[:-1])`. imitation's loader splits `obs` at `indices + arange(len(indices)) + 1` and the
per-action arrays at `indices`; so does `split_npz`.

pickle (older): a pickled list of `imitation.data.types.TrajectoryWithRew` (obs, acts, infos,
terminal, rews) or `Trajectory` (no rews), read with the restricted unpickler.

imitation's `terminal` means "the episode is complete": its docstring says "Episodes are always
terminal", so an episode cut by a gym TimeLimit is terminal too. A `Layout` therefore declares the
environment's time limit: an episode that reached it ended by truncation, as does one whose last
info carries gym's `TimeLimit.truncated=True`; otherwise `terminal=True` is a termination and
`terminal=False` (an unfinished fragment) a truncation. The native flag is kept as episode metadata.

Infos become step metadata only for keys a Layout declares (present in every info); the rest are
dropped: gym/SB3 add keys on the last step only (`TimeLimit.truncated`, `terminal_observation`,
`episode`), whose content the RLDS episode already holds (ending, final observation, return).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.core import safe_pickle
from rlds_suite.core import spaces
from rlds_suite.core.episodes import BoundaryPolicy, EndingRule, Episode, FinalObservation, Trajectory
from rlds_suite.readers import files

TIME_LIMIT_INFO = 'TimeLimit.truncated'
SUFFIXES = ('.npz', '.pkl')
NPZ_FIELDS = ('obs', 'acts', 'infos', 'terminal', 'indices')


@dataclasses.dataclass(frozen=True)
class Layout:
  """What one environment's rollouts hold, declared (never inferred from a file).

  Files of this layout are those below the manual dir whose name, or a folder's name on the way to
  them, starts with `file_prefix` (`cartpole_rollouts.npz`, `cartpole_0/rollouts/final.npz`).
  Arrays may be stored in any dtype that casts safely to the declared one.
  """
  env_id: str
  file_prefix: str
  observation_shape: tuple[int, ...]
  observation_dtype: Any
  action_shape: tuple[int, ...]
  action_dtype: Any
  reward_dtype: Any = np.float64
  time_limit: Optional[int] = None
  # Info keys kept as step metadata: {key: (shape, dtype)}.
  info_keys: Mapping[str, tuple[tuple[int, ...], Any]] = dataclasses.field(default_factory=dict)
  action_space: Optional[spaces.Space] = None  # The environment's, as gymnasium declares it.

  @property
  def policy(self) -> BoundaryPolicy:
    if self.time_limit is None:
      return BoundaryPolicy(final_observation=FinalObservation.EXTRA_ROW)
    return BoundaryPolicy(final_observation=FinalObservation.EXTRA_ROW,
                          ending_rule=EndingRule.TIME_LIMIT, time_limit=self.time_limit)


# Environments of imitation's expert rollouts (tests/testdata/expert_models/<name>_0/rollouts/).
# Observations are declared float64: the older pickles (final.pkl) hold the float64 arrays gym's
# CartPole and Pendulum returned, the npz files (final.npz) float32, which casts exactly; one
# config reads both.
LAYOUTS = {
    'cartpole': Layout(env_id='CartPole-v1', file_prefix='cartpole', observation_shape=(4,),
                       observation_dtype=np.float64, action_shape=(), action_dtype=np.int64,
                       time_limit=500, action_space=spaces.Discrete(2)),
    'pendulum': Layout(env_id='Pendulum-v1', file_prefix='pendulum', observation_shape=(3,),
                       observation_dtype=np.float64, action_shape=(1,), action_dtype=np.float32,
                       time_limit=200, action_space=spaces.Box(-2.0, 2.0)),
}


@dataclasses.dataclass(frozen=True)
class NativeTrajectory:
  """One imitation trajectory as stored: T+1 obs, T acts/infos, T rews or None, its terminal flag."""
  obs: np.ndarray
  acts: np.ndarray
  infos: Optional[Sequence[Any]]
  terminal: bool
  rews: Optional[np.ndarray]


def rollout_paths(directory: errors.PathLike, layout: Layout) -> list[pathlib.Path]:
  """The .npz/.pkl rollout files of `layout` below `directory`; EmptyInputError when none."""
  root = pathlib.Path(directory)
  found = [
      path for path in files.find_files(root, '*')
      if path.suffix in SUFFIXES and
      any(part.startswith(layout.file_prefix) for part in path.relative_to(root).parts)
  ]
  if not found:
    raise errors.EmptyInputError(
        f'no {" or ".join(SUFFIXES)} files whose name or folder starts with '
        f'{layout.file_prefix!r}', path=root)
  return found


def expected_totals(paths: Sequence[errors.PathLike]) -> progress.Totals:
  """The files, and the episodes and RLDS steps of rollout files from their .npz headers alone
  (`indices` and `acts` shapes: a step per action and per final observation), for a build's
  progress bar; files only when one is a pickle or its headers cannot say (its read names the
  problem)."""
  counted = progress.Totals(files=len(paths))
  totals = progress.Totals(0, 0, len(paths))
  for path in paths:
    if pathlib.Path(path).suffix != '.npz':
      return counted
    try:
      with files.open_zip(path) as archive:
        shapes = {}
        for name in ('indices', 'acts'):
          with files.zip_member(archive, f'{name}.npy', field=name) as f:
            shapes[name] = files.read_npy_header(f, field=name).shape
    except errors.RLDSSuiteError:
      return counted
    if len(shapes['indices']) != 1 or not shapes['acts']:
      return counted
    trajectories = shapes['indices'][0] + 1
    totals += progress.Totals(trajectories, shapes['acts'][0] + trajectories, 0)
  return totals


def read_rollouts(path: errors.PathLike, layout: Layout) -> list[Trajectory]:
  """One rollout file (.npz or .pkl) -> Trajectories in standard alignment, in file order."""
  path = pathlib.Path(path)
  if path.suffix == '.npz':
    data = files.load_npz(path)
    with errors.located(path):
      native = split_npz(data)
  else:
    native = load_pickle(path)
  with errors.located(path):
    if not native:
      raise errors.EmptyInputError('the file holds no trajectory')
    return [_to_trajectory(index, trajectory, layout, path.name)
            for index, trajectory in enumerate(native)]


def read_episodes(path: errors.PathLike, layout: Layout) -> list[Episode]:
  """One rollout file -> RLDS episodes (errors name the file and the trajectory)."""
  found = []
  for index, trajectory in enumerate(read_rollouts(path, layout)):
    try:
      found.append(episodes.to_episode(trajectory))
    except errors.RLDSSuiteError as e:
      raise type(e)(f'trajectory {index}: {e.problem}', path=path, field=e.field) from e
  return found


def split_npz(data: Mapping[str, np.ndarray]) -> list[NativeTrajectory]:
  """The members of an imitation npz -> its trajectories, split as imitation's loader does."""
  for name in NPZ_FIELDS:
    if name not in data:
      raise errors.SchemaError(f'missing member {name!r} (has {sorted(data)})', field=name)
  obs, acts, infos, terminal = (np.asarray(data[n]) for n in ('obs', 'acts', 'infos', 'terminal'))
  rews = np.asarray(data['rews']) if 'rews' in data else None
  indices = np.asarray(data['indices'])
  # A single trajectory is saved as cumsum([]), an empty float64 array.
  if indices.ndim != 1 or (len(indices) and not np.issubdtype(indices.dtype, np.integer)):
    raise errors.SchemaError(f'expected a 1-D integer array, got {indices.dtype}{indices.shape}',
                             field='indices')
  indices = indices.astype(np.int64)
  num_actions, num_trajectories = len(acts), len(indices) + 1
  if len(indices) and (indices[0] < 1 or np.any(np.diff(indices) < 1) or
                       indices[-1] >= num_actions):
    raise errors.EpisodeBoundaryError(
        f'expected strictly increasing split points in [1, {num_actions}) (every trajectory has an '
        f'action), got {indices[:10].tolist()}...', field='indices')
  if len(obs) != num_actions + num_trajectories:
    raise errors.EpisodeBoundaryError(
        f'expected len(acts) + number of trajectories = {num_actions} + {num_trajectories} = '
        f'{num_actions + num_trajectories} observations, got {len(obs)}', field='obs')
  if terminal.shape != (num_trajectories,):
    raise errors.EpisodeBoundaryError(
        f'expected {num_trajectories} flags (one per trajectory), got shape {terminal.shape}',
        field='terminal')
  for name, array in (('infos', infos), ('rews', rews)):
    if array is not None and len(array) != num_actions:
      raise errors.EpisodeBoundaryError(
          f'expected {num_actions} rows (one per action), got {len(array)}', field=name)
  obs_parts = np.split(obs, indices + np.arange(len(indices)) + 1)
  per_action = lambda array: [None] * num_trajectories if array is None else np.split(array, indices)
  return [
      NativeTrajectory(obs=o, acts=a, infos=list(i), terminal=bool(t), rews=r)
      for o, a, i, t, r in zip(obs_parts, per_action(acts), per_action(infos), terminal,
                               per_action(rews))
  ]


def load_pickle(path: errors.PathLike) -> list[NativeTrajectory]:
  """An older imitation pickle: a list of Trajectory / TrajectoryWithRew."""
  try:
    with open(path, 'rb') as f:
      loaded = safe_pickle.load(f, source=str(path))
  except OSError as e:
    raise errors.CorruptFileError(f'cannot read: {e}', path=path) from e
  with errors.located(path):
    if not isinstance(loaded, (list, tuple)):
      raise errors.SchemaError(f'expected a list of trajectories, got {type(loaded).__name__}')
    native = []
    for index, item in enumerate(loaded):
      if not isinstance(item, safe_pickle.ImitationTrajectory):
        raise errors.SchemaError(
            f'item {index}: expected imitation.data.types.Trajectory(WithRew), got '
            f'{type(item).__name__}')
      native.append(NativeTrajectory(
          obs=np.asarray(item.obs), acts=np.asarray(item.acts),
          infos=None if item.infos is None else list(item.infos),
          terminal=bool(item.terminal),
          rews=None if item.rews is None else np.asarray(item.rews)))
    return native


def _to_trajectory(index: int, native: NativeTrajectory, layout: Layout, file_name: str
                   ) -> Trajectory:
  where = f'trajectory {index}'
  num_actions = len(native.acts)
  obs = _declared(native.obs, layout.observation_shape, layout.observation_dtype, 'obs', where)
  acts = _declared(native.acts, layout.action_shape, layout.action_dtype, 'acts', where)
  has_rewards = native.rews is not None
  rews = (_declared(native.rews, (), layout.reward_dtype, 'rews', where) if has_rewards else
          np.zeros(num_actions, layout.reward_dtype))
  infos = native.infos if native.infos is not None else [{}] * num_actions
  if len(infos) != num_actions:
    raise errors.EpisodeBoundaryError(
        f'{where}: expected {num_actions} infos (one per action), got {len(infos)}', field='infos')
  for step, info in enumerate(infos):
    if not isinstance(info, Mapping):
      raise errors.SchemaError(f'{where}, step {step}: expected a dict, got {type(info).__name__}',
                               field='infos')
  time_limit_cut = bool(infos and infos[-1].get(TIME_LIMIT_INFO, False))
  step_metadata = {'infos': _info_columns(infos, layout, where)} if layout.info_keys else {}
  try:
    return layout.policy.trajectory(
        obs, acts, rews,
        terminal_flag=native.terminal and not time_limit_cut,
        step_metadata=step_metadata,
        metadata={
            'source_file': file_name,
            'trajectory_index': np.int64(index),
            'native_terminal': native.terminal,
            'has_rewards': has_rewards,
        })
  except errors.RLDSSuiteError as e:
    raise type(e)(f'{where}: {e.problem}', path=e.path, field=e.field) from e


def _declared(array: np.ndarray, row_shape: tuple[int, ...], dtype: Any, field: str,
              where: str, casting: str = 'safe') -> np.ndarray:
  """`array` as the declared dtype; SchemaError when its rows have another shape or it cannot
  be cast under `casting` (by default, without loss)."""
  array, dtype = np.asarray(array), np.dtype(dtype)
  if array.shape[1:] != tuple(row_shape) or not np.can_cast(array.dtype, dtype, casting):
    raise errors.SchemaError(
        f'{where}: expected rows of {dtype.name}{list(row_shape)}, got '
        f'{array.dtype.name}{list(array.shape[1:])}', field=field)
  return array.astype(dtype, copy=False)


def _info_columns(infos: Sequence[Mapping[str, Any]], layout: Layout, where: str
                  ) -> dict[str, np.ndarray]:
  """The declared info keys as one array per key; each must be in every step's info."""
  columns = {}
  for key, (shape, dtype) in layout.info_keys.items():
    missing = [step for step, info in enumerate(infos) if key not in info]
    if missing:
      raise errors.SchemaError(f'{where}: declared info key {key!r} missing at steps '
                               f'{missing[:10]}', field=f'infos/{key}')
    values = np.asarray([info[key] for info in infos])
    # Info values are mostly Python numbers (float64/int64 to numpy): keep their kind, not width.
    columns[key] = _declared(values, shape, dtype, f'infos/{key}', where, casting='same_kind')
  return columns
