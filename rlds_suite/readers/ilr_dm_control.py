"""il-representations' native dm_control demos: `<task>-*.pkl.gz`, gzip(cloudpickle) of a list of
imitation `TrajectoryWithRew`.

Each trajectory has T+1 uint8 pixel observations (3, 100, 100) (dmc2gym, channels first), T float32
actions, T float64 rewards (the sum over the frame skip) and T infos with the physics
`internal_state` (qpos, qvel) and the dm_control `discount` of the step the action led to; the
pickles carry no `terminal` field. il-representations' `load_dataset_dm_control` reads them with
`cloudpickle.load`; here the list is read one trajectory at a time through the restricted
unpickler (no code in the file runs; memory holds one trajectory).

Episodes: these tasks end by dm_control's time limit, which reports discount 1 (truncation); an
absorbing state would report discount 0, so the last info's `discount == 0` means termination.
gym's `TimeLimit.truncated` (last info only) is False here because dmc2gym itself returned done at
dm_control's limit; it is dropped, as the ending already says how the episode ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import pathlib
import zlib
from typing import Any, Iterator, Mapping

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import pickle_stream
from rlds_suite.core import safe_pickle
from rlds_suite.core.episodes import BoundaryPolicy, FinalObservation, Trajectory
from rlds_suite.readers import files

OBSERVATION_SHAPE = (3, 100, 100)
POLICY = BoundaryPolicy(final_observation=FinalObservation.EXTRA_ROW)
INFO_KEYS = ('internal_state', 'discount')


@dataclasses.dataclass(frozen=True)
class Task:
  """One dm_control task as il-representations registers it (envs/dm_control_envs.py)."""
  name: str  # il-representations' task name, also the demo files' prefix.
  env_id: str
  frame_skip: int
  action_size: int
  state_size: int  # len(physics.get_state()): qpos + qvel.

  @property
  def file_pattern(self) -> str:
    return f'*{self.name}-*.pkl.gz'  # il-representations: data/dm_control/<task>-*.pkl.gz.


TASKS = {task.name: task for task in (
    Task('finger-spin', 'DMC-Finger-Spin-v0', 2, 2, 6),
    Task('cheetah-run', 'DMC-Cheetah-Run-v0', 4, 6, 18),
    Task('walker-walk', 'DMC-Walker-Walk-v0', 8, 6, 18),
    Task('cartpole-swingup', 'DMC-Cartpole-Swingup-v0', 8, 1, 4),
    Task('reacher-easy', 'DMC-Reacher-Easy-v0', 8, 2, 4),
    Task('ball-in-cup-catch', 'DMC-Ball-In-Cup-Catch-v0', 8, 2, 8),
)}


def demo_paths(directory: errors.PathLike, task: Task) -> list[pathlib.Path]:
  return files.find_files(directory, task.file_pattern)


def read_trajectories(path: errors.PathLike, task: Task) -> Iterator[Trajectory]:
  """One demo file -> Trajectories, one in memory at a time. Episode metadata: source_file,
  trajectory_index. Step metadata: internal_state (float64, exact)."""
  path = pathlib.Path(path)
  found = 0
  try:
    for index, item in enumerate(_items(path)):
      found += 1
      with errors.located(path):
        yield _trajectory(index, item, task, path.name)
  except (EOFError, gzip.BadGzipFile, zlib.error) as e:
    raise errors.CorruptFileError(f'damaged or truncated gzip data: {e}', path=path) from e
  except OSError as e:
    raise errors.CorruptFileError(f'cannot read: {e}', path=path) from e
  if not found:
    raise errors.EmptyInputError('the file holds no trajectory', path=path)


def _items(path: pathlib.Path) -> Iterator[Any]:
  """The pickled list's items, each claim bounded by what the gzip stream may still expand to:
  a bomb's claim is refused before any of it is inflated."""
  with files.open_gzip(path) as stream:
    yield from pickle_stream.iter_list_items(lambda: contextlib.nullcontext(stream),
                                             source=str(path),
                                             max_bytes=files.expansion_left(stream))


def _trajectory(index: int, item: Any, task: Task, file_name: str) -> Trajectory:
  where = f'trajectory {index}'
  if not isinstance(item, safe_pickle.ImitationTrajectory):
    raise errors.SchemaError(f'{where}: expected imitation.data.types.TrajectoryWithRew, got '
                             f'{type(item).__name__}')
  obs = _declared(item.obs, OBSERVATION_SHAPE, np.uint8, f'{where}.obs')
  acts = _declared(item.acts, (task.action_size,), np.float32, f'{where}.acts')
  if item.rews is None:
    raise errors.SchemaError(f'{where}: no rewards (a Trajectory, not TrajectoryWithRew)',
                             field='rews')
  rews = _declared(item.rews, (), np.float64, f'{where}.rews')
  infos = list(item.infos) if item.infos is not None else []
  if len(infos) != len(acts):
    raise errors.EpisodeBoundaryError(
        f'{where}: expected {len(acts)} infos (one per action), got {len(infos)}',
        field=f'{where}.infos')
  columns = {}
  for key in INFO_KEYS:
    missing = [t for t, info in enumerate(infos) if not isinstance(info, Mapping) or key not in info]
    if missing:
      raise errors.SchemaError(f'{where}: info key {key!r} missing at steps {missing[:10]}',
                               field=f'{where}.infos')
    columns[key] = np.asarray([info[key] for info in infos])
  state = _declared(columns['internal_state'], (task.state_size,), np.float64,
                    f'{where}.infos.internal_state')
  # RLDS discounts are float32; dm_control's are 0 or 1, and any other value must cast exactly.
  discounts = _declared(columns['discount'], (), np.float32, f'{where}.infos.discount')
  trajectory = POLICY.trajectory(
      obs, acts, rews, terminal_flag=bool(len(discounts) and discounts[-1] == 0),
      step_metadata={'internal_state': state},
      metadata={'source_file': file_name, 'trajectory_index': np.int64(index)})
  return dataclasses.replace(trajectory, discounts=discounts)


def _declared(values: Any, row_shape: tuple[int, ...], dtype: Any, field: str) -> np.ndarray:
  array = np.asarray(values)
  if (array.ndim == 0 or array.shape[1:] != tuple(row_shape) or
      not np.can_cast(array.dtype, dtype, 'same_kind')):
    raise errors.SchemaError(f'expected rows of {np.dtype(dtype).name}{list(row_shape)}, got '
                             f'{array.dtype.name}{list(array.shape[1:])}', field=field)
  cast = array.astype(dtype, copy=False)
  if cast.dtype != array.dtype and not np.array_equal(cast, array):
    raise errors.SchemaError(f'values change when cast from {array.dtype.name} to '
                             f'{np.dtype(dtype).name}', field=field)
  return cast
