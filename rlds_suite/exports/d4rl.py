"""RLDS episodes -> an HDF5 file in D4RL's layout (see rlds_suite.exports.flat for the columns).

`observations`, `actions`, `rewards`, `terminals`, `timeouts`, `next_observations` and `infos/*`,
one row per transition, as D4RL's `get_dataset` returns them: `terminals` marks transitions into an
absorbing state and `timeouts` the last transition of a truncated episode, so D4RL's
`qlearning_dataset` and episode splitting (`terminals | timeouts`) work unchanged, and so do TFDS's
D4RL reader (`d4rl.dataset_utils.generate_examples`) and d3rlpy. Episode fields shared by every
episode are written as `metadata/*` (flat.FileMetadata). Datasets grow episode by episode
(chunked, gzip), so memory holds one episode.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import h5py
import numpy as np

from rlds_suite.core import errors
from rlds_suite.exports import files
from rlds_suite.exports import flat


def export(episodes: Iterable[Mapping[str, Any]], out: errors.PathLike) -> dict[str, tuple]:
  """Writes the episodes' transitions to the HDF5 file `out`; returns each dataset's shape."""
  metadata = flat.FileMetadata()
  with files.atomic_output(out) as partial:
    with h5py.File(partial, 'w') as h5:
      for episode in episodes:
        metadata.add(episode)
        for name, values in flat.d4rl_rows(episode).items():
          _append(h5, name, values)
      if flat.OBSERVATIONS not in h5:
        raise errors.EmptyInputError('no episode has a transition to export', path=out)
      for name, value in metadata.columns().items():
        h5.create_dataset(name, data=value)
      shapes = {name: h5[name].shape for name in _dataset_names(h5)}
  return shapes


def _append(h5: h5py.File, name: str, values: np.ndarray) -> None:
  if name not in h5:
    h5.create_dataset(name, data=values, maxshape=(None,) + values.shape[1:], chunks=True,
                      compression='gzip')
    return
  dataset = h5[name]
  if dataset.dtype != values.dtype or dataset.shape[1:] != values.shape[1:]:
    raise errors.SchemaError(f'rows of {dataset.dtype} {dataset.shape[1:]} expected, got '
                             f'{values.dtype} {values.shape[1:]}', field=name)
  start = dataset.shape[0]
  dataset.resize(start + len(values), axis=0)
  dataset[start:] = values


def _dataset_names(h5: h5py.File) -> list[str]:
  names = []
  h5.visititems(lambda name, node: names.append(name) if isinstance(node, h5py.Dataset) else None)
  return names
