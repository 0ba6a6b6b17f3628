"""il-representations' native Atari demos: an `.npz` holding one object array `arr_0` of
trajectory dicts {states, actions, dones}, each a list with one entry per step.

`states[t]` is the uint8 (84, 84, 4) observation the policy saw (SB3's Atari preprocessing and
VecFrameStack: four grayscale frames, oldest first, channels last, zeros before an episode's first
frame), `actions[t]` the int64 action taken at it and `dones[t]` the done flag that action
returned. The observation after the last action was not kept (il-representations' loader drops
the last row to pair `obs` with `next_obs`), and no reward was recorded.

Episodes: a `done` closes one (termination: the game ended; the next row starts the next episode,
already reset by the vectorised env); rows after the last `done`, e.g. a whole 500-step recording
with no `done` (the shipped Pong demos), are an episode cut by the end of the recording
(truncation).

The object array is unpickled one trajectory at a time (rlds_suite.core.pickle_stream), through
the restricted unpickler: memory holds one trajectory, whatever the file's size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import pathlib
from typing import IO, Any, Iterator, Mapping

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import pickle_stream
from rlds_suite.core.episodes import BoundaryPolicy, FinalObservation, Trajectory
from rlds_suite.readers import done_flags
from rlds_suite.readers import files

MEMBER = 'arr_0'
KEYS = ('states', 'actions', 'dones')
OBSERVATION_SHAPE = (84, 84, 4)
POLICY = BoundaryPolicy(final_observation=FinalObservation.NOT_STORED)


@dataclasses.dataclass(frozen=True)
class Game:
  """One Atari game's demos: its gym id and the demo files' name pattern (case-insensitive)."""
  env_id: str
  file_pattern: str

  @classmethod
  def of(cls, env_id: str) -> 'Game':
    """A `*NoFrameskip-v4` id -> its demos, found as `*<game>*.npz` (pong.npz,
    PongNoFrameskip-v4_rollouts_500_ts_100_traj.npz)."""
    if not env_id.endswith('NoFrameskip-v4'):
      raise ValueError(f'expected a *NoFrameskip-v4 gym id, got {env_id!r}')
    return cls(env_id=env_id, file_pattern=f'*{env_id[:-len("NoFrameskip-v4")].lower()}*.npz')


# The games il-representations ships demos for (atari_demo_paths in its config).
GAMES = {'pong': Game.of('PongNoFrameskip-v4'), 'breakout': Game.of('BreakoutNoFrameskip-v4')}


def demo_paths(directory: errors.PathLike, game: Game) -> list[pathlib.Path]:
  """The demo files of `game` below `directory`, sorted; EmptyInputError when there are none."""
  found = [path for path in files.find_files(directory, '*.npz')
           if fnmatch.fnmatch(path.name.lower(), game.file_pattern)]
  if not found:
    raise errors.EmptyInputError(f'no files matching {game.file_pattern!r}', path=directory)
  return found


def read_trajectories(path: errors.PathLike) -> Iterator[Trajectory]:
  """One demo file -> Trajectories (one or more per recorded trajectory), one recording in memory
  at a time. Episode metadata: source_file, trajectory_index, episode_in_trajectory, has_rewards."""
  path = pathlib.Path(path)
  count = _member_length(path)
  read = 0
  for index, item in enumerate(pickle_stream.iter_list_items(lambda: _data(path),
                                                             source=str(path))):
    read += 1
    with errors.located(path):
      yield from _episodes(index, item, path.name)
  if read != count:
    raise errors.SchemaError(f'expected {count} trajectories (the array header), read {read}',
                             path=path, field=MEMBER)


def _episodes(index: int, item: Any, file_name: str) -> Iterator[Trajectory]:
  where = f'trajectory {index}'
  if not isinstance(item, Mapping) or not set(KEYS) <= set(item):
    found = sorted(item) if isinstance(item, Mapping) else type(item).__name__
    raise errors.SchemaError(f'{where}: expected a dict with keys {list(KEYS)}, got {found}',
                             field=MEMBER)
  states = _stack(item['states'], OBSERVATION_SHAPE, np.uint8, f'{MEMBER}[{index}].states')
  actions = _stack(item['actions'], (), np.int64, f'{MEMBER}[{index}].actions')
  dones = _stack(item['dones'], (), np.bool_, f'{MEMBER}[{index}].dones')
  yield from done_flags.split_at_dones(
      POLICY, states, actions, np.zeros(len(actions), np.float32), dones,
      metadata={'source_file': file_name, 'trajectory_index': np.int64(index),
                'has_rewards': False})


def _stack(values: Any, row_shape: tuple[int, ...], dtype: Any, field: str) -> np.ndarray:
  """A list of per-step arrays (or one array) -> one array of the declared row shape and dtype."""
  try:
    array = np.asarray(values)
  except ValueError as e:  # Ragged rows.
    raise errors.SchemaError(f'rows of different shapes: {e}', field=field) from None
  if array.shape[1:] != row_shape or array.ndim == 0 or not np.can_cast(array.dtype, dtype, 'safe'):
    raise errors.SchemaError(f'expected rows of {np.dtype(dtype).name}{list(row_shape)}, got '
                             f'{array.dtype.name}{list(array.shape[1:])}', field=field)
  return array.astype(dtype, copy=False)


def _member_length(path: pathlib.Path) -> int:
  """The number of trajectories in `arr_0`, from its .npy header; SchemaError when it is missing
  or not a 1-D object array."""
  with _member(path) as (_, shape, dtype):
    pass
  if not dtype.hasobject or len(shape) != 1:
    raise errors.SchemaError(f'expected a 1-D object array of trajectory dicts, got '
                             f'{dtype}{list(shape)}', path=path, field=MEMBER)
  return shape[0]


@contextlib.contextmanager
def _member(path: pathlib.Path) -> Iterator[tuple[IO[bytes], tuple[int, ...], np.dtype]]:
  """`arr_0.npy` in the archive, positioned after its header: (file, shape, dtype). Damaged zip or
  deflate data, here or while the caller reads, raises CorruptFileError."""
  with files.open_zip(path) as archive, \
      files.zip_member(archive, f'{MEMBER}.npy', field=MEMBER) as f:
    header = files.read_npy_header(f, field=MEMBER)
    yield f, header.shape, header.dtype


@contextlib.contextmanager
def _data(path: pathlib.Path) -> Iterator[IO[bytes]]:
  """The pickled object array; read to the member's end afterwards, which checks its CRC-32."""
  with _member(path) as (f, _, _):
    yield files.shielded(f)
    files.read_to_end(f)
