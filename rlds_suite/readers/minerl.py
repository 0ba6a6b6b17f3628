"""MineRL v3 demonstration streams: `<Env>/<stream>/{rendered.npz, metadata.json, recording.mp4}`.

`rendered.npz` holds `reward` (T,), one `observation$<path>` array per observation key with T+1
rows and one `action$<path>` array per action key with T rows (`$` joins nested keys); the
point-of-view frames (`pov`) are in `recording.mp4`. `metadata.json` has `success`,
`duration_steps` (T) and `true_video_frame_count`.

Frames are aligned as MineRL's own pipeline does (minerl/data/data_pipeline.py,
`_load_data_pyfunc`): the video has `true_video_frame_count` frames, of which the last T+1 are the
T+1 states ("the last video frame corresponds to the last state"), so the first
`true_video_frame_count - (T + 1)` frames (the game still loading) are skipped. A video with fewer
frames than `true_video_frame_count` is refused. MineRL's loader then replaces the final state's
frame with the one before it; the final frame here is the one the video holds.

Episodes: MineRL's environments end an episode when the task is done (64 logs, the goal reached,
the item obtained) and otherwise by a time limit, and the recordings stop there or where the
player quit; `metadata.json`'s `success` tells which: a successful stream ended by termination,
any other by truncation. The T+1-th state is the final observation.

Each environment's keys are declared (`Env`), from MineRL's env specs; a stream with a missing or
an undeclared key is refused rather than guessed at. Floats are kept as float64 and integers as
int64 (exact for whatever width a file stored), enum values (`place`, `craft`, ...) as text.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.core import nested
from rlds_suite.core.episodes import BoundaryPolicy, FinalObservation, Trajectory
from rlds_suite.readers import files

ARRAYS, METADATA, VIDEO = 'rendered.npz', 'metadata.json', 'recording.mp4'
POV = 'pov'
POV_SHAPE = (64, 64, 3)
POLICY = BoundaryPolicy(final_observation=FinalObservation.EXTRA_ROW)


class Kind(enum.Enum):
  """How a key's values are stored: every row's shape and the exact dtype kept."""
  FLAG = ((), np.int64)  # 0/1 keyboard actions.
  COUNT = ((), np.int64)  # Inventory counts, item damage.
  SCALAR = ((), np.float64)  # compassAngle.
  CAMERA = ((2,), np.float64)  # Pitch and yaw change, degrees.
  VECTOR = ((64,), np.float64)  # The obfuscated 64-d vectors of the *VectorObf environments.
  TEXT = ((), np.str_)  # Enum values: 'none', 'log', ...


_KEYBOARD = {name: Kind.FLAG for name in ('attack', 'back', 'forward', 'jump', 'left', 'right',
                                          'sneak', 'sprint')}
_BASIC_ACTIONS = {**_KEYBOARD, 'camera': Kind.CAMERA}
_OBTAIN_ITEMS = ('coal', 'cobblestone', 'crafting_table', 'dirt', 'furnace', 'iron_axe',
                 'iron_ingot', 'iron_ore', 'iron_pickaxe', 'log', 'planks', 'stick', 'stone',
                 'stone_axe', 'stone_pickaxe', 'torch', 'wooden_axe', 'wooden_pickaxe')


@dataclasses.dataclass(frozen=True)
class Env:
  """One MineRL environment's stream keys (names as in rendered.npz, without the prefix)."""
  env_id: str
  observations: Mapping[str, Kind]  # Besides pov, which comes from the video.
  actions: Mapping[str, Kind]


def _envs() -> dict[str, Env]:
  navigate_obs = {'compassAngle': Kind.SCALAR, 'inventory$dirt': Kind.COUNT}
  navigate_act = {**_BASIC_ACTIONS, 'place': Kind.TEXT}
  obtain_obs = {**{f'inventory${item}': Kind.COUNT for item in _OBTAIN_ITEMS},
                'equipped_items.mainhand.damage': Kind.COUNT,
                'equipped_items.mainhand.maxDamage': Kind.COUNT,
                'equipped_items.mainhand.type': Kind.TEXT}
  obtain_act = {**_BASIC_ACTIONS, **{name: Kind.TEXT for name in ('craft', 'equip', 'nearbyCraft',
                                                                  'nearbySmelt', 'place')}}
  basic = {
      'treechop': ('MineRLTreechop-v0', {}, _BASIC_ACTIONS),
      'navigate': ('MineRLNavigate-v0', navigate_obs, navigate_act),
      'navigate_dense': ('MineRLNavigateDense-v0', navigate_obs, navigate_act),
      'navigate_extreme': ('MineRLNavigateExtreme-v0', navigate_obs, navigate_act),
      'obtain_diamond': ('MineRLObtainDiamond-v0', obtain_obs, obtain_act),
      'obtain_iron_pickaxe': ('MineRLObtainIronPickaxe-v0', obtain_obs, obtain_act),
  }
  envs = {}
  for name, (env_id, observations, actions) in basic.items():
    envs[name] = Env(env_id, observations, actions)
    obfuscated = env_id.replace('-v0', 'VectorObf-v0')
    envs[f'{name}_vector_obf'] = Env(obfuscated, {'vector': Kind.VECTOR}, {'vector': Kind.VECTOR})
  return envs


ENVS = _envs()


def stream_dirs(directory: errors.PathLike, env: Env) -> list[pathlib.Path]:
  """The stream directories of `env`: the sub-directories of every `<env_id>` folder at any depth
  below `directory` (MineRL's data_dir layout), `directory` itself included."""
  root = pathlib.Path(directory)
  env_dirs = [root] if root.name == env.env_id else []
  env_dirs += [path for path in root.rglob(env.env_id) if path.is_dir()]
  streams = sorted(stream for env_dir in env_dirs for stream in env_dir.iterdir() if stream.is_dir())
  if not streams:
    raise errors.EmptyInputError(f'no stream directories in a {env.env_id!r} folder', path=root)
  return streams


def expected_totals(streams: Sequence[pathlib.Path]) -> progress.Totals:
  """Episodes (a stream each) and RLDS steps (`duration_steps` actions and the final
  observation's step) from the streams' metadata.json alone, for a build's progress bar; episodes
  only where a stream's metadata cannot say (its read names the problem)."""
  try:
    steps = sum(int(_metadata(stream / METADATA)['duration_steps']) + 1 for stream in streams)
  except (errors.RLDSSuiteError, TypeError, ValueError):
    return progress.Totals(episodes=len(streams))
  return progress.Totals(episodes=len(streams), steps=steps)


def read_stream(directory: errors.PathLike, env: Env, *, with_video: bool = True) -> Trajectory:
  """One stream directory -> a Trajectory. Observations and actions are dicts of the declared keys,
  nested at each `$` as MineRL's loader unflattens them, observations plus `pov` from the video
  when `with_video`; without it, a missing recording.mp4 is allowed and nothing is decoded."""
  directory = pathlib.Path(directory)
  arrays_path = directory / ARRAYS
  if not arrays_path.is_file():
    raise errors.EmptyInputError(f'missing {ARRAYS}', path=directory, field=ARRAYS)
  metadata = _metadata(directory / METADATA)
  arrays = files.load_npz(arrays_path)
  with errors.located(arrays_path):
    _check_keys(arrays, env)
    rewards = _rows(arrays, 'reward', ((), np.float32))
    num_actions = len(rewards)
    observations = unflatten({key: _rows(arrays, f'observation${key}', kind.value)
                              for key, kind in env.observations.items()})
    actions = unflatten({key: _rows(arrays, f'action${key}', kind.value)
                         for key, kind in env.actions.items()})
  if int(metadata['duration_steps']) != num_actions:
    raise errors.EpisodeBoundaryError(
        f'duration_steps is {metadata["duration_steps"]} but {ARRAYS} has {num_actions} rewards',
        path=directory / METADATA, field='duration_steps')
  if with_video:
    observations[POV] = read_pov(directory / VIDEO, int(metadata['true_video_frame_count']),
                                 num_actions + 1)
  with errors.located(directory):
    return POLICY.trajectory(
        observations, actions, rewards, terminal_flag=metadata['success'],
        metadata={'stream_name': directory.name,
                  'success': metadata['success'],
                  'duration_ms': np.int64(metadata['duration_ms']),
                  'true_video_frame_count': np.int64(metadata['true_video_frame_count']),
                  'total_reward': np.float64(metadata['total_reward'])})


def read_pov(path: pathlib.Path, true_frame_count: int, num_states: int) -> np.ndarray:
  """The last `num_states` of the video's first `true_frame_count` frames, RGB uint8, as MineRL's
  pipeline aligns them; EpisodeBoundaryError when the video is shorter."""
  try:
    import av  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise errors.MissingDependencyError(
        'decoding MineRL videos needs PyAV: pip install rlds_suite[minerl]', path=path) from e
  if not path.is_file():
    raise errors.EmptyInputError(
        f'missing {VIDEO}: the pov frames are in the video (build a *_without_video config for '
        f'the other observations only)', path=path, field=POV)
  skip = true_frame_count - num_states
  if skip < 0:
    raise errors.EpisodeBoundaryError(
        f'true_video_frame_count {true_frame_count} is less than the {num_states} states',
        path=path.with_name(METADATA), field='true_video_frame_count')
  frames = np.empty((num_states, *POV_SHAPE), np.uint8)
  decoded = 0
  try:
    with av.open(str(path)) as container:
      size = container.streams.video[0].codec_context if container.streams.video else None
      if size is None:
        raise errors.CorruptFileError('no decodable video stream (a truncated or damaged mp4?)',
                                      path=path, field=POV)
      if (size.height, size.width) != POV_SHAPE[:2]:
        raise errors.SchemaError(f'expected {POV_SHAPE[1]}x{POV_SHAPE[0]} frames, the stream '
                                 f'declares {size.width}x{size.height}', path=path, field=POV)
      for frame in container.decode(video=0):
        if decoded >= skip:
          image = frame.to_ndarray(format='rgb24')
          if image.shape != POV_SHAPE:
            raise errors.SchemaError(f'expected {POV_SHAPE} frames, got {image.shape}', path=path,
                                     field=POV)
          frames[decoded - skip] = image
        decoded += 1
        if decoded == true_frame_count:
          break  # MineRL reads no further.
  except (av.error.FFmpegError, UnicodeDecodeError) as e:  # PyAV decodes the mp4's tags as UTF-8.
    raise errors.CorruptFileError(f'cannot decode the video: {e}', path=path, field=POV) from e
  if decoded < true_frame_count:
    raise errors.EpisodeBoundaryError(
        f'the video has {decoded} frames, fewer than true_video_frame_count {true_frame_count} '
        f'(the last {num_states} are the states)', path=path, field=POV)
  return frames


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
  """{'inventory$dirt': x} -> {'inventory': {'dirt': x}}, as MineRL's loader nests its keys."""
  return nested.unflatten_paths(flat, separator='$')


def _metadata(path: pathlib.Path) -> dict[str, Any]:
  try:
    metadata = json.loads(path.read_text())
  except FileNotFoundError as e:
    raise errors.EmptyInputError(f'missing {METADATA}', path=path) from e
  except (OSError, ValueError) as e:
    raise errors.CorruptFileError(f'cannot read JSON: {e}', path=path) from e
  for key in ('duration_steps', 'true_video_frame_count', 'success', 'duration_ms', 'total_reward'):
    if key not in metadata:
      raise errors.SchemaError(f'missing key {key!r}', path=path, field=key)
  success = metadata['success']
  if success not in (True, False, 'True', 'False'):  # MineRL writes str(bool).
    raise errors.SchemaError(f'expected True or False, got {success!r}', path=path,
                             field='success')
  return {**metadata, 'success': success in (True, 'True')}


def _check_keys(arrays: Mapping[str, np.ndarray], env: Env) -> None:
  declared = {'reward', *(f'observation${k}' for k in env.observations),
              *(f'action${k}' for k in env.actions)}
  missing, extra = sorted(declared - set(arrays)), sorted(set(arrays) - declared)
  if missing or extra:
    raise errors.SchemaError(
        f'keys differ from {env.env_id}\'s declared ones: missing {missing}, undeclared {extra}',
        field=(missing or extra)[0])


def _rows(arrays: Mapping[str, np.ndarray], key: str,
          declared: tuple[tuple[int, ...], Any]) -> np.ndarray:
  row_shape, dtype = declared
  array = np.asarray(arrays[key])
  if array.ndim == 0 or array.shape[1:] != row_shape:
    raise errors.SchemaError(f'expected rows of shape {list(row_shape)}, got '
                             f'{list(array.shape[1:])}', field=key)
  if dtype is np.str_:
    if array.dtype.kind not in 'US':
      raise errors.SchemaError(f'expected text values, got {array.dtype}', field=key)
    return array.astype(np.str_)
  if not np.can_cast(array.dtype, dtype, 'same_kind') or (
      array.dtype.kind == 'f' and np.dtype(dtype).kind in 'iu'):
    raise errors.SchemaError(f'expected {np.dtype(dtype).name} values, got {array.dtype}',
                             field=key)
  cast = array.astype(dtype, copy=False)
  if cast.dtype != array.dtype and not np.array_equal(cast, array, equal_nan=True):
    raise errors.SchemaError(f'values change when cast to {np.dtype(dtype).name}', field=key)
  return cast
