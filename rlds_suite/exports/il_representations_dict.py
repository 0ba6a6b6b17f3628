"""RLDS episodes -> il-representations' in-memory dataset dict, saved as an .npz.

Keys `obs`, `next_obs`, `acts`, `dones`, `rews`, as il-representations' `load_dict_dataset` returns
them (`rlds_suite.core.episodes.to_il_representations_dict`): one row per transition, `dones` True
on each episode's last transition whatever ended it; dict observations become `obs_<key>` and
`next_obs_<key>` (il-representations' MAGICAL loader's `obs_ego`). `dict(np.load(OUT))` is the dict.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from rlds_suite.core import episodes as episodes_lib
from rlds_suite.core import errors
from rlds_suite.core import nested
from rlds_suite.exports import files


def export(episodes: Iterable[Mapping[str, Any]], out: errors.PathLike) -> dict[str, tuple]:
  """Writes the dict of the episodes' transitions to `out`; returns each array's shape."""
  with files.ColumnSpool(os.path.dirname(os.path.abspath(out)) or '.') as spool:
    for episode in episodes:
      try:
        rows = episodes_lib.to_il_representations_dict([episode])
      except errors.EmptyInputError:
        continue  # An episode of one step has no transition.
      # Dict observations: obs_<key>, as il-representations' MAGICAL loader names them.
      spool.append({path.replace('/', '_'): value
                    for path, value in nested.flatten_paths(rows).items()})
    return spool.write_npz(out)
