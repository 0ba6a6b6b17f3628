"""RLDS datasets -> other stacks' native formats, one module per target format.

`export(source, to, out)` streams a dataset (a registered TFDS name or a dataset directory)
episode by episode into `out`, so memory holds one episode whatever the dataset's size:
  * `npz`: flat transition arrays in D4RL's layout (terminals and timeouts apart, next_observations);
  * `d4rl`: the same as an HDF5 file, as D4RL's get_dataset returns it;
  * `il_representations_dict`: il-representations' in-memory dict (obs, next_obs, acts, dones,
    rews) as an .npz;
  * `il_representations`: an il-representations processed shard (`demos.tar.zst`).
A failed export leaves nothing at `out`.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Optional

from rlds_suite.core import errors
from rlds_suite.core import progress

# Target format -> module of rlds_suite.exports whose `export(episodes, out, **options)` writes it.
FORMATS = {
    'npz': 'npz',
    'd4rl': 'd4rl',
    'il_representations_dict': 'il_representations_dict',
    'il_representations': 'il_representations',
}

# Target format -> the file name endings it may be written under (a D4RL HDF5 file named .npz,
# say, would be opened by np.load and fail far from the cause).
SUFFIXES = {
    'npz': ('.npz',),
    'd4rl': ('.hdf5', '.h5'),
    'il_representations_dict': ('.npz',),
    'il_representations': ('.tar.zst',),
}


def check_output_name(to: str, out: errors.PathLike) -> None:
  """Refuses an output name whose ending does not fit the format `to` writes."""
  name = os.fspath(out)
  if not name.endswith(SUFFIXES[to]):
    raise errors.SchemaError(f'--to {to} writes {" or ".join(SUFFIXES[to])} files; name the output '
                             f'so (e.g. {os.path.splitext(os.path.basename(name))[0]}'
                             f'{SUFFIXES[to][0]})', path=name)


def export(source: Any, to: str, out: errors.PathLike, *, split: Optional[str] = None,
           data_dir: Optional[str] = None, **options: Any) -> Any:
  """Writes the episodes of `source` (TFDS name, dataset directory or builder) as format `to`."""
  if to not in FORMATS:
    raise errors.SchemaError(f'unknown export format {to!r}; known: {sorted(FORMATS)}',
                             field='to')
  check_output_name(to, out)
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  module = importlib.import_module(f'rlds_suite.exports.{FORMATS[to]}')
  builder = datasets.load_builder(source, data_dir)
  # read_episodes names a missing or corrupt shard (one typed line); TF's errors name none.
  episodes = progress.episodes(datasets.read_episodes(builder, split=split),
                               progress.split_total(builder.info.splits, split), f'export {to}')
  return module.export(episodes, out, **options)
