"""D4RL HDF5 datasets (rail-berkeley/d4rl): one flat table of N steps per file.

Datasets: observations (N, obs), actions (N, act), rewards (N,) or (N, 1), terminals (N,), timeouts
(N,) (missing in older files) and optionally next_observations (N, obs); infos/* hold one row per
step (qpos, qvel, action_log_probs), metadata/* hold per-file values (algorithm, iteration, weights
of the policy that collected the data). Writers: D4RL's scripts/generation/mujoco/collect_data.py,
convert_buffer.py (replay datasets, (N, 1) rewards) and stitch_dataset.py (medium-expert).

Rows are already in standard alignment, (o_t, a_t, r_t earned by a_t): terminals[t] says o_t+1 is
absorbing, timeouts[t] that the episode was cut after a_t. A file is therefore cut into episodes at
terminal or timeout rows (`episodes.episode_ends`), the terminal flag of an episode's last row decides
termination, and next_observations, when the file has them, supply the final observation. Files
without them did not keep it: the placeholder last step repeats the last real observation, marked
by the step mask `observation_is_copy` (rlds_suite.core.episodes).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping, Optional, Sequence

import h5py
import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import nested
from rlds_suite.core import progress
from rlds_suite.core.episodes import BoundaryPolicy, FinalObservation, Trajectory
from rlds_suite.readers import hdf5

# Files with and without next_observations give the same step fields (OBSERVATION_IS_COPY).
WITH_NEXT_OBSERVATIONS = BoundaryPolicy(final_observation=FinalObservation.NEXT_OBSERVATIONS,
                                        marks_copies=True)
WITHOUT_NEXT_OBSERVATIONS = BoundaryPolicy(final_observation=FinalObservation.NOT_STORED)

URL_PREFIX = 'http://rail.eecs.berkeley.edu/datasets/offline_rl/gym_mujoco_v2/'
POLICY_HIDDEN_SIZE = 256  # rlkit SAC policies with two hidden layers of 256 units.
INFOS = 'infos'
METADATA = 'metadata'


@dataclasses.dataclass(frozen=True)
class Spec:
  """A declared array: its shape per row (steps) or per file (metadata), and its dtype (str: text)."""
  shape: tuple[int, ...]
  dtype: Any

  @property
  def is_text(self) -> bool:
    return self.dtype is str


@dataclasses.dataclass(frozen=True)
class Layout:
  """What a family of D4RL files holds, declared rather than inferred from the file.

  `infos` and `metadata` are nested {name: Spec} whose paths are the HDF5 paths below infos/ and
  metadata/. Arrays are checked against the specs and cast to their dtypes.
  """
  observation: Spec
  action: Spec
  reward: Spec = Spec((), np.dtype(np.float32))
  infos: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Task:
  """A gym-mujoco locomotion task and its array sizes (as TFDS's d4rl_mujoco_* builders declare)."""
  name: str
  observation_size: int
  action_size: int
  qpos_size: int
  qvel_size: int


@dataclasses.dataclass(frozen=True)
class Collection:
  """A kind of v2 dataset and the metadata its writer stored (policy only for single-policy runs)."""
  name: str
  run_metadata: bool  # metadata/algorithm and metadata/iteration.
  policy_metadata: bool  # metadata/policy/*: weights of the policy that collected the data.


LOCOMOTION_TASKS = (
    Task('halfcheetah', observation_size=17, action_size=6, qpos_size=9, qvel_size=9),
    Task('hopper', observation_size=11, action_size=3, qpos_size=6, qvel_size=6),
    Task('walker2d', observation_size=17, action_size=6, qpos_size=9, qvel_size=9),
    Task('ant', observation_size=111, action_size=8, qpos_size=15, qvel_size=14),
)

# collect_data.py writes run + policy metadata except for random data; convert_buffer.py (replay
# buffers) writes run metadata only; stitch_dataset.py (medium-expert) writes none.
V2_COLLECTIONS = (
    Collection('random', run_metadata=False, policy_metadata=False),
    Collection('medium', run_metadata=True, policy_metadata=True),
    Collection('expert', run_metadata=True, policy_metadata=True),
    Collection('medium-replay', run_metadata=True, policy_metadata=False),
    Collection('medium-expert', run_metadata=False, policy_metadata=False),
    Collection('full-replay', run_metadata=True, policy_metadata=False),
)


def file_name(task: Task, collection: Collection) -> str:
  """The released file name, e.g. halfcheetah_medium_replay-v2.hdf5."""
  return f'{task.name}_{collection.name.replace("-", "_")}-v2.hdf5'


def url(task: Task, collection: Collection) -> str:
  return URL_PREFIX + file_name(task, collection)


def locomotion_layout(task: Task, collection: Collection) -> Layout:
  """The declared content of a gym-mujoco v2 file (dtypes as in TFDS's d4rl v2 configs)."""
  float32, float64 = np.dtype(np.float32), np.dtype(np.float64)
  infos = {
      'qpos': Spec((task.qpos_size,), float64),
      'qvel': Spec((task.qvel_size,), float64),
      'action_log_probs': Spec((), float64),
  }
  metadata: dict[str, Any] = {}
  if collection.run_metadata:
    metadata['algorithm'] = Spec((), str)
    metadata['iteration'] = Spec((), np.dtype(np.int32))
  if collection.policy_metadata:
    hidden, obs, act = POLICY_HIDDEN_SIZE, task.observation_size, task.action_size
    layer = lambda n_out, n_in: {'weight': Spec((n_out, n_in), float32),
                                 'bias': Spec((n_out,), float32)}
    metadata['policy'] = {
        'fc0': layer(hidden, obs),
        'fc1': layer(hidden, hidden),
        'last_fc': layer(act, hidden),
        'last_fc_log_std': layer(act, hidden),
        'nonlinearity': Spec((), str),
        'output_distribution': Spec((), str),
    }
  return Layout(observation=Spec((task.observation_size,), float32),
                action=Spec((task.action_size,), float32), infos=infos, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class Table:
  """A D4RL file's arrays, each read once; row t of every step array is step t."""
  observations: np.ndarray
  actions: np.ndarray
  rewards: np.ndarray  # (N,)
  terminals: np.ndarray  # (N,) bool
  timeouts: Optional[np.ndarray] = None  # (N,) bool
  next_observations: Optional[np.ndarray] = None
  infos: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # Nested, leaves (N, ...).
  metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # Nested, per file.

  def __len__(self) -> int:
    return len(self.rewards)


def read_table(path: errors.PathLike, layout: Optional[Layout] = None) -> Table:
  """Reads and checks every array of a D4RL file, one read per HDF5 dataset.

  With a `layout`, exactly the declared infos/ and metadata/ are read (a missing one is a
  SchemaError) and arrays are cast to the declared dtypes; without one, whatever the file holds
  below infos/ and metadata/ is read as stored. Rewards are flattened to (N,), float32 by default.
  """
  with hdf5.open_file(path) as f:
    observations = _read_rows(f, 'observations', layout.observation if layout else None)
    n = len(observations)
    if n == 0:
      raise errors.EmptyInputError('the file has no rows', field='observations')
    table = Table(
        observations=observations,
        actions=_read_rows(f, 'actions', layout.action if layout else None),
        rewards=_read_column(f, 'rewards', kinds='f').astype(
            layout.reward.dtype if layout else np.float32, copy=False),
        terminals=_read_flags(f, 'terminals'),
        timeouts=_read_flags(f, 'timeouts') if 'timeouts' in f else None,
        next_observations=(_read_rows(f, 'next_observations', layout.observation if layout else None)
                           if 'next_observations' in f else None),
        infos=_read_group(f, INFOS, layout.infos if layout else None, per_row=True),
        metadata=_read_group(f, METADATA, layout.metadata if layout else None, per_row=False),
    )
    step_arrays = {
        'actions': table.actions, 'rewards': table.rewards, 'terminals': table.terminals,
        'timeouts': table.timeouts, 'next_observations': table.next_observations,
        **{f'{INFOS}/{k}': v for k, v in nested.flatten_with_paths(table.infos)},
    }
    for key, array in step_arrays.items():
      if array is not None and len(array) != n:
        raise errors.EpisodeBoundaryError(
            f'expected {n} rows (as many as observations), got {len(array)}', field=key)
    bad = np.flatnonzero(~np.isfinite(table.rewards))
    if len(bad):
      raise errors.InvalidValueError(
          f'non-finite rewards at rows {bad[:10].tolist()}{" ..." if len(bad) > 10 else ""}',
          field='rewards')
  return table


def episode_rows(table: Table, time_limit: Optional[int] = None) -> list[slice]:
  """The rows of each episode: cut after terminal or timeout rows, and every `time_limit` rows of a
  run without either. Files without timeouts need `time_limit`, or their time-limit ends are lost."""
  return flag_rows(table.terminals, table.timeouts, time_limit)


def flag_rows(terminals: np.ndarray, timeouts: Optional[np.ndarray],
              time_limit: Optional[int] = None) -> list[slice]:
  """`episode_rows` from the flags alone."""
  if timeouts is None and time_limit is None:
    raise errors.SchemaError(
        'the file has no timeouts, so time-limit ends are unknown; pass the environment\'s time '
        'limit (max_episode_steps) as time_limit', field='timeouts')
  return episodes.split_rows(episodes.episode_ends(terminals, timeouts, time_limit))


def read_flags(path: errors.PathLike) -> tuple[np.ndarray, Optional[np.ndarray]]:
  """A file's terminals and timeouts (None when it has none), read without the other arrays."""
  with hdf5.open_file(path) as f:
    return _read_flags(f, 'terminals'), _read_flags(f, 'timeouts') if 'timeouts' in f else None


def rows_totals(rows: Sequence[slice]) -> progress.Totals:
  """Episodes and RLDS steps of episodes cut at `rows`: a step per row (an action), and the final
  observation's step."""
  return progress.Totals(episodes=len(rows), steps=sum(r.stop - r.start for r in rows) + len(rows))


def expected_totals(path: errors.PathLike, time_limit: Optional[int] = None) -> progress.Totals:
  """The episodes and steps `read_trajectories(path, time_limit=...)` yields, from the flags alone
  (a build's progress totals); UNKNOWN where the file cannot say (the read names the problem)."""
  try:
    return rows_totals(flag_rows(*read_flags(path), time_limit))
  except errors.RLDSSuiteError:
    return progress.UNKNOWN


def trajectories(table: Table, time_limit: Optional[int] = None) -> Iterator[Trajectory]:
  """The episodes of a table in standard alignment; the rows after the last end form a truncated one."""
  has_next = table.next_observations is not None
  policy = WITH_NEXT_OBSERVATIONS if has_next else WITHOUT_NEXT_OBSERVATIONS
  for rows in episode_rows(table, time_limit):
    yield policy.trajectory(
        table.observations[rows],
        table.actions[rows],
        table.rewards[rows],
        terminal_flag=bool(table.terminals[rows.stop - 1]),
        next_observations=table.next_observations[rows] if has_next else None,
        step_metadata={INFOS: nested.take_rows(table.infos, rows)} if table.infos else None,
        metadata=table.metadata)


def read_trajectories(path: errors.PathLike, layout: Optional[Layout] = None, *,
                      time_limit: Optional[int] = None) -> Iterator[Trajectory]:
  """Every episode of a D4RL file, in file order (see `read_table` and `episode_rows`)."""
  table = read_table(path, layout)
  with errors.located(path):
    yield from trajectories(table, time_limit)


def _read_rows(f: h5py.File, key: str, spec: Optional[Spec]) -> np.ndarray:
  """A (N, ...) numeric array, checked against and cast to `spec` when one is declared."""
  if spec is None:
    return hdf5.read_array(f, key, ranks=(2, 3, 4), kinds='fiu')
  array = hdf5.read_array(f, key, ranks=(1 + len(spec.shape),), kinds='fiu')
  _check_row_shape(array, spec, key)
  return array.astype(spec.dtype, copy=False)


def _read_column(f: h5py.File, key: str, kinds: str) -> np.ndarray:
  """A (N,) array, also when stored as (N, 1)."""
  array = hdf5.read_array(f, key, ranks=(1, 2), kinds=kinds)
  if array.ndim == 2 and array.shape[1] != 1:
    raise errors.SchemaError(f'expected shape (N,) or (N, 1), got {array.shape}', field=key)
  return array.reshape(len(array))


def _read_flags(f: h5py.File, key: str) -> np.ndarray:
  """A (N,) bool array from bools or 0/1 numbers."""
  array = _read_column(f, key, kinds='biuf')
  if array.dtype != np.bool_:
    if not np.isin(array, (0, 1)).all():
      raise errors.SchemaError(f'expected 0/1 flags, got values {np.unique(array)[:10].tolist()}',
                               field=key)
    array = array.astype(bool)
  return array


def _read_group(f: h5py.File, group: str, specs: Optional[Mapping[str, Any]], *,
                per_row: bool) -> dict[str, Any]:
  """The nested arrays below `group`: the declared ones, or without specs all that are stored."""
  if specs is None:
    if not isinstance(f.get(group), h5py.Group):
      return {}
    flat = {name: _decode(hdf5.read_array(f[group], name, ranks=range(8), kinds='biufSO'))
            for name in hdf5.dataset_names(f[group])}
    return nested.unflatten_paths(flat)
  flat = {}
  for name, spec in nested.flatten_paths(specs).items():
    key = f'{group}/{name}'
    rank = len(spec.shape) + int(per_row)
    array = hdf5.read_array(f, key, ranks=(rank,), kinds='SO' if spec.is_text else 'biuf')
    if per_row:
      _check_row_shape(array, spec, key)
    elif array.shape != spec.shape:
      raise errors.SchemaError(f'expected shape {spec.shape}, got {array.shape}', field=key)
    flat[name] = _decode(array) if spec.is_text else np.asarray(array, dtype=spec.dtype)
  return nested.unflatten_paths(flat)


def _check_row_shape(array: np.ndarray, spec: Spec, key: str) -> None:
  if array.shape[1:] != spec.shape:
    raise errors.SchemaError(f'expected rows of shape {spec.shape}, got {array.shape[1:]}', field=key)


def _decode(value: Any) -> Any:
  """Scalar byte strings (h5py's reading of np.string_ values) -> str; arrays unchanged."""
  if isinstance(value, bytes):
    return value.decode('utf-8')
  if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in 'SO':
    return _decode(value.item())
  return value
