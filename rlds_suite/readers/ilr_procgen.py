"""il-representations' native procgen demos: `demo_<game>.pickle`.

il-representations' `load_dataset_procgen` reads them with `np.load(path, allow_pickle=True)`
(a plain pickle, so `pickle.load`) as a dict whose keys `obs`, `acts`, `rews`, `dones` each hold a
list with one array per recorded trajectory, and concatenates each list: so trajectory i is
(obs[i], acts[i], rews[i], dones[i]), all with one row per step. Rows: `obs[i][t]` the uint8
(64, 64, 3) RGB frame (channels last; the loader transposes when `chans_first`), `acts[i][t]` the
discrete action taken at it, `rews[i][t]` the reward it earned, `dones[i][t]` the done flag it
returned. The observation after the last action is not stored (procgen's vectorised env resets
at once and returns the next episode's first frame).

Episodes: a `done` closes one. procgen sets done when the game ends and when the episode reaches
its step limit (`timeout = 1000` in procgen's `Game`, procgen/src/game.cpp: done once
`cur_time >= timeout`): an episode of 1000 actions ended by that limit (truncation), a shorter one
closed by `done` terminated; rows after the last `done` are cut by the end of the recording
(truncation). The file is read whole (its lists are per field, so one trajectory cannot be read
without the others), through the restricted unpickler: no code in it runs.
"""

from __future__ import annotations

import pathlib
from typing import Any, Iterator, Mapping

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import safe_pickle
from rlds_suite.core.episodes import BoundaryPolicy, EndingRule, FinalObservation, Trajectory
from rlds_suite.readers import done_flags
from rlds_suite.readers import files

GAMES = ('bigfish', 'bossfight', 'caveflyer', 'chaser', 'climber', 'coinrun', 'dodgeball',
         'fruitbot', 'heist', 'jumper', 'leaper', 'maze', 'miner', 'ninja', 'plunder', 'starpilot')
KEYS = ('obs', 'acts', 'rews', 'dones')
OBSERVATION_SHAPE = (64, 64, 3)
NUM_ACTIONS = 15  # procgen's combo action space, the same for every game.
TIMEOUT = 1000
POLICY = BoundaryPolicy(final_observation=FinalObservation.NOT_STORED,
                        ending_rule=EndingRule.TIME_LIMIT, time_limit=TIMEOUT)
# Per field: (row shape, dtype every stored dtype must cast to without loss).
ROWS = {'obs': (OBSERVATION_SHAPE, np.uint8), 'acts': ((), np.int64), 'rews': ((), np.float32),
        'dones': ((), np.bool_)}


def demo_paths(directory: errors.PathLike, game: str) -> list[pathlib.Path]:
  """il-representations' `procgen/demo_<game>.pickle`, at any depth below `directory`."""
  return files.find_files(directory, f'demo_{game}.pickle')


def read_trajectories(path: errors.PathLike) -> Iterator[Trajectory]:
  """One demo file -> Trajectories (one or more per recorded trajectory). Episode metadata:
  source_file, trajectory_index, episode_in_trajectory."""
  path = pathlib.Path(path)
  try:
    with open(path, 'rb') as f:
      demos = safe_pickle.load(f, source=str(path))
  except OSError as e:
    raise errors.CorruptFileError(f'cannot read: {e}', path=path) from e
  with errors.located(path):
    columns = _columns(demos)
    for index in range(len(columns['obs'])):
      rows = {key: _rows(columns[key][index], key, index) for key in KEYS}
      yield from done_flags.split_at_dones(
          POLICY, rows['obs'], rows['acts'], rows['rews'], rows['dones'],
          metadata={'source_file': path.name, 'trajectory_index': np.int64(index)})


def _columns(demos: Any) -> Mapping[str, list]:
  if not isinstance(demos, Mapping) or not set(KEYS) <= set(demos):
    found = sorted(demos) if isinstance(demos, Mapping) else type(demos).__name__
    raise errors.SchemaError(f'expected a dict with keys {list(KEYS)}, got {found}')
  columns = {}
  for key in KEYS:
    if not isinstance(demos[key], (list, tuple)):
      raise errors.SchemaError(f'expected a list of per-trajectory arrays, got '
                               f'{type(demos[key]).__name__}', field=key)
    columns[key] = demos[key]
  lengths = {key: len(value) for key, value in columns.items()}
  if len(set(lengths.values())) != 1:
    raise errors.EpisodeBoundaryError(f'expected one entry per trajectory in every list, got '
                                      f'{lengths}', field=done_flags.odd_one_out(lengths))
  if not lengths['obs']:
    raise errors.EmptyInputError('the file holds no trajectory', field='obs')
  return columns


def _rows(values: Any, key: str, index: int) -> np.ndarray:
  row_shape, dtype = ROWS[key]
  array = np.asarray(values)
  if (array.ndim == 0 or array.shape[1:] != row_shape or
      not np.can_cast(array.dtype, dtype, 'same_kind' if key == 'acts' else 'safe')):
    raise errors.SchemaError(f'trajectory {index}: expected rows of {np.dtype(dtype).name}'
                             f'{list(row_shape)}, got {array.dtype.name}{list(array.shape[1:])}',
                             field=key)
  cast = array.astype(dtype, copy=False)
  if key == 'acts' and (cast.min(initial=0) < 0 or cast.max(initial=0) >= NUM_ACTIONS):
    raise errors.InvalidValueError(f'trajectory {index}: actions outside [0, {NUM_ACTIONS})',
                                   field=key)
  return cast
