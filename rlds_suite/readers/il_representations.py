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
  * `infos` of dm_control shards carry the physics state (`internal_state`) and the environment's
    discount; they become the step field `internal_state` and the step discount.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import tarfile
from typing import Any, Mapping, Optional

import numpy as np
import zstandard

from rlds_suite.core import errors
from rlds_suite.core import nested
from rlds_suite.core import safe_pickle
from rlds_suite.core.episodes import BoundaryPolicy, EndingRule, FinalObservation, Trajectory
from rlds_suite.core import episodes

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
    'procgen': ShardSemantics(
        BoundaryPolicy(FinalObservation.NOT_STORED, ending_rule=EndingRule.TIME_LIMIT,
                       time_limit=PROCGEN_TIME_LIMIT),
        split_where_observations_jump=False),
}


def read_shard(path: errors.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
  """(metadata, columns): columns stack each key over the shard's transitions, in frame order."""
  try:
    with open(path, 'rb') as f:
      data = zstandard.ZstdDecompressor().stream_reader(f).read()
    archive = tarfile.open(fileobj=io.BytesIO(data))
    members = {m.name: m for m in archive.getmembers() if m.isfile()}
    load = lambda name: safe_pickle.loads(archive.extractfile(members[name]).read(),
                                          source=os.fspath(path))
    if METADATA_MEMBER not in members:
      raise errors.SchemaError(f'no {METADATA_MEMBER} member', path=path)
    metadata = load(METADATA_MEMBER)
    rows: dict[int, dict[str, Any]] = {}
    for name in members:
      match = _MEMBER.match(name)
      if match:
        rows.setdefault(int(match.group(1)), {})[match.group(2)] = load(name)
  except (zstandard.ZstdError, tarfile.TarError, EOFError) as e:
    raise errors.CorruptFileError(f'damaged or truncated zstd tar shard: {e}', path=path) from e
  if not rows:
    raise errors.EmptyInputError('shard holds no transitions', path=path)
  with errors.located(path):
    ordered = [rows[index] for index in sorted(rows)]
    for key in REQUIRED_KEYS:
      missing = [i for i, row in enumerate(ordered) if key not in row]
      if missing:
        raise errors.SchemaError(f'transitions {missing[:5]} have no {key!r}', field=key)
    keys = [k for k in REQUIRED_KEYS + OPTIONAL_KEYS if all(k in row for row in ordered)]
    columns = {key: [row[key] for row in ordered] for key in keys}
    return metadata, {key: (values if key == 'infos' else nested.stack_rows(values))
                      for key, values in columns.items()}


@dataclasses.dataclass(frozen=True)
class Shard:
  """A shard read under its benchmark's semantics."""
  metadata: dict[str, Any]  # {env_cfg, observation_space, action_space, color_space}.
  trajectories: list[Trajectory]
  has_rewards: bool  # Whether the shard recorded `rews` (the authors' Atari shards have none).


def read_trajectories(path: errors.PathLike) -> list[Trajectory]:
  """The shard's trajectories under its benchmark's declared semantics."""
  return read(path).trajectories


def read(path: errors.PathLike) -> Shard:
  """The shard's metadata and trajectories under its benchmark's declared semantics."""
  metadata, columns = read_shard(path)
  with errors.located(path):
    env_cfg = dict(metadata.get('env_cfg', {}))
    semantics = semantics_of(env_cfg)
    dones = np.asarray(columns['dones'], dtype=bool)
    infos = columns.get('infos')
    truncated = np.array([bool(_info(i).get(TRUNCATED_INFO, False)) for i in infos] if infos
                         else np.zeros(len(dones), bool))
    ends = dones.copy()
    if semantics.split_where_observations_jump:
      ends[:-1] |= observation_jumps(columns['obs'], columns['next_obs'])
    num = len(columns['acts'])
    rewards = np.asarray(columns.get('rews', np.zeros(num)), dtype=np.float64)
    step_metadata, discounts = _info_columns(infos, num)
    trajectories = []
    for rows in episodes.split_rows(ends):
      last = rows.stop - 1
      trajectory = semantics.policy.trajectory(
          columns['obs'][rows], columns['acts'][rows], rewards[rows],
          terminal_flag=bool(dones[last] and not truncated[last]),
          next_observations=columns['next_obs'][rows],
          step_metadata=nested.take_rows(step_metadata, rows),
          metadata={'task_name': str(env_cfg.get('task_name', ''))})
      if discounts is not None:
        trajectory = dataclasses.replace(trajectory, discounts=discounts[rows])
      trajectories.append(trajectory)
    return Shard(metadata=dict(metadata), trajectories=trajectories,
                 has_rewards='rews' in columns)


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
