"""RLDS episodes -> an il-representations processed shard, written as its `write_frames` writes one.

The shard is a zstd-compressed tar (level 19, long-distance matching, a 2^26 window, up to 10
threads, as il_representations/data/write_dataset.py compresses it) whose first member is
`_metadata.meta.pickle` ({env_cfg, action_space, observation_space, color_space}, the spaces as
il-representations' `serialize_gym_space` pickles them), followed per transition by the members of
webdataset's TarWriter for `{'__key__': 'frame_%03d', 'frame.pickle': n, KEY.pickle: value}`:
`frame_NNN.{acts,dones,frame,infos,next_obs,obs,rews}.pickle`, keys sorted, mode 0444, owner
bigdata, each value pickled with the default protocol (numpy arrays under `numpy.core`, as numpy
1.x pickles them: the members are byte for byte the authors'). il-representations'
`load_wds_datasets` reads it from `<data_root>/data/processed/<type>/<benchmark>/<task>/`.

Episode ends: `dones` is True on each episode's last transition, as il-representations sets it;
a truncated episode's last `infos` also says `TimeLimit.truncated` (gym's convention), which our
reader honours, so termination and truncation survive the round trip (for benchmarks whose every
done is a truncation, dm_control and MAGICAL, the infos stay as the authors wrote them). Where the
benchmark's shards delimit recordings by a jump in the observations (Atari: a done is the game's
end), a truncated episode gets no done and no `infos` instead, as in the authors' Pong shard: the
jump to the next episode's first observation, or the shard's end, ends it. Rewards are written, in
the task's declared dtype (`TaskLayout.reward_dtype`: procgen float32), unless the episodes'
`has_rewards` metadata says there were none (the authors' Atari shards). The zstd frame carries a
content checksum, as the authors' shards do.
Where an episode's final observation was never kept (its last step is a copy, procgen), `next_obs`
at the done is the next episode's first observation, as in the authors' procgen shards. Physics
states (`internal_state` step field) and env discounts go to `infos` as in the authors' dm_control
shards.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import pickle
import tarfile
import time
from typing import Any, Iterable, Iterator, Mapping, Optional

import numpy as np
import zstandard

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.core.episodes import EndingRule
from rlds_suite.exports import files
from rlds_suite.readers import il_representations as reader
from rlds_suite.readers import il_representations_tasks as tasks

ENV_CFG = 'env_cfg'  # Episode metadata (JSON text) naming the benchmark and task.
HAS_REWARDS = 'has_rewards'  # Episode metadata: False where the source recorded no rewards.


class _Global:
  """A global (module.name) written into a pickle without importing its module."""

  def __init__(self, module: str, name: str):
    self.module, self.name = module, name

  def __call__(self, *args, **kwargs):
    raise TypeError('a stand-in for pickling only')


class _Reduced:
  """An object pickled as `function(*args)`."""

  def __init__(self, function: _Global, args: tuple):
    self.function, self.args = function, args


class _ForeignPickler(pickle._Pickler):  # pylint: disable=protected-access
  """Pickles `_Global`s as STACK_GLOBAL opcodes, so the metadata refers to il-representations' and
  gym's classes exactly as the authors' shards do, without those packages installed here; and
  numpy arrays and scalars under `numpy.core`, as numpy 1.x (il-representations' stack) pickles
  them and can unpickle them: numpy 2 names `numpy._core`, which numpy before 1.26 cannot load."""
  dispatch = pickle._Pickler.dispatch.copy()  # pylint: disable=protected-access

  def save_foreign_global(self, obj: _Global) -> None:
    self.save(obj.module)
    self.save(obj.name)
    self.write(pickle.STACK_GLOBAL)
    self.memoize(obj)

  dispatch[_Global] = save_foreign_global

  def reducer_override(self, obj: Any) -> Any:
    if isinstance(obj, _Reduced):
      return obj.function, obj.args
    if type(obj) is np.ndarray or isinstance(obj, np.generic):  # pylint: disable=unidiomatic-typecheck
      function, *rest = obj.__reduce_ex__(self.proto)
      module = getattr(function, '__module__', '') or ''
      if module.startswith('numpy._core'):
        function = _global(module.replace('numpy._core', 'numpy.core', 1), function.__name__)
      return (function, *rest)
    return NotImplemented


_GLOBALS: dict[tuple[str, str], _Global] = {}


def _global(module: str, name: str) -> _Global:
  """One _Global per name, so that a pickle's memo refers back to it as it does to a class."""
  return _GLOBALS.setdefault((module, name), _Global(module, name))


def dumps(value: Any) -> bytes:
  """`value` pickled with the default protocol, as webdataset's encoder pickles `.pickle` members."""
  buffer = io.BytesIO()
  _ForeignPickler(buffer, protocol=pickle.DEFAULT_PROTOCOL).dump(value)
  return buffer.getvalue()


def dumps_metadata(meta_dict: Mapping[str, Any]) -> bytes:
  return dumps(dict(meta_dict))


_INFLATE = _global('il_representations.envs.utils', '_inflate_object')


def box_space(low: np.ndarray, high: np.ndarray) -> _Reduced:
  """A gym Box as il-representations' serialize_gym_space pickles it."""
  low, high = np.asarray(low), np.asarray(high)
  return _Reduced(_INFLATE, (_global('gym.spaces.box', 'Box'),
                             {'low': low, 'high': high, 'shape': low.shape, 'dtype': low.dtype}))


def discrete_space(n: int) -> _Reduced:
  return _Reduced(_INFLATE, (_global('gym.spaces.discrete', 'Discrete'), {'n': int(n)}))


def color_space(name: str) -> _Reduced:
  return _Reduced(_global('imitation.augment.color', 'ColorSpace'), (name,))


def meta_dict(env_cfg: Mapping[str, Any]) -> dict[str, Any]:
  """The shard metadata of a declared task (rlds_suite.readers.il_representations_tasks)."""
  benchmark, task = env_cfg.get('benchmark_name'), env_cfg.get('task_name')
  layout = tasks.layout(benchmark, task)
  if layout is None:
    raise errors.SchemaError(
        f'no il-representations task layout declared for {benchmark!r}/{task!r} (known: '
        f'{sorted("/".join(k) for k in tasks.LAYOUTS)})', field=ENV_CFG)
  shape, dtype = layout.observation_shape, layout.observation_dtype
  if layout.discrete:
    action_space = discrete_space(layout.num_actions)
  else:
    action_space = box_space(-np.ones(layout.action_dim, np.float32),
                             np.ones(layout.action_dim, np.float32))
  return {
      ENV_CFG: dict(env_cfg),
      'action_space': action_space,
      'observation_space': box_space(np.zeros(shape, dtype), np.full(shape, 255, dtype)),
      'color_space': color_space(layout.color_space),
  }


def write_frames(out_file_path: errors.PathLike, meta_dict: Mapping[str, Any],
                 frame_dicts: Iterable[Mapping[str, Any]]) -> int:
  """Writes a shard as il-representations' write_frames does; returns the number of frames.

  The file appears under its name only once complete (written beside it, then renamed).
  """
  threads = min(os.cpu_count() or 1, 10)
  params = zstandard.ZstdCompressionParameters.from_level(19, enable_ldm=True, threads=threads,
                                                          window_log=26, write_checksum=True)
  count = 0
  with files.atomic_output(out_file_path) as partial:
    with open(partial, 'wb') as raw, \
        zstandard.ZstdCompressor(compression_params=params).stream_writer(raw) as compressed, \
        tarfile.open(fileobj=compressed, mode='w|') as tar:
      _add(tar, '_metadata.meta.pickle', dumps_metadata(meta_dict))
      for index, frame_dict in enumerate(frame_dicts):
        members = {'frame': index, **frame_dict}
        for key in sorted(members):
          _add(tar, f'frame_{index:03d}.{key}.pickle', dumps(members[key]))
        tar.members.clear()  # A TarFile lists every member it wrote: memory would grow per frame.
        count = index + 1
      if not count:  # il-representations' reader needs a frame after the metadata.
        raise errors.EmptyInputError('no transition to write (episodes of one step)',
                                     path=out_file_path)
  return count


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
  """One member as webdataset's TarWriter adds it."""
  info = tarfile.TarInfo(name)
  info.size = len(data)
  info.mtime = time.time()
  info.mode = 0o444
  info.uname = info.gname = 'bigdata'
  tar.addfile(info, io.BytesIO(data))


def frames(episodes: Iterable[Mapping[str, Any]], *, mark_truncations: bool = True,
           truncate_by_jump: bool = False, reward_dtype: np.dtype = np.dtype(np.float64)
           ) -> Iterator[dict[str, Any]]:
  """RLDS numpy episodes -> il-representations frame dicts, one episode in memory at a time.

  `mark_truncations`: write `infos` on every frame, with `TimeLimit.truncated` at truncations
  (needed unless the benchmark's declared semantics already make every done a truncation).
  `truncate_by_jump`: end a truncated episode without a done (the reader splits where the next
  observation jumps); then no `infos` are written for truncations.
  """
  pending = None
  for episode in episodes:
    if pending is not None:
      yield from _episode_frames(pending, mark_truncations, truncate_by_jump, reward_dtype,
                                 next_first=nested.row(episode[fields.STEPS][fields.OBSERVATION], 0))
    pending = episode
  if pending is not None:
    yield from _episode_frames(pending, mark_truncations, truncate_by_jump, reward_dtype,
                               next_first=None)


def _episode_frames(episode: Mapping[str, Any], mark_truncations: bool, truncate_by_jump: bool,
                    reward_dtype: np.dtype, next_first: Optional[Any]) -> Iterator[dict[str, Any]]:
  """One frame per transition. Where the final observation was not kept (the last step's
  observation is a copy), next_obs at the done is the next episode's first frame, as in the
  authors' procgen shards (the copy itself for the dataset's last episode)."""
  steps = episode[fields.STEPS]
  obs = steps[fields.OBSERVATION]
  num = len(steps[fields.IS_FIRST]) - 1
  if num < 1:
    return
  copied = fields.OBSERVATION_IS_COPY in steps and bool(steps[fields.OBSERVATION_IS_COPY][-1])
  truncated = not bool(steps[fields.IS_TERMINAL][-1])
  if truncated and truncate_by_jump and next_first is not None and np.array_equal(
      next_first, obs[num]):
    raise errors.SchemaError(
        'a truncated episode whose final observation equals the next episode\'s first cannot be '
        'told apart from one episode in this benchmark\'s shards (no done marks a truncation)',
        field=fields.OBSERVATION)
  done_at_end = not (truncated and truncate_by_jump)
  mark_truncations = mark_truncations and not truncate_by_jump
  with_rewards = bool(episode.get(HAS_REWARDS, True))
  internal_state = steps.get(reader.INTERNAL_STATE)
  for t in range(num):
    last = t == num - 1
    next_obs = next_first if last and copied and next_first is not None else obs[t + 1]
    frame = {'obs': obs[t], 'next_obs': next_obs, 'acts': steps[fields.ACTION][t],
             'dones': np.bool_(last and done_at_end)}
    if with_rewards:
      frame['rews'] = np.asarray(steps[fields.REWARD][t]).astype(reward_dtype)[()]
    if internal_state is not None or mark_truncations:
      info: dict[str, Any] = {}
      if internal_state is not None:
        info = {reader.INTERNAL_STATE: np.asarray(internal_state[t], np.float64),
                reader.INFO_DISCOUNT: float(steps[fields.DISCOUNT][t])}
      if mark_truncations and last and truncated:
        info[reader.TRUNCATED_INFO] = True
      frame['infos'] = info
    yield frame


def env_cfg_of(episode: Mapping[str, Any], env_cfg: Optional[Mapping[str, Any]] = None
               ) -> dict[str, Any]:
  """The env_cfg to write: the one given, else the episode's `env_cfg` metadata (JSON)."""
  if env_cfg is None:
    text = episode.get(ENV_CFG)
    if text is None:
      raise errors.SchemaError('the dataset has no env_cfg metadata; pass env_cfg with '
                               'benchmark_name and task_name', field=ENV_CFG)
    env_cfg = json.loads(text.decode() if isinstance(text, bytes) else text)
  return dict(env_cfg)


def export(episodes: Iterable[Mapping[str, Any]], out: errors.PathLike, *,
           env_cfg: Optional[Mapping[str, Any]] = None) -> int:
  """Writes numpy RLDS episodes as one il-representations shard at `out`; returns the frame count.

  `env_cfg` (benchmark_name, task_name, preprocessing keys) defaults to the episodes' own
  `env_cfg` metadata (datasets built by `ilr_shards` carry it).
  """
  iterator = iter(episodes)
  try:
    first = next(iterator)
  except StopIteration:
    raise errors.EmptyInputError('no episodes to export', path=out) from None
  cfg = env_cfg_of(first, env_cfg)
  semantics = reader.semantics_of(cfg)
  every_done_truncates = semantics.policy.ending_rule is EndingRule.ALWAYS_TRUNCATED

  layout = tasks.layout(cfg.get('benchmark_name'), cfg.get('task_name'))

  def all_episodes():
    for index, episode in enumerate(itertools.chain([first], iterator)):
      shape = tuple(np.shape(episode[fields.STEPS][fields.OBSERVATION])[1:])
      if layout is not None and shape != layout.observation_shape:
        raise errors.SchemaError(
            f'episode {index}: observations of shape {shape}; {layout.benchmark}/{layout.task} '
            f'shards hold {layout.observation_shape} (channels-first frame stacks)',
            path=out, field=fields.OBSERVATION)
      yield episode

  return write_frames(out, meta_dict(cfg), frames(
      all_episodes(), mark_truncations=not every_done_truncates,
      truncate_by_jump=semantics.split_where_observations_jump,
      reward_dtype=layout.reward_dtype if layout is not None else np.dtype(np.float64)))
