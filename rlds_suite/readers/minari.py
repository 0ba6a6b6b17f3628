"""Minari datasets (Farama-Foundation/Minari >= 0.5): metadata.json plus one of two storage backends.

A dataset is a directory `<root>/<dataset_id>/data/` (root: $MINARI_DATASETS_PATH or
~/.minari/datasets) holding `metadata.json` (data_format, jpeg_encoding, observation_space and
action_space as Minari's serialize_space JSON, env_spec, dataset_id, ref_min_score/ref_max_score,
...) and the episodes, written by Minari's storage classes:

* `hdf5`: data/main_data.hdf5 with one group `episode_<i>` per episode (attrs id, seed,
  total_steps): observations (T+1 rows), actions, rewards, terminations, truncations (T rows),
  infos. Dict spaces are groups of their keys, Tuple spaces groups `_index_<j>`.
* `arrow`: data/<i>/part-0.arrow (Arrow IPC file) with T+1 rows: observations, then actions,
  rewards, terminations and truncations padded with one row at the end. Dict and Tuple spaces are
  struct columns (Tuple fields named '0', '1', ...), Box spaces fixed-size lists of the flattened
  shape, Discrete spaces integers.

With `jpeg_encoding` (Minari's default) every image space (Minari's `is_image_space`: a uint8 Box
of rank 2 or 3, at least 32x32, bounds 0 and 255) is stored as JPEG bytes, one per row; the
decoded pixels are what Minari itself returns. The spaces in metadata.json are checked against
the stored arrays: a mismatch is a SchemaError naming the file and the field.

Minari keeps terminations and truncations apart, and so do we: T+1 observations per T actions
(`FinalObservation.EXTRA_ROW`); an episode whose last step has `terminations` set is terminated,
otherwise (truncation, or a recording that stopped with neither flag) truncated. A flag on any
earlier step is an EpisodeBoundaryError. Tuple-space values become dicts keyed '0', '1', ...
Step `infos` are not converted.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import pathlib
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import h5py
import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.core.episodes import BoundaryPolicy, FinalObservation, Trajectory
from rlds_suite.readers import hdf5

POLICY = BoundaryPolicy(final_observation=FinalObservation.EXTRA_ROW)
METADATA_FILE = 'metadata.json'
HDF5_FILE = 'main_data.hdf5'
ARROW_FILE = 'part-0.arrow'
FORMATS = ('hdf5', 'arrow')


@dataclasses.dataclass(frozen=True)
class Box:
  """A gymnasium Box (also MultiBinary, MultiDiscrete: fixed shape and dtype), as Minari stores it."""
  shape: tuple[int, ...]
  dtype: np.dtype
  image: bool = False  # Minari's is_image_space: JPEG-encoded when the dataset says jpeg_encoding.
  # A Box's declared bounds (nested lists as stored), None for MultiDiscrete/MultiBinary.
  low: Any = dataclasses.field(default=None, compare=False)
  high: Any = dataclasses.field(default=None, compare=False)


@dataclasses.dataclass(frozen=True)
class Discrete:
  n: int
  start: int = 0
  dtype: np.dtype = np.dtype(np.int64)


# dict: {key: Space} (Dict); tuple: (Space, ...) (Tuple), whose values are read as {'0': ..., ...}.
Space = Union[Box, Discrete, dict, tuple]


@dataclasses.dataclass(frozen=True)
class Metadata:
  """A dataset's metadata.json, with its spaces parsed; `raw` is the whole file."""
  path: pathlib.Path  # The data/ directory.
  data_format: str
  jpeg_encoding: bool
  observation_space: Space
  action_space: Space
  raw: Mapping[str, Any]

  @property
  def dataset_id(self) -> str:
    return str(self.raw.get('dataset_id', self.path.parent.name))

  @property
  def total_episodes(self) -> int:
    return int(self.raw.get('total_episodes', 0))


def datasets_root() -> pathlib.Path:
  """Where Minari keeps local datasets: $MINARI_DATASETS_PATH, else ~/.minari/datasets."""
  root = os.environ.get('MINARI_DATASETS_PATH')
  return pathlib.Path(root) if root else pathlib.Path.home() / '.minari' / 'datasets'


def find_dataset(dataset_id: str, root: Optional[errors.PathLike] = None) -> pathlib.Path:
  """The data/ directory of local dataset `dataset_id` (e.g. 'mujoco/pusher/expert-v0')."""
  path = pathlib.Path(root) if root is not None else datasets_root()
  data = path / dataset_id / 'data'
  if not (data / METADATA_FILE).is_file():
    raise errors.EmptyInputError(f'no Minari dataset {dataset_id!r} here (expected '
                                 f'{dataset_id}/data/{METADATA_FILE})', path=path)
  return data


def read_metadata(data_path: errors.PathLike, jpeg_encoding: Optional[bool] = None) -> Metadata:
  """Reads and checks metadata.json of a data/ directory.

  `jpeg_encoding` declares the JPEG flag for datasets whose metadata.json lacks it (written before
  Minari had it; Minari then assumes true); it must agree with the flag when there is one.
  """
  data_path = pathlib.Path(data_path)
  path = data_path / METADATA_FILE
  try:
    raw = json.loads(path.read_text(encoding='utf-8'))
  except FileNotFoundError as e:
    raise errors.EmptyInputError('no Minari metadata.json', path=path) from e
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise errors.CorruptFileError(f'not JSON: {e}', path=path) from e
  with errors.located(path):
    data_format = raw.get('data_format', 'hdf5')
    if data_format not in FORMATS:
      raise errors.SchemaError(f'unsupported storage {data_format!r}, expected one of {FORMATS}',
                               field='data_format')
    for key in ('observation_space', 'action_space'):
      if not isinstance(raw.get(key), str):
        raise errors.SchemaError('missing (datasets that only name an env_spec are not supported)',
                                 field=key)
    stored_flag = raw.get('jpeg_encoding')
    if stored_flag is not None and jpeg_encoding is not None and bool(stored_flag) != jpeg_encoding:
      raise errors.SchemaError(f'the dataset says {bool(stored_flag)}, jpeg_encoding={jpeg_encoding} '
                               'was declared', field='jpeg_encoding')
    if stored_flag is None:
      stored_flag = True if jpeg_encoding is None else jpeg_encoding  # Minari's own default: true.
    return Metadata(
        path=data_path, data_format=data_format, jpeg_encoding=bool(stored_flag),
        observation_space=parse_space(raw['observation_space'], 'observation_space'),
        action_space=parse_space(raw['action_space'], 'action_space'),
        raw=raw)


def parse_space(serialized: Union[str, Mapping[str, Any]], field: str) -> Space:
  """A space from Minari's serialize_space JSON (Box, Discrete, MultiDiscrete, MultiBinary, Dict,
  Tuple); other spaces (Text, Graph, ...) are a SchemaError."""
  try:
    spec = json.loads(serialized) if isinstance(serialized, str) else serialized
    kind = spec['type']
    if kind == 'Box':
      dtype, shape = np.dtype(spec['dtype']), tuple(int(d) for d in spec['shape'])
      image = (dtype == np.uint8 and len(shape) in (2, 3) and shape[0] >= 32 and shape[1] >= 32
               and bool(np.all(np.asarray(spec['low']) == 0))
               and bool(np.all(np.asarray(spec['high']) == 255)))
      return Box(shape, dtype, image, low=spec['low'], high=spec['high'])
    if kind == 'Discrete':
      return Discrete(int(spec['n']), int(spec.get('start', 0)), np.dtype(spec.get('dtype', 'int64')))
    if kind == 'MultiDiscrete':
      return Box(tuple(np.asarray(spec['nvec']).shape), np.dtype(spec.get('dtype', 'int64')))
    if kind == 'MultiBinary':
      n = spec['n']
      return Box(tuple(n) if isinstance(n, list) else (int(n),), np.dtype(np.int8))
    if kind == 'Dict':
      return {key: parse_space(sub, f'{field}/{key}') for key, sub in spec['subspaces'].items()}
    if kind == 'Tuple':
      return tuple(parse_space(sub, f'{field}/{i}') for i, sub in enumerate(spec['subspaces']))
  except (KeyError, TypeError, ValueError) as e:
    raise errors.SchemaError(f'not a serialized gymnasium space: {e!r}', field=field) from e
  raise errors.SchemaError(f'unsupported space type {kind!r}', field=field)


@dataclasses.dataclass(frozen=True)
class EpisodeArrays:
  """One stored episode as Minari returns it: T+1 observations, T of everything else."""
  id: int
  observations: Any
  actions: Any
  rewards: np.ndarray
  terminations: np.ndarray
  truncations: np.ndarray
  seed: Optional[int] = None


def episode_ids(metadata: Metadata) -> list[int]:
  """The ids of the stored episodes, in order; they must be the 0..total_episodes-1 and hold the
  total_steps that metadata.json declares (when it does), so that nothing is silently missing."""
  if metadata.data_format == 'hdf5':
    path = metadata.path / HDF5_FILE
    with hdf5.open_file(path) as f:
      ids = sorted(int(name[len('episode_'):]) for name in f
                   if name.startswith('episode_') and name[len('episode_'):].isdigit())
      steps = sum(_hdf5_num_steps(f, i) for i in ids)
    if not ids:
      raise errors.EmptyInputError('no episode_<i> groups', path=path)
  else:
    path = metadata.path
    ids = sorted(int(p.name) for p in metadata.path.iterdir() if p.is_dir() and p.name.isdigit())
    if not ids:
      raise errors.EmptyInputError('no <episode>/part-0.arrow directories', path=metadata.path)
    steps = sum(_arrow_num_steps(metadata.path / str(i) / ARROW_FILE) for i in ids)
  _check_declared_counts(metadata, ids, steps, path)
  return ids


def expected_totals(metadata: Metadata) -> progress.Totals:
  """The episodes and RLDS steps (a step per action and the final observation's) metadata.json
  declares, for a build's progress bar; None where it declares none (`episode_ids` checks them)."""
  episodes, steps = metadata.raw.get('total_episodes'), metadata.raw.get('total_steps')
  return progress.Totals(
      episodes=None if episodes is None else int(episodes),
      steps=None if episodes is None or steps is None else int(steps) + int(episodes))


def _check_declared_counts(metadata: Metadata, ids: Sequence[int], steps: int,
                           path: pathlib.Path) -> None:
  declared = metadata.raw.get('total_episodes')
  if declared is not None:
    expected = set(range(int(declared)))
    missing, extra = sorted(expected - set(ids)), sorted(set(ids) - expected)
    if missing or extra:
      raise errors.SchemaError(
          f'metadata.json declares total_episodes {declared}, the data holds {len(ids)} episodes '
          f'(missing {_episode_names(missing)}, beyond the declared ids {_episode_names(extra)})',
          path=path, field='total_episodes')
  declared_steps = metadata.raw.get('total_steps')
  if declared_steps is not None and int(declared_steps) != steps:
    raise errors.SchemaError(f'metadata.json declares total_steps {declared_steps}, the episodes '
                             f'hold {steps}', path=path, field='total_steps')


def _episode_names(ids: Sequence[int]) -> list[str]:
  return [f'episode_{i}' for i in ids[:10]]


def _hdf5_num_steps(f: h5py.File, i: int) -> int:
  rewards = f.get(f'episode_{i}/rewards')
  return rewards.shape[0] if isinstance(rewards, h5py.Dataset) and rewards.ndim else 0


def _arrow_num_steps(path: pathlib.Path) -> int:
  """Rows of an episode's Arrow file less the padding row, from its batches' metadata."""
  pa = _pyarrow()
  try:
    with pa.memory_map(str(path)) as source:
      reader = pa.ipc.open_file(source)
      rows = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
  except FileNotFoundError as e:
    raise errors.EmptyInputError('missing episode file', path=path) from e
  except (pa.ArrowInvalid, OSError) as e:
    raise errors.CorruptFileError(f'not a readable Arrow IPC file: {e}', path=path) from e
  return max(rows - 1, 0)


def read_episodes(metadata: Metadata,
                  ids: Optional[Sequence[int]] = None) -> Iterator[EpisodeArrays]:
  """The stored episodes `ids` (default: all, in id order), decoded and checked against the
  declared spaces."""
  ids = episode_ids(metadata) if ids is None else ids
  if metadata.data_format == 'hdf5':
    with hdf5.open_file(metadata.path / HDF5_FILE) as f:
      for i in ids:
        yield _hdf5_episode(f, i, metadata)
  else:
    for i in ids:
      yield _arrow_episode(metadata, i)


def trajectory(episode: EpisodeArrays, metadata: Metadata, path: errors.PathLike) -> Trajectory:
  """One Minari episode in standard alignment; terminations and truncations stay apart."""
  n = len(episode.rewards)
  with errors.located(path):
    for name in ('terminations', 'truncations'):
      flags = np.asarray(getattr(episode, name), dtype=bool)
      if len(flags) != n:
        raise errors.EpisodeBoundaryError(f'expected {n} rows (one per reward), got {len(flags)}',
                                          field=f'episode_{episode.id}/{name}')
      early = np.flatnonzero(flags[:-1])
      if len(early):
        raise errors.EpisodeBoundaryError(
            f'set before the last step, at steps {early[:10].tolist()}',
            field=f'episode_{episode.id}/{name}')
    return POLICY.trajectory(
        episode.observations, episode.actions, episode.rewards,
        terminal_flag=bool(n and episode.terminations[-1]),
        metadata={'episode_id': episode.id, 'seed': -1 if episode.seed is None else episode.seed})


def read_trajectories(data_path: errors.PathLike,
                      jpeg_encoding: Optional[bool] = None) -> Iterator[Trajectory]:
  """Every episode of the Minari dataset in `data_path` (its data/ directory); `jpeg_encoding` as
  in `read_metadata`."""
  yield from trajectories(read_metadata(data_path, jpeg_encoding))


def trajectories(metadata: Metadata, ids: Optional[Sequence[int]] = None) -> Iterator[Trajectory]:
  """The episodes `ids` (default: all, in id order) of the dataset `metadata` describes."""
  for episode in read_episodes(metadata, ids):
    yield trajectory(episode, metadata, episode_file(metadata, episode.id))


def episode_file(metadata: Metadata, episode_id: int) -> pathlib.Path:
  """The file holding episode `episode_id` (what its errors name)."""
  if metadata.data_format == 'hdf5':
    return metadata.path / HDF5_FILE
  return metadata.path / str(episode_id) / ARROW_FILE


def _hdf5_episode(f: h5py.File, i: int, metadata: Metadata) -> EpisodeArrays:
  name = f'episode_{i}'
  group = f.get(name)
  if not isinstance(group, h5py.Group):
    raise errors.SchemaError('missing episode group', field=name)
  rewards = hdf5.read_array(group, 'rewards', ranks=(1,), kinds='fiu')
  n = len(rewards)
  seed = group.attrs.get('seed')
  return EpisodeArrays(
      id=i,
      observations=_hdf5_space(group, 'observations', metadata.observation_space,
                               metadata.jpeg_encoding, n + 1, name),
      actions=_hdf5_space(group, 'actions', metadata.action_space, metadata.jpeg_encoding, n, name),
      rewards=rewards,
      terminations=hdf5.read_array(group, 'terminations', ranks=(1,), kinds='biu'),
      truncations=hdf5.read_array(group, 'truncations', ranks=(1,), kinds='biu'),
      seed=None if seed is None else int(seed))


def _hdf5_space(group: h5py.Group, key: str, space: Space, jpeg: bool, rows: int,
                where: str) -> Any:
  field = f'{where}/{key}'
  item = group.get(key)
  if isinstance(space, (dict, tuple)):
    names = list(space) if isinstance(space, dict) else [f'_index_{j}' for j in range(len(space))]
    if not isinstance(item, h5py.Group) or sorted(item.keys()) != sorted(names):
      stored = sorted(item.keys()) if isinstance(item, h5py.Group) else 'a dataset' if item else 'nothing'
      raise errors.SchemaError(f'metadata.json declares keys {sorted(names)}, the file stores '
                               f'{stored}', field=field)
    subspaces = space.values() if isinstance(space, dict) else space
    values = [_hdf5_space(item, name, sub, jpeg, rows, field) for name, sub in zip(names, subspaces)]
    return dict(zip(space, values)) if isinstance(space, dict) else _tuple_as_dict(values)
  if isinstance(space, Box) and space.image and jpeg:
    if isinstance(item, h5py.Dataset) and item.ndim == 1 + len(space.shape):
      raise errors.SchemaError(
          f'stores raw images of {item.shape[1:]}, but jpeg_encoding is true (metadata.json, or '
          'Minari\'s default when it has no flag: declare jpeg_encoding=False for such datasets)',
          field=field)
    array = hdf5.read_array(group, key, ranks=(1, 2), kinds='uO')
    _expect_rows(array, rows, field)
    return _decode_jpegs([np.asarray(row, dtype=np.uint8).tobytes() for row in array], space, field)
  shape = space.shape if isinstance(space, Box) else ()
  array = hdf5.read_array(group, key, ranks=(1 + len(shape),), kinds='biuf')
  _expect_rows(array, rows, field)
  return _check_values(array, space, field)


def _arrow_episode(metadata: Metadata, i: int) -> EpisodeArrays:
  pa = _pyarrow()
  path = metadata.path / str(i) / ARROW_FILE
  try:
    table = pa.ipc.open_file(str(path)).read_all()
  except FileNotFoundError as e:
    raise errors.EmptyInputError('missing episode file', path=path) from e
  except (pa.ArrowInvalid, OSError) as e:
    raise errors.CorruptFileError(f'not a readable Arrow IPC file: {e}', path=path) from e
  with errors.located(path):
    for column in ('observations', 'actions', 'rewards', 'terminations', 'truncations'):
      if column not in table.column_names:
        raise errors.SchemaError('missing column', field=column)
    n = table.num_rows - 1  # Actions, rewards and flags are padded with one row after the last step.
    observations = _arrow_space(table.column('observations').combine_chunks(),
                                metadata.observation_space, metadata.jpeg_encoding, 'observations')
    actions = _arrow_space(table.column('actions').combine_chunks().slice(0, n),
                           metadata.action_space, metadata.jpeg_encoding, 'actions')
    return EpisodeArrays(
        id=i, observations=observations, actions=actions,
        rewards=_arrow_numbers(table, 'rewards', n, 'fiu'),
        terminations=_arrow_numbers(table, 'terminations', n, 'biu'),
        truncations=_arrow_numbers(table, 'truncations', n, 'biu'),
        seed=_arrow_episode_metadata(metadata.path / str(i)).get('seed'))


def _pyarrow() -> Any:
  try:
    import pyarrow as pa  # pylint: disable=g-import-not-at-top
    import pyarrow.ipc  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError as e:
    raise errors.MissingDependencyError(
        'reading Minari arrow datasets needs pyarrow: pip install rlds_suite[minari]') from e
  return pa


def _arrow_episode_metadata(directory: pathlib.Path) -> dict[str, Any]:
  path = directory / METADATA_FILE
  if not path.is_file():
    return {}
  try:
    return json.loads(path.read_text(encoding='utf-8'))
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise errors.CorruptFileError(f'not JSON: {e}', path=path) from e


def _arrow_numbers(table: Any, column: str, n: int, kinds: str) -> np.ndarray:
  array = table.column(column).combine_chunks().slice(0, n).to_numpy(zero_copy_only=False)
  if array.dtype.kind not in kinds:
    raise errors.SchemaError(f'expected numpy dtype kind in {kinds!r}, got {array.dtype}',
                             field=column)
  return array


def _arrow_space(values: Any, space: Space, jpeg: bool, field: str) -> Any:
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  if isinstance(space, (dict, tuple)):
    names = list(space) if isinstance(space, dict) else [str(j) for j in range(len(space))]
    stored = [values.type.field(j).name for j in range(values.type.num_fields)] if (
        pa.types.is_struct(values.type)) else None
    if stored is None or sorted(stored) != sorted(names):
      raise errors.SchemaError(f'metadata.json declares keys {sorted(names)}, the file stores '
                               f'{sorted(stored) if stored is not None else values.type}',
                               field=field)
    subspaces = space.values() if isinstance(space, dict) else space
    parts = [_arrow_space(values.field(name), sub, jpeg, f'{field}/{name}')
             for name, sub in zip(names, subspaces)]
    return dict(zip(space, parts)) if isinstance(space, dict) else _tuple_as_dict(parts)
  if isinstance(space, Box) and space.image and jpeg:
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
      raise errors.SchemaError(f'expected JPEG bytes (jpeg_encoding), got {values.type}', field=field)
    return _decode_jpegs(values.to_pylist(), space, field)
  if isinstance(space, Box):
    size = int(np.prod(space.shape, dtype=np.int64))
    if not pa.types.is_fixed_size_list(values.type) or values.type.list_size != size:
      raise errors.SchemaError(f'metadata.json declares shape {space.shape}, the file stores '
                               f'{values.type}', field=field)
    flat = values.flatten().to_numpy(zero_copy_only=False)
    array = flat.reshape((len(values),) + space.shape)
  else:
    if not pa.types.is_integer(values.type):
      raise errors.SchemaError(f'metadata.json declares Discrete, the file stores {values.type}',
                               field=field)
    array = values.to_numpy(zero_copy_only=False)
  return _check_values(array, space, field)


def _tuple_as_dict(values: list) -> dict[str, Any]:
  """Tuple-space values as {'0': ..., '1': ...} (Minari's arrow field names): RLDS/TFDS features
  are dicts."""
  return {str(j): value for j, value in enumerate(values)}


def _expect_rows(array: np.ndarray, rows: int, field: str) -> None:
  if len(array) != rows:
    raise errors.EpisodeBoundaryError(f'expected {rows} rows, got {len(array)}', field=field)


def _check_values(array: np.ndarray, space: Space, field: str) -> np.ndarray:
  """The stored array, checked against (and cast to) its Box or Discrete space."""
  if isinstance(space, Box):
    if array.shape[1:] != space.shape:
      raise errors.SchemaError(f'metadata.json declares shape {space.shape}, the file stores rows '
                               f'of {array.shape[1:]}', field=field)
    if not np.can_cast(array.dtype, space.dtype, casting='safe'):  # No silent float64 -> float32.
      raise errors.SchemaError(f'metadata.json declares {space.dtype}, the file stores {array.dtype}',
                               field=field)
    return array.astype(space.dtype, copy=False)
  if array.ndim != 1 or array.dtype.kind not in 'iu':
    raise errors.SchemaError(f'metadata.json declares Discrete({space.n}), the file stores '
                             f'{array.dtype} rows of {array.shape[1:]}', field=field)
  bad = np.flatnonzero((array < space.start) | (array >= space.start + space.n))
  if len(bad):
    raise errors.SchemaError(f'values outside Discrete({space.n}, start={space.start}) at rows '
                             f'{bad[:10].tolist()}', field=field)
  return array.astype(space.dtype, copy=False)


def _decode_jpegs(frames: list, space: Box, field: str) -> np.ndarray:
  """JPEG bytes -> (N, *shape) uint8, decoded with Pillow as Minari does."""
  try:
    from PIL import Image  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise errors.MissingDependencyError(
        'decoding Minari JPEG frames needs Pillow: pip install rlds_suite[minari]') from e
  out = np.empty((len(frames),) + space.shape, np.uint8)
  for row, data in enumerate(frames):
    try:
      image = np.asarray(Image.open(io.BytesIO(data)), dtype=np.uint8)
    except (OSError, ValueError, TypeError) as e:
      raise errors.CorruptFileError(f'row {row}: not a decodable JPEG: {e}', field=field) from e
    if image.shape != space.shape:
      raise errors.SchemaError(f'metadata.json declares images of {space.shape}, row {row} decodes '
                               f'to {image.shape}', field=field)
    out[row] = image
  return out
