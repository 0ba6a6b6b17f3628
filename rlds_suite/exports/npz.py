"""RLDS episodes -> one .npz of flat D4RL-layout transition arrays and shared `metadata/*`
(see rlds_suite.exports.flat)."""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from rlds_suite.core import errors
from rlds_suite.exports import files
from rlds_suite.exports import flat


def export(episodes: Iterable[Mapping[str, Any]], out: errors.PathLike) -> dict[str, tuple]:
  """Writes the episodes' transitions to `out` (np.load reads it); returns each array's shape."""
  metadata = flat.FileMetadata()
  with files.ColumnSpool(os.path.dirname(os.path.abspath(out)) or '.') as spool:
    for episode in episodes:
      metadata.add(episode)
      spool.append(flat.d4rl_rows(episode))
    return spool.write_npz(out, constants=metadata.columns())
