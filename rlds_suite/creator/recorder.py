"""Writes played episodes into RLDS datasets with `RLDSWriter`, one dataset per study environment.

Each dataset has one writer thread. It takes every episode queued so far, records their steps with
the writer's public `record_step` / `set_episode_metadata`, then `flush`es them into the open
shard file: from then on they survive a SIGKILL (a restart salvages the shard), and only then does
the database mark them stored. Shards are completed by the writer's own policy (a shard's worth
of episodes or `max_seconds_per_shard`), so many episodes share a file; a download or a replay
that needs episodes of the open shard asks for it to be completed first (`publish`). A restarted
server reconciles the database with what the datasets hold (`stored_episode_ids`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import queue
import threading
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from envlogger import step_data
import numpy as np

from rlds_suite.core import errors
from rlds_suite.tfds import features as features_lib

EPISODE_ID = 'episode_id'
PLAYER_ID = 'player_id'
# Step metadata the creator records beside the RLDS fields (stripped by the download on request).
KEYS, WALL_TIME, FRAME = 'keys', 'wall_time', 'frame'
METADATA_FIELDS = (KEYS, WALL_TIME, FRAME)

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DatasetConfig:
  """What a study environment's dataset is: where, its name, specs and dataset-level metadata."""
  directory: str
  name: str
  observation_spec: Any
  action_spec: Any
  reward_spec: Any
  image_fields: tuple[str, ...]
  metadata: Mapping[str, Any]


@dataclasses.dataclass
class PlayedEpisode:
  """An episode as EnvLogger would have logged it: StepData from the reset timestep on, each with
  {'keys', 'wall_time'[, 'frame']} of its own timestep (the keys of the action taken at it)."""
  episode_id: str
  player_id: int
  steps: list[step_data.StepData]


class Recorder:
  """Hands played episodes to per-dataset writer threads and reports when they are durable."""

  def __init__(self, on_stored: Callable[[Sequence[str]], None],
               on_failed: Callable[[Sequence[str], Exception], None]):
    self._on_stored, self._on_failed = on_stored, on_failed
    self._lock = threading.Lock()
    self._datasets: dict[str, _DatasetThread] = {}

  def submit(self, config: DatasetConfig, episode: PlayedEpisode) -> concurrent.futures.Future:
    """Queues `episode`; the future is done once its steps are durable (its exception: why not)."""
    return self._thread(config.directory, config).put(episode)

  def publish(self, directory: str) -> None:
    """Completes the open shard of the dataset in `directory` (if any), so that readers see every
    episode stored so far. Blocks until done."""
    with self._lock:
      thread = self._datasets.get(directory)
    if thread is not None:
      thread.put(_PUBLISH).result()

  def wait(self) -> None:
    """Returns once every episode submitted so far is durable (or failed)."""
    for thread in list(self._datasets.values()):
      thread.queue.join()

  def close(self) -> None:
    """Writes what is queued and closes every writer."""
    with self._lock:
      threads, self._datasets = list(self._datasets.values()), {}
    for thread in threads:
      thread.queue.put((None, None))
    for thread in threads:
      thread.join()

  def _thread(self, directory: str, config: DatasetConfig) -> '_DatasetThread':
    with self._lock:
      thread = self._datasets.get(directory)
      if thread is None:
        thread = self._datasets[directory] = _DatasetThread(config, self)
      return thread


_PUBLISH = 'publish'


class _DatasetThread(threading.Thread):

  def __init__(self, config: DatasetConfig, recorder: Recorder):
    super().__init__(name=f'creator-recorder({config.directory})', daemon=True)
    self.config = config
    self.queue: queue.Queue[tuple[Any, Optional[concurrent.futures.Future]]] = queue.Queue()
    self._recorder = recorder
    self._writer = None
    self.start()

  def put(self, item: Any) -> concurrent.futures.Future:
    future: concurrent.futures.Future = concurrent.futures.Future()
    self.queue.put((item, future))
    return future

  def run(self) -> None:
    while True:
      batch = [self.queue.get()]
      while not self.queue.empty():
        batch.append(self.queue.get())
      episodes = [(e, f) for e, f in batch if isinstance(e, PlayedEpisode)]
      try:
        if episodes:
          self._write(episodes)
        if any(item == _PUBLISH for item, _ in batch) and self._writer is not None:
          self._writer.checkpoint()
      except Exception as e:  # pylint: disable=broad-except
        _log.error('completing a shard of %s failed: %s', self.config.directory, e)
        self._drop_writer()
        for item, future in batch:
          if item == _PUBLISH:
            future.set_exception(e)
      finally:
        for item, future in batch:
          if future is not None and not future.done():
            future.set_result(None)
          self.queue.task_done()
      if any(item is None for item, _ in batch):
        self._drop_writer(raise_errors=True)
        return

  def _write(self, episodes: Sequence[tuple[PlayedEpisode, concurrent.futures.Future]]) -> None:
    ids = [e.episode_id for e, _ in episodes]
    written = 0
    try:
      writer = self._open()
      written = writer.num_episodes_written
      for episode, _ in episodes:
        for index, data in enumerate(episode.steps):
          writer.record_step(data, index == 0)
        writer.set_episode_metadata({EPISODE_ID: episode.episode_id,
                                     PLAYER_ID: np.int64(episode.player_id)})
      writer.flush()
    except Exception as e:  # pylint: disable=broad-except
      # The episodes before the failing one are written; the writer is unusable after an error.
      done = max(0, self._writer.num_episodes_written - written) if self._writer else 0
      _log.error('recording episodes %s into %s failed: %s', ids[done:], self.config.directory, e)
      self._drop_writer()
      if done:
        self._recorder._on_stored(ids[:done])  # pylint: disable=protected-access
      self._recorder._on_failed(ids[done:], e)  # pylint: disable=protected-access
      for _, future in episodes[done:]:
        future.set_exception(e)
      return
    self._recorder._on_stored(ids)  # pylint: disable=protected-access

  def _drop_writer(self, raise_errors: bool = False) -> None:
    writer, self._writer = self._writer, None
    if writer is None:
      return
    try:
      writer.close()
    except Exception:  # pylint: disable=broad-except
      if raise_errors:
        raise

  def _open(self) -> Any:
    if self._writer is None:
      from rlds_suite.recording import backend  # pylint: disable=g-import-not-at-top
      config = self.config
      self._writer = backend.RLDSWriter(
          config.directory, name=config.name, observation_spec=config.observation_spec,
          action_spec=config.action_spec, reward_spec=config.reward_spec,
          image_fields=config.image_fields,
          step_features={KEYS: features_lib.text('Keys held when the action was chosen.'),
                         WALL_TIME: features_lib.scalar(
                             np.float64, 'Seconds since the epoch when the step was shown.')},
          episode_metadata_features={EPISODE_ID: features_lib.text(),
                                     PLAYER_ID: features_lib.scalar(np.int64)},
          description='Episodes played by people with rlds_suite creator.',
          dataset_metadata=dict(config.metadata))
    return self._writer


def stored_episode_ids(directory: str, salvage: bool = False) -> set[str]:
  """Ids of the episodes a dataset directory holds durably (none if it has no shards yet). With
  `salvage` (a restart), what a killed writer flushed into its unfinished shard is recovered first
  (`rlds_suite.recording.recovery`), so those episodes count too."""
  if salvage and os.path.isdir(directory):
    from rlds_suite.recording import recovery  # pylint: disable=g-import-not-at-top
    report = recovery.recover(directory)
    if getattr(report, 'changed', False):
      _log.warning('recovered an interrupted recording in %s: %s', directory, report)
  return {episode_id for episode_id, _ in _episodes(directory, None, ids_only=True)}


def read_episodes(directory: str, episode_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
  """The numpy episodes (steps batched per field) with these ids."""
  return dict(_episodes(directory, list(episode_ids)))


def _episodes(directory: str, episode_ids: Optional[list[str]],
              ids_only: bool = False) -> Iterator[tuple[str, Any]]:
  if not os.path.exists(os.path.join(directory, 'dataset_info.json')):
    return
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  try:
    builder = tfds.builder_from_directory(directory)
  except Exception as e:  # pylint: disable=broad-except
    raise errors.SchemaError(f'dataset does not load: {e}', path=directory) from e
  if not builder.info.splits or not builder.info.splits['train'].num_examples:
    return
  dataset = builder.as_dataset(split='train')
  if ids_only:
    for value in dataset.map(lambda e: e[EPISODE_ID]).as_numpy_iterator():
      yield value.decode(), None
    return
  wanted = tf.constant(episode_ids or [''])
  dataset = dataset.filter(lambda e: tf.reduce_any(tf.equal(e[EPISODE_ID], wanted)))
  for episode in datasets.numpy_episodes(dataset):
    yield episode[EPISODE_ID].decode(), episode


__all__ = ['Recorder', 'DatasetConfig', 'PlayedEpisode', 'stored_episode_ids', 'read_episodes',
           'METADATA_FIELDS', 'KEYS', 'WALL_TIME', 'FRAME', 'EPISODE_ID', 'PLAYER_ID']
