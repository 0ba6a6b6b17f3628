"""il-representations (EIRLI) demo shards: zstd-compressed webdataset tars.

The first member is `_metadata.meta.pickle` ({env_cfg, observation_space, action_space,
color_space}); then one group of members per transition, `frame_NNN.{obs,next_obs,acts,dones,frame}
.pickle` plus optional `rews` and `infos`. Trajectories are delimited only by `dones`, which
il-representations sets on each trajectory's last transition whatever ended it; rows after the last
done are the unfinished tail of a recording (truncated).

Declared per benchmark (`SEMANTICS`), since `dones` cannot tell:
  * termination vs truncation: dm_control suite tasks only end by their time limit (truncation);
    Atari episodes that reach a done ended with the game (termination);
  * undelimited boundaries: the authors' Pong shard holds two recordings back to back with no done
    between them; there `next_obs[t]` differs from `obs[t+1]` (a reset), which can only happen at a
    boundary because Atari frame stacks are consistent within an episode. For Atari such a jump
    ends a (truncated) episode. Not for dm_control: its shards' `next_obs` pad the frame stack
    with zeros where `obs` repeats the first frame, so the first steps of every episode differ.
    RLDS keeps `obs[t+1]`, the observation the agent saw.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import tarfile
from typing import Any

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


def read_trajectories(path: errors.PathLike) -> list[Trajectory]:
  """The shard's trajectories under its benchmark's declared semantics."""
  metadata, columns = read_shard(path)
  with errors.located(path):
    env_cfg = dict(metadata.get('env_cfg', {}))
    benchmark = env_cfg.get('benchmark_name')
    if benchmark not in SEMANTICS:
      raise errors.SchemaError(f'no boundary semantics declared for benchmark {benchmark!r} '
                               f'(known: {sorted(SEMANTICS)})', field='env_cfg')
    semantics = SEMANTICS[benchmark]
    dones = np.asarray(columns['dones'], dtype=bool)
    ends = dones.copy()
    if semantics.split_where_observations_jump:
      ends[:-1] |= observation_jumps(columns['obs'], columns['next_obs'])
    num = len(columns['acts'])
    rewards = columns.get('rews', np.zeros(num, np.float32))
    return [
        semantics.policy.trajectory(
            columns['obs'][rows], columns['acts'][rows], rewards[rows],
            terminal_flag=bool(dones[rows.stop - 1]),
            next_observations=columns['next_obs'][rows],
            metadata={'task_name': str(env_cfg.get('task_name', ''))})
        for rows in episodes.split_rows(ends)
    ]


def observation_jumps(obs: np.ndarray, next_obs: np.ndarray) -> np.ndarray:
  """For t < N-1: whether next_obs[t] differs from obs[t+1]."""
  rows = len(obs) - 1
  return np.any(next_obs[:-1].reshape(rows, -1) != obs[1:].reshape(rows, -1), axis=1)
