"""EnvLogger Riegeli logs -> an RLDS dataset in TFDS format.

Log directories are found with TFDS's `tfds.rlds.rlds_base.get_log_paths` (any directory holding
metadata.riegeli). Episodes are read with `envlogger.Reader` and written through `RLDSWriter`, so
they get the same features, RLDS alignment and boundary rules as live recordings
(`rlds_suite.core.episodes`), rather than `tfds.rlds.envlogger_reader`'s own. Works on numpy 2 through
`rlds_suite.compat.envlogger_compat`.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional

from rlds_suite.core import errors
from rlds_suite.compat import envlogger_compat
from rlds_suite.recording.backend import RLDSWriter


def log_directories(root: str | os.PathLike) -> list[str]:
  """Every EnvLogger log directory at or below `root`, sorted."""
  from tensorflow_datasets.rlds import rlds_base  # pylint: disable=g-import-not-at-top
  root = os.fspath(root)
  if not os.path.isdir(root):
    raise errors.EmptyInputError('not a directory', path=root)
  paths = sorted(rlds_base.get_log_paths(root))
  if not paths:
    raise errors.EmptyInputError('no EnvLogger log (metadata.riegeli) below this directory',
                                 path=root)
  return paths


def convert(source: str | os.PathLike, data_dir: str | os.PathLike, *,
            name: str = 'envlogger_rollouts', image_fields: Iterable[str] = (),
            step_features: Optional[Mapping[str, Any]] = None,
            episode_metadata_features: Optional[Mapping[str, Any]] = None,
            **writer_kwargs: Any) -> RLDSWriter:
  """Converts every episode of every EnvLogger log below `source` into the dataset `data_dir`.

  Returns the closed writer (`num_episodes_written`). Appends when `data_dir` already holds the
  same dataset.
  """
  envlogger_compat.patch_envlogger_codec()
  import envlogger  # pylint: disable=g-import-not-at-top
  writer: Optional[RLDSWriter] = None
  for log_dir in log_directories(source):
    with errors.located(log_dir), envlogger.Reader(log_dir) as reader:
      if writer is None:
        writer = RLDSWriter(
            data_dir, name=name, observation_spec=reader.observation_spec(),
            action_spec=reader.action_spec(), reward_spec=reader.reward_spec(),
            image_fields=image_fields, step_features=step_features,
            episode_metadata_features=episode_metadata_features, **writer_kwargs)
      episode_metadata = list(reader.episode_metadata())
      for index, episode in enumerate(reader.episodes):
        for step_index, step in enumerate(episode):
          writer.record_step(step, is_new_episode=step_index == 0)
        if index < len(episode_metadata) and episode_metadata[index] is not None:
          writer.set_episode_metadata(episode_metadata[index])
  writer.close()
  return writer
