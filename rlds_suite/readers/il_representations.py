"""il-representations (EIRLI) demo shards: zstd-compressed webdataset tars.

The first member is `_metadata.meta.pickle` ({env_cfg, observation_space, action_space,
color_space}); then one group of members per transition, `frame_NNN.{obs,next_obs,acts,dones,frame}
.pickle` plus optional `rews` and `infos`. Trajectories are delimited only by `dones`, which
il-representations sets on each trajectory's last transition whatever ended it; rows after the last
done are the unfinished tail of a recording (truncated).

Declared per benchmark (`SEMANTICS`), since `dones` cannot tell:
  * termination vs truncation: dm_control suite tasks only end by their time limit (truncation);
    Atari episodes that reach a done ended with the game (termination); procgen does not say why
    an episode ended, so episodes that reach its 1000-step limit are truncations, others
    terminations. A done whose `infos` say `TimeLimit.truncated` (gym's convention, which our
    exports write) is a truncation whatever the benchmark.
  * undelimited boundaries: the authors' Pong shard holds two recordings back to back with no done
    between them; there `next_obs[t]` differs from `obs[t+1]` (a reset), which can only happen at a
    boundary because Atari frame stacks are consistent within an episode. For Atari such a jump
    ends a (truncated) episode. Not for dm_control: its shards' `next_obs` pad the frame stack
    with zeros where `obs` repeats the first frame, so the first steps of every episode differ.
    RLDS keeps `obs[t+1]`, the observation the agent saw.
  * procgen shards come from one concatenated stream of frames (il-representations' procgen
    loader): `next_obs` at a done is the next episode's first frame, and the frame stacks of an
    episode's first steps hold frames of the episode before. The final observation of a procgen
    episode was therefore never kept (the last step is the last real step), and observations are
    kept as recorded, stacks included.
  * MAGICAL shards (il-representations' magical_envs.load_data) hold each demo's observations
    with next_obs = the following observation and a done on its last transition, so the final
    observation is kept; MAGICAL ends an episode only when its step budget runs out (no absorbing
    state), so every demo ends by truncation, as `magical_demos` builds the same demos.
  * `infos` of dm_control shards carry the physics state (`internal_state`) and the environment's
    discount; they become the step field `internal_state` and the step discount.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import tarfile
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import nested
from rlds_suite.core import safe_pickle
from rlds_suite.core.episodes import BoundaryPolicy, EndingRule, FinalObservation, Trajectory
from rlds_suite.readers import files
from rlds_suite.readers import il_representations_tasks as tasks

METADATA_MEMBER = '_metadata.meta.pickle'
REQUIRED_KEYS = ('obs', 'next_obs', 'acts', 'dones')
OPTIONAL_KEYS = ('rews', 'infos', 'frame')
_MEMBER = re.compile(r'^frame_(\d+)\.([a-z_]+)\.pickle$')
# Keys of `infos` that carry data (the rest is dropped): the physics state becomes this step field.
INTERNAL_STATE = 'internal_state'
INFO_DISCOUNT = 'discount'
# gym's TimeLimit wrapper marks a done that was a time limit; exports write it at truncations.
TRUNCATED_INFO = 'TimeLimit.truncated'
PROCGEN_TIME_LIMIT = 1000  # procgen's timeout_steps, the same for every game.


@dataclasses.dataclass(frozen=True)
class ShardSemantics:
  policy: BoundaryPolicy
  split_where_observations_jump: bool  # next_obs[t] != obs[t+1] marks an episode boundary.


SEMANTICS = {
    'dm_control': ShardSemantics(
        BoundaryPolicy(FinalObservation.NEXT_OBSERVATIONS, ending_rule=EndingRule.ALWAYS_TRUNCATED),
        split_where_observations_jump=False),
    'atari': ShardSemantics(BoundaryPolicy(FinalObservation.NEXT_OBSERVATIONS),
                            split_where_observations_jump=True),
    # next_obs at a done is the next episode's first frame: the final observation was not kept.
    'magical': ShardSemantics(
        BoundaryPolicy(FinalObservation.NEXT_OBSERVATIONS, ending_rule=EndingRule.ALWAYS_TRUNCATED),
        split_where_observations_jump=False),
    'procgen': ShardSemantics(
        BoundaryPolicy(FinalObservation.NOT_STORED, ending_rule=EndingRule.TIME_LIMIT,
                       time_limit=PROCGEN_TIME_LIMIT),
        split_where_observations_jump=False),
}


def read_shard(path: errors.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
  """(metadata, columns): columns stack each key over the shard's transitions, in frame order."""
  members = _members(path)
  metadata = _metadata(path, members)
  rows = list(_rows(path, members))
  if not rows:
    raise errors.EmptyInputError('shard holds no transitions', path=path)
  with errors.located(path):
    keys = _keys(rows[0])
    for index, row in enumerate(rows):
      _check_row(row, keys, index)
    columns = {key: [row[key] for row in rows] for key in keys}
    return metadata, {key: (values if key == 'infos' else nested.stack_rows(values))
                      for key, values in columns.items()}


@dataclasses.dataclass(frozen=True)
class Shard:
  """A shard read under its benchmark's semantics; `trajectories` are read as they are iterated
  (one episode in memory) when the shard comes from `open_shard`."""
  metadata: dict[str, Any]  # {env_cfg, observation_space, action_space, color_space}.
  trajectories: Iterable[Trajectory]
  has_rewards: bool  # Whether the shard recorded `rews` (the authors' Atari shards have none).


def read_trajectories(path: errors.PathLike) -> list[Trajectory]:
  """The shard's trajectories under its benchmark's declared semantics."""
  return list(open_shard(path).trajectories)


def read(path: errors.PathLike) -> Shard:
  """The shard's metadata and all its trajectories under its benchmark's declared semantics."""
  shard = open_shard(path)
  return dataclasses.replace(shard, trajectories=list(shard.trajectories))


def open_shard(path: errors.PathLike) -> Shard:
  """The shard's metadata, and its trajectories read one episode at a time from the zstd stream.

  Frames must come in increasing order with their members together, as write_frames writes them
  (and as il-representations' webdataset reader needs them).
  """
  members = _members(path)
  metadata = _metadata(path, members)
  rows = _rows(path, members)
  head = next(rows, None)
  if head is None:
    raise errors.EmptyInputError('shard holds no transitions', path=path)
  with errors.located(path):
    env_cfg = dict(metadata.get('env_cfg', {}))
    semantics = semantics_of(env_cfg)
    keys = _keys(head)
  return Shard(metadata=dict(metadata), has_rewards='rews' in keys,
               trajectories=_trajectories(path, itertools.chain([head], rows), keys, semantics,
                                          env_cfg))


def _members(path: errors.PathLike) -> Iterator[tuple[str, bytes]]:
  """(name, bytes) of the shard's metadata and frame members, in order, streamed from the zstd
  stream within its expansion limit.

  Each member's name, type and declared size are checked before its data is read: names with
  `..` or a leading `/`, links and other non-files are refused (nothing is ever written to disk);
  members with other names (not `_metadata.meta.pickle` or `frame_NNN.KEY.pickle` of a known KEY)
  are passed over without being kept. After the archive's end only tar's zero padding may follow.
  """
  with files.zstd_stream(path) as stream:
    try:
      with tarfile.open(fileobj=stream, mode='r|') as archive:
        for member in archive:
          if _wanted_member(member, path, stream):
            yield member.name, archive.extractfile(member).read()
          archive.members.clear()  # The stream's TarFile would list every member it read.
    except (tarfile.TarError, EOFError, OSError) as e:
      raise errors.CorruptFileError(f'damaged or truncated tar in the zstd shard: {e}',
                                    path=path) from e
    files.read_to_end(stream, after='the tar archive', path=path)


def _wanted_member(member: tarfile.TarInfo, path: errors.PathLike, stream: Any) -> bool:
  """Whether `member` is one to read; refuses unsafe names, links and sizes past the limit."""
  name = member.name
  if name.startswith('/') or '..' in name.split('/'):
    raise errors.SchemaError('unsafe member name (absolute or with ..)', path=path, field=name)
  if member.isdir():
    return False
  if not member.isfile():
    kind = 'a symlink' if member.issym() else 'a hardlink' if member.islnk() else 'not a file'
    raise errors.SchemaError(f'the member is {kind}: shards hold regular files only', path=path,
                             field=name)
  match = _MEMBER.match(name)
  if name != METADATA_MEMBER and not (match and match.group(2) in REQUIRED_KEYS + OPTIONAL_KEYS):
    return False
  left = files.expansion_left(stream)
  if member.size > left:
    raise files.size_limit_error(member.size, left, path=path, field=name,
                                 what='the tar member declares')
  return True


def _metadata(path: errors.PathLike, members: Iterator[tuple[str, bytes]]) -> dict[str, Any]:
  """The first member, which il-representations' reader requires to be the metadata."""
  first = next(members, None)
  if first is None or first[0] != METADATA_MEMBER:
    found = 'nothing' if first is None else repr(first[0])
    raise errors.SchemaError(f'the first member must be {METADATA_MEMBER}, found {found}',
                             path=path)
  return safe_pickle.loads(first[1], source=os.fspath(path))


def _rows(path: errors.PathLike, members: Iterator[tuple[str, bytes]]) -> Iterator[dict[str, Any]]:
  """One dict per frame ({key: unpickled value}), in file order: frames 0, 1, 2... with their
  members together, as write_frames writes them (a missing frame would drop a transition)."""
  current, row = -1, {}
  for name, data in members:
    match = _MEMBER.match(name)
    if not match:
      continue
    index, key = int(match.group(1)), match.group(2)
    if index != current:
      if index != current + 1:
        found = (f'the first frame is {index}' if current < 0 else
                 f'frame {index} comes after frame {current}')
        raise errors.SchemaError(f'{found}: frames must be numbered from 0 without gaps, in '
                                 f'order, with their members together', path=path, field=name)
      if row:
        yield row
      current, row = index, {}
    if key in row:
      raise errors.SchemaError('member stored twice', path=path, field=name)
    row[key] = safe_pickle.loads(data, source=os.fspath(path))
  if row:
    yield row


def _keys(head: Mapping[str, Any]) -> list[str]:
  """The keys every transition must have: the required ones and the optional ones of the first."""
  for key in REQUIRED_KEYS:
    if key not in head:
      raise errors.SchemaError('transition 0 has no such member', field=_member_name(0, key))
  return [k for k in REQUIRED_KEYS + OPTIONAL_KEYS if k in head]


def _check_row(row: Mapping[str, Any], keys: Sequence[str], index: int) -> None:
  """Every frame has the same members: a column present in some frames and not in others (e.g.
  one frame's rews missing) is refused rather than dropped or filled."""
  missing = [k for k in keys if k not in row]
  if missing:
    raise errors.SchemaError(f'frame {index} has no {missing} member (frame 0 has)',
                             field=_member_name(index, missing[0]))
  extra = [k for k in row if k not in keys]
  if extra:
    raise errors.SchemaError(f'frame {index} has a {extra} member, frame 0 has none: a column '
                             f'must be in every frame or in none', field=_member_name(index, extra[0]))


def _member_name(index: int, key: str) -> str:
  return f'frame_{index:03d}.{key}.pickle'


def _trajectories(path: errors.PathLike, rows: Iterable[dict[str, Any]], keys: Sequence[str],
                  semantics: 'ShardSemantics', env_cfg: Mapping[str, Any]) -> Iterator[Trajectory]:
  """Rows -> trajectories, one episode at a time: a row ends an episode at a done, or (benchmarks
  that declare it) where the next row's obs is not its next_obs, or at the end of the shard."""
  episode: list[dict[str, Any]] = []
  pending = None
  with errors.located(path):
    for index, row in enumerate(rows):
      _check_row(row, keys, index)
      if pending is not None:
        episode.append(pending)
        jump = (semantics.split_where_observations_jump and
                not np.array_equal(pending['next_obs'], row['obs']))
        if bool(pending['dones']) or jump:
          yield _trajectory(episode, keys, semantics, env_cfg)
          episode = []
      pending = row
    if pending is not None:
      episode.append(pending)
      yield _trajectory(episode, keys, semantics, env_cfg)


def _trajectory(rows: list[dict[str, Any]], keys: Sequence[str], semantics: 'ShardSemantics',
                env_cfg: Mapping[str, Any]) -> Trajectory:
  columns = {key: nested.stack_rows([row[key] for row in rows]) for key in keys if key != 'infos'}
  infos = [row['infos'] for row in rows] if 'infos' in keys else None
  num = len(rows)
  rewards = np.asarray(columns.get('rews', np.zeros(num)), dtype=np.float64)
  step_metadata, discounts = _info_columns(infos, num)
  truncated = bool(infos and _info(infos[-1]).get(TRUNCATED_INFO, False))
  trajectory = semantics.policy.trajectory(
      columns['obs'], columns['acts'], rewards,
      terminal_flag=bool(columns['dones'][-1]) and not truncated,
      next_observations=columns['next_obs'], step_metadata=step_metadata,
      metadata={'task_name': str(env_cfg.get('task_name', ''))})
  if discounts is not None:
    trajectory = dataclasses.replace(trajectory, discounts=discounts)
  return trajectory


def layout_of(path: errors.PathLike) -> tasks.TaskLayout:
  """The TaskLayout a shard's own metadata and first frame describe, for tasks not declared in
  il_representations_tasks: observation shape, action space, colour space, preprocessing keys."""
  shard = open_shard(path)
  with errors.located(path):
    env_cfg = dict(shard.metadata.get('env_cfg', {}))
    benchmark, task = env_cfg.get('benchmark_name'), env_cfg.get('task_name')
    observation_space = shard.metadata.get('observation_space')
    action_space = shard.metadata.get('action_space')
    for name, space in (('observation_space', observation_space), ('action_space', action_space)):
      if not isinstance(space, safe_pickle.SpaceStandIn):
        raise errors.SchemaError(f'expected a gym space, got {type(space).__name__}', field=name)
    if action_space.kind == 'Discrete':
      actions = {'num_actions': int(action_space.state['n'])}
    elif action_space.kind == 'Box' and len(action_space.state.get('shape') or ()) == 1:
      actions = {'action_dim': int(action_space.state['shape'][0])}
    else:
      raise errors.SchemaError(f'unsupported action space {action_space!r}', field='action_space')
    first = next(iter(shard.trajectories))
    return tasks.TaskLayout(
        benchmark=str(benchmark), task=str(task),
        observation_shape=tuple(int(d) for d in observation_space.state['shape']),
        color_space=str(shard.metadata.get('color_space', 'RGB')),
        preprocessing={k: v for k, v in env_cfg.items()
                       if k in tasks.PREPROCESSING_KEYS.get(str(benchmark), ())},
        has_internal_state=INTERNAL_STATE in first.step_metadata, **actions)


def semantics_of(env_cfg: Mapping[str, Any]) -> ShardSemantics:
  benchmark = env_cfg.get('benchmark_name')
  if benchmark not in SEMANTICS:
    raise errors.SchemaError(f'no boundary semantics declared for benchmark {benchmark!r} '
                             f'(known: {sorted(SEMANTICS)})', field='env_cfg')
  return SEMANTICS[benchmark]


def _info(info: Any) -> Mapping[str, Any]:
  return info if isinstance(info, Mapping) else {}


def _info_columns(infos: Optional[list], num: int) -> tuple[dict[str, np.ndarray], Optional[np.ndarray]]:
  """(step metadata, discounts) from per-transition infos: the physics state and env discount."""
  if not infos:
    return {}, None
  infos = [_info(i) for i in infos]
  step_metadata = {}
  if all(INTERNAL_STATE in i for i in infos):
    step_metadata[INTERNAL_STATE] = np.stack(
        [np.asarray(i[INTERNAL_STATE], dtype=np.float64) for i in infos])
  discounts = None
  if all(INFO_DISCOUNT in i for i in infos):
    discounts = np.array([i[INFO_DISCOUNT] for i in infos], dtype=np.float32)
  return step_metadata, discounts


def observation_jumps(obs: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
  """For t < N-1: whether next_obs[t] differs from obs[t+1]."""
  rows = len(obs) - 1
  return np.any(next_obs[:-1].reshape(rows, -1) != obs[1:].reshape(rows, -1), axis=1)
