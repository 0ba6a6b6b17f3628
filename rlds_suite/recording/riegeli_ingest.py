"""EnvLogger Riegeli logs -> an RLDS dataset in TFDS format.

Log directories are found with TFDS's `tfds.rlds.rlds_base.get_log_paths` (any directory holding
metadata.riegeli). Episodes are read with `envlogger.Reader` and written through `RLDSWriter`, so
they get the same features, RLDS alignment and boundary rules as live recordings
(`rlds_suite.core.episodes`), rather than `tfds.rlds.envlogger_reader`'s own. Works on numpy 2 through
`rlds_suite.compat.envlogger_compat`.

All or nothing: every log's specs are checked against the first log's before anything is written,
and the episodes are converted into a temporary directory beside the target, which then becomes
the dataset (or, when the target already holds it, is appended to it shard by shard). A failed
conversion leaves the target as it was.

Episodes of only a reset (EnvLogger logs one when `reset()` is called twice without a `step()`)
are kept, as TFDS's own EnvLogger reader keeps them: one step, first and last, truncated, with the
episode's metadata (`Conversion.reset_only`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from typing import Any, Iterable, Mapping, Optional

from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.compat import envlogger_compat
from rlds_suite.recording.backend import RLDSWriter

_SPECS = ('observation_spec', 'action_spec', 'reward_spec', 'discount_spec')


@dataclasses.dataclass(frozen=True)
class Conversion:
  """What `convert` wrote: episodes (`reset_only` of them a reset and no action), the logs read."""
  data_dir: str
  num_episodes_written: int
  reset_only: int
  log_directories: tuple[str, ...]


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


def check_specs(log_dirs: Iterable[str]) -> None:
  """Raises SpecMismatchError naming the first log whose specs differ from the first log's."""
  import envlogger  # pylint: disable=g-import-not-at-top
  first: Optional[tuple[str, dict[str, str]]] = None
  for log_dir in log_dirs:
    with errors.located(log_dir), envlogger.Reader(log_dir) as reader:
      specs = {name: repr(getattr(reader, name)()) for name in _SPECS}
    if first is None:
      first = (log_dir, specs)
      continue
    differing = [name for name in _SPECS if specs[name] != first[1][name]]
    if differing:
      name = differing[0]
      raise errors.SpecMismatchError(
          f'{name} differs from that of the first log {first[0]}: {specs[name]} vs '
          f'{first[1][name]}', path=log_dir, field=name)


def convert(source: str | os.PathLike, data_dir: str | os.PathLike, *,
            name: str = 'envlogger_rollouts', image_fields: Iterable[str] = (),
            step_features: Optional[Mapping[str, Any]] = None,
            episode_metadata_features: Optional[Mapping[str, Any]] = None,
            **writer_kwargs: Any) -> Conversion:
  """Converts every episode of every EnvLogger log below `source` into the dataset `data_dir`.

  Appends when `data_dir` already holds the same dataset. All or nothing (see the module
  docstring): on any error `data_dir` is left as it was.
  """
  envlogger_compat.patch_envlogger_codec()
  logs = log_directories(source)
  check_specs(logs)
  target = os.path.abspath(os.fspath(data_dir))
  parent = os.path.dirname(target)
  os.makedirs(parent, exist_ok=True)
  staging = tempfile.mkdtemp(prefix=f'.{os.path.basename(target)}.converting-', dir=parent)
  try:
    written, reset_only = _convert_logs(logs, staging, name=name, image_fields=image_fields,
                                     step_features=step_features,
                                     episode_metadata_features=episode_metadata_features,
                                     **writer_kwargs)
    if written and os.path.isdir(target) and os.listdir(target):
      _append_shards(staging, target)  # Refused (SpecMismatchError) unless the same dataset.
    elif written:
      if os.path.isdir(target):
        os.rmdir(target)
      os.rename(staging, target)
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  return Conversion(os.fspath(data_dir), written, reset_only, tuple(logs))


def _convert_logs(logs: list[str], directory: str, **writer_args: Any) -> tuple[int, int]:
  """Writes every episode of `logs` into a new dataset `directory`: (written, reset-only)."""
  import envlogger  # pylint: disable=g-import-not-at-top
  writer: Optional[RLDSWriter] = None
  reset_only = 0
  try:
    with progress.Bar(expected_totals(logs), 'convert') as bar:
      for log_dir in logs:
        with errors.located(log_dir), envlogger.Reader(log_dir) as reader:
          if writer is None:
            writer = RLDSWriter(directory, observation_spec=reader.observation_spec(),
                                action_spec=reader.action_spec(), reward_spec=reader.reward_spec(),
                                keep_reset_only_episodes=True, **writer_args)
          episode_metadata = list(reader.episode_metadata())
          for index, episode in enumerate(reader.episodes):
            steps = _read_steps(episode, log_dir, index)
            reset_only += len(steps) == 1
            for step_index, step in enumerate(steps):
              writer.record_step(step, is_new_episode=step_index == 0)
            if index < len(episode_metadata) and episode_metadata[index] is not None:
              writer.set_episode_metadata(episode_metadata[index])
            bar.add(1, len(steps))
  finally:
    if writer is not None:
      writer.close()
  return (writer.num_episodes_written if writer else 0), reset_only


def expected_totals(logs: Iterable[str]) -> progress.Totals:
  """The episodes and steps of `logs` from their Riegeli indexes (for the progress bar); unknown
  where a log's index cannot be read (its conversion names the problem)."""
  import envlogger  # pylint: disable=g-import-not-at-top
  totals = progress.Totals(0, 0)
  try:
    for log_dir in logs:
      with envlogger.Reader(log_dir) as reader:
        totals += progress.Totals(len(reader.episodes), len(reader.steps))
  except (OSError, RuntimeError, ValueError, TypeError):
    return progress.UNKNOWN
  return totals


def _read_steps(episode: Any, log_dir: str, index: int) -> list[Any]:
  """An episode's steps; a truncated or damaged log is a CorruptFileError naming it (envlogger's
  reader fails with 'TypeError: expected bytes, NoneType found' or a Riegeli RuntimeError)."""
  steps = []
  try:
    for step in episode:
      steps.append(step)
  except (TypeError, RuntimeError, ValueError) as e:
    raise errors.CorruptFileError(
        f'corrupt or truncated Riegeli log: step {len(steps)} of episode {index} does not read '
        f'back ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else e!r})',
        path=log_dir) from None
  return steps


def _append_shards(staging: str, target: str) -> None:
  """Appends the staged dataset's episodes to the dataset `target`, one shard per staged shard
  (features must match, else SpecMismatchError before anything is written)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from rlds_suite.recording import shards  # pylint: disable=g-import-not-at-top
  info = tfds.builder_from_directory(staging).info
  for split in info.splits.values():
    appended = shards.ShardedDatasetWriter(target, name=info.name, features=info.features,
                                           version=str(info.version), split=split.name,
                                           description=info.description)
    for path in split.filepaths:
      for record in tf.data.TFRecordDataset(os.fspath(path)):
        appended.write(record.numpy())
      appended.finish_shard()
    appended.close()
