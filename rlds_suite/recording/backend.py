"""An EnvLogger backend that writes an RLDS dataset in TFDS format, fast and crash-safe.

    writer = rlds_suite.RLDSWriter('/data/cartpole', name='cartpole_random', env=env)
    with envlogger.EnvLogger(env, backend=writer) as logged_env:
      ...

The environment loop only appends EnvLogger `StepData` to the episode in flight, as EnvLogger's
in-memory backend does. When the episode is over (the next reset, `close()`, or a signal) its steps
are queued for one background thread (`BackgroundWorker`), which turns them into a `Trajectory`
ending as the last timestep says (discount 0 -> terminated, otherwise truncated), passes it through
`rlds_suite.episodes.to_episode` (the one place with boundary rules), serializes it (image
encoding releases the GIL, so it overlaps with the environment) and appends it to a
`ShardedDatasetWriter`, which makes every completed shard durable; metadata is written per
completed shard and at close. `checkpoint` and `close` drain the queue first; an error in the
thread is raised by the next recording call, `checkpoint` or `close`.

Only the public `BackendWriter` API (`_record_step`, `set_episode_metadata`, `close`, the
constructor's `metadata`/`scheduler`) is used, so the class works with envlogger 1.2 and 1.3.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import weakref
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import dm_env
from envlogger import step_data
from envlogger.backends import backend_writer
import numpy as np
import tensorflow_datasets as tfds

from rlds_suite import errors
from rlds_suite import features as features_lib
from rlds_suite import fields
from rlds_suite import nested
from rlds_suite.episodes import Ending, Episode, Trajectory, to_episode
from rlds_suite.recording import background
from rlds_suite.recording import serialization
from rlds_suite.recording import shards
from rlds_suite.recording import step_features as step_features_lib

# Step metadata that is not a dict is stored under this key.
CUSTOM_DATA = 'custom_data'
EPISODE_METADATA = 'episode_metadata'


class RLDSWriter(backend_writer.BackendWriter):
  """EnvLogger backend writing an RLDS/TFDS dataset into `data_directory`.

  Features: observation/action/reward come from dm_env specs (`env=`, explicit `*_spec`, or the
  specs EnvLogger passes when this class is given as a backend factory); `image_fields` lists the
  paths stored as PNG images ('observation', 'observation/pixels', 'frame'). Any feature may be
  given explicitly in `step_features` ({'observation': ..., 'frame': ...}) or
  `episode_metadata_features`; step and episode metadata not given are inferred from the first
  episode's values.

  A shard is completed after `max_episodes_per_shard` episodes or `max_bytes_per_shard` bytes,
  whichever comes first; a killed process loses at most the open shard and the episodes queued
  for writing (at most `max_pending_episodes`, which also bounds the memory they hold).

  `writer_thread`: convert and write episodes on a background thread (default when images are
  declared: their encoding releases the GIL and overlaps the environment) or in the caller's thread
  at each episode end (default otherwise: pure-Python conversion gains nothing from a thread but
  pays a hand-over per episode).
  """

  def __init__(self,
               data_directory: str | os.PathLike,
               *,
               name: str = 'envlogger_rollouts',
               version: str = '1.0.0',
               split: str = 'train',
               description: str = 'Rollouts recorded with EnvLogger and rlds_suite.',
               env: Optional[dm_env.Environment] = None,
               observation_spec: Any = None,
               action_spec: Any = None,
               reward_spec: Any = None,
               image_fields: Iterable[str] = (),
               step_features: Optional[Mapping[str, Any]] = None,
               episode_metadata_features: Optional[Mapping[str, Any]] = None,
               max_episodes_per_shard: int = 100,
               max_bytes_per_shard: int = 256 << 20,
               dataset_metadata: Optional[Mapping[str, Any]] = None,
               max_pending_episodes: int = 4,
               writer_thread: Optional[bool] = None,
               **base_kwargs):
    super().__init__(**base_kwargs)
    self._closed = True  # Until construction succeeds; makes __del__ harmless.
    self._busy = False
    self._when_idle: list[Callable[[], None]] = []
    self.data_directory = os.fspath(data_directory)
    self._name, self._version, self._split = name, version, split
    self._description = description
    specs = step_features_specs(env, observation_spec, action_spec, reward_spec,
                                step_features_lib.decoded_envlogger_specs(self._metadata))
    self._declared_steps = dict(step_features or {})
    if specs is not None:
      inferred = step_features_lib.environment_step_features(
          specs['observation_spec'], specs['action_spec'], specs.get('reward_spec'), image_fields)
      self._declared_steps = {**inferred, **self._declared_steps}
    self._image_fields = tuple(image_fields)
    self._declared_episode = dict(episode_metadata_features or {})
    self._max_episodes = max_episodes_per_shard
    self._max_bytes = max_bytes_per_shard
    self._dataset_metadata = dict(dataset_metadata or {})
    self._serializer: Optional[serialization.EpisodeSerializer] = None
    self._shards: Optional[shards.ShardedDatasetWriter] = None
    self._steps: Optional[list[step_data.StepData]] = None
    self._episode_metadata: Any = None
    self.num_episodes_written = 0
    self.num_episodes_discarded = 0
    if writer_thread is None:  # Image encoding releases the GIL; pure-Python conversion does not.
      writer_thread = bool(self._image_fields) or _has_image(self._declared_steps)
    self._worker = (background.BackgroundWorker(f'RLDSWriter({self.data_directory})',
                                                max_pending_episodes)
                    if writer_thread else background.InlineWorker())
    self._close_at_exit = _close_at_exit(self)
    atexit.register(self._close_at_exit)
    self._closed = False

  # EnvLogger's BackendWriter interface.

  def _record_step(self, data: step_data.StepData, is_new_episode: bool) -> None:
    steps = self._steps  # One read: a signal handler may hand the episode off in between.
    if not is_new_episode and not self._closed and self._worker.error is None:
      if steps is not None:
        steps.append(data)
      return
    with self._operation():
      self._check_open()
      self._worker.raise_error()
      if is_new_episode:
        self._write_episode_in_flight()
        self._steps = [data]
        self._episode_metadata = None

  def set_episode_metadata(self, data: Any) -> None:
    with self._operation():
      if self._steps is not None:
        self._episode_metadata = data

  def close(self) -> None:
    """Writes the episode in flight (truncated unless it ended), the open shard and the metadata.

    Waits for the queued episodes. Idempotent: later calls (EnvLogger.close, __del__) do nothing.
    Raises the background thread's error, if any.
    """
    if self._closed:
      return
    with self._operation():
      self._closed = True
      atexit.unregister(self._close_at_exit)
      try:
        self._write_episode_in_flight()
        self._worker.submit(self._close_shards)
      finally:
        try:
          self._worker.close()
        except BaseException:
          with contextlib.suppress(Exception):  # The thread's own error is the one to raise.
            self._close_shards()  # Keeps the episodes written before the failure.
          raise

  # rlds_suite additions.

  def discard_episode(self) -> None:
    """Drops the episode in flight: it is never written, and its remaining steps are ignored."""
    with self._operation():
      if self._steps is not None:
        self.num_episodes_discarded += 1
      self._steps = None
      self._episode_metadata = None

  def checkpoint(self, include_episode_in_flight: bool = False) -> None:
    """Completes the open shard and writes metadata now (pre-emption). With
    `include_episode_in_flight`, the unfinished episode is first written, truncated. Episodes
    queued before are written first; returns when all of it is on disk."""
    with self._operation():
      if self._closed:
        return
      if include_episode_in_flight:
        self._write_episode_in_flight()
      self._worker.submit(self._finish_shard)
      self._worker.wait()

  @property
  def episode_in_flight_steps(self) -> int:
    return 0 if self._steps is None else len(self._steps)

  @property
  def closed(self) -> bool:
    return self._closed

  def run_when_idle(self, fn: Callable[[], None]) -> None:
    """Runs `fn` now, or right after the writer's current operation if a signal handler
    interrupted one (handlers run in the main thread between bytecodes)."""
    if self._busy:
      self._when_idle.append(fn)
    else:
      fn()

  # Internals.

  @contextlib.contextmanager
  def _operation(self) -> Iterator[None]:
    outer = not self._busy
    self._busy = True
    try:
      yield
    finally:
      if outer:
        self._busy = False
        while self._when_idle:
          self._when_idle.pop(0)()

  def _check_open(self) -> None:
    if self._closed:
      raise errors.RLDSSuiteError('the writer is closed', path=self.data_directory)

  def _write_episode_in_flight(self) -> None:
    """Queues the episode in flight for the background thread."""
    steps, metadata = self._steps, self._episode_metadata
    self._steps, self._episode_metadata = None, None
    if steps is None or len(steps) < 2:
      return  # No action was taken: nothing to write.
    steps = tuple(steps)  # Later appends (after a signal handler's hand-off) cannot reach it.
    self._worker.submit(lambda: self._write_episode(steps, metadata))

  # Jobs of the background thread.

  def _write_episode(self, steps: Sequence[step_data.StepData], metadata: Any) -> None:
    episode = episode_from_steps(steps, metadata)
    if self._serializer is None:
      self._open(episode)
    serialized = self._serializer.serialize(episode)
    self._shards.write(serialized)
    self.num_episodes_written += 1
    if (self._shards.open_shard_examples >= self._max_episodes or
        self._shards.open_shard_bytes >= self._max_bytes):
      self._shards.finish_shard()

  def _finish_shard(self) -> None:
    if self._shards is not None:
      self._shards.finish_shard()

  def _close_shards(self) -> None:
    if self._shards is not None:
      self._shards.close()

  def _open(self, episode: Episode) -> None:
    """Fixes the features from the declarations and the first episode, and opens the directory."""
    with errors.located(self.data_directory):
      steps = {}
      for key, value in episode.steps.items():
        if key in self._declared_steps:
          steps[key] = self._declared_steps[key]
        elif key in fields.CORE_STEP_FIELDS and key not in (fields.OBSERVATION, fields.ACTION,
                                                             fields.REWARD):
          continue  # discount and boundary flags: declared by rlds_features.
        else:
          rows = [nested.row(value, i) for i in range(episode.num_steps)]
          steps[key] = step_features_lib.from_values(rows, key, self._image_fields)
      episode_features = {
          key: (self._declared_episode[key] if key in self._declared_episode else
                step_features_lib.from_values([value], key, self._image_fields))
          for key, value in episode.metadata.items()
      }
      feature_dict = features_lib.rlds_features(
          observation=steps.pop(fields.OBSERVATION), action=steps.pop(fields.ACTION),
          reward=steps.pop(fields.REWARD), step_metadata=steps,
          episode_metadata=episode_features)
      self._shards = shards.ShardedDatasetWriter(
          self.data_directory, name=self._name, features=feature_dict, version=self._version,
          split=self._split, description=self._description, metadata=self._dataset_metadata)
      self._serializer = serialization.EpisodeSerializer(self._shards.info.features)


def _close_at_exit(writer: RLDSWriter) -> Callable[[], None]:
  """An atexit hook closing `writer` (if still alive) while its daemon thread can still run."""
  reference = weakref.ref(writer)

  def close() -> None:
    alive = reference()
    if alive is not None:
      alive.close()

  return close


def step_features_specs(env: Optional[dm_env.Environment], observation_spec: Any, action_spec: Any,
                        reward_spec: Any,
                        envlogger_specs: Optional[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
  """The observation/action/reward specs to declare features from, by precedence: explicit specs,
  `env`, the specs EnvLogger passed; None when observation and action specs are both unknown."""
  found = dict(envlogger_specs or {})
  if env is not None:
    found.update(step_features_lib.environment_specs(env))
  for key, spec in (('observation_spec', observation_spec), ('action_spec', action_spec),
                    ('reward_spec', reward_spec)):
    if spec is not None:
      found[key] = spec
  if found.get('observation_spec') is None or found.get('action_spec') is None:
    return None
  return found


def episode_from_steps(steps: Sequence[step_data.StepData], metadata: Any = None) -> Episode:
  """EnvLogger StepData of one episode (reset timestep first) -> an RLDS `Episode`.

  Step t pairs o_t with a_t and the reward of the timestep a_t produced. The ending follows the last
  timestep: LAST with discount 0 is a termination, anything else (time limit, recording stopped
  mid-episode) a truncation. EnvLogger's step metadata belongs to the timestep it was computed at,
  so the final step keeps the final timestep's metadata.
  """
  first, last = steps[0].timestep, steps[-1].timestep
  if not first.first():
    raise errors.EpisodeBoundaryError('episode does not start with a FIRST timestep',
                                      field=fields.IS_FIRST)
  terminated = last.last() and last.discount is not None and float(np.min(last.discount)) == 0.0
  has_custom = any(s.custom_data is not None for s in steps)
  custom = [_as_metadata_dict(s.custom_data) for s in steps] if has_custom else []
  has_custom = any(c for c in custom)
  acted = steps[1:]
  trajectory = Trajectory(
      observations=_column([s.timestep.observation for s in steps[:-1]]),
      actions=_column([s.action for s in acted]),
      rewards=_column([s.timestep.reward for s in acted]),
      discounts=_discounts([s.timestep.discount for s in acted]),
      ending=Ending.TERMINATED if terminated else Ending.TRUNCATED,
      final_observation=nested.as_arrays(step_features_lib.tuples_as_dicts(last.observation)),
      step_metadata=nested.stack_rows_allowing_ragged(custom[:-1]) if has_custom else {},
      final_step_metadata=custom[-1] if has_custom else None,
      metadata=_as_episode_metadata(metadata))
  return to_episode(trajectory)


def _column(values: Sequence[Any]) -> Any:
  """One field's values, one per step -> stacked arrays. Rows of plain numbers or equal-shape
  numeric arrays (the common case) stack in one call; anything else goes through `_stack`."""
  if isinstance(values[0], (np.ndarray, np.generic, int, float)):
    try:
      stacked = np.asarray(values)
    except ValueError:  # Rows differ in shape.
      stacked = None
    if stacked is not None and stacked.dtype.kind not in 'USO' and stacked.ndim == np.ndim(values[0]) + 1:
      return stacked
  return nested.stack_rows_allowing_ragged([step_features_lib.tuples_as_dicts(v) for v in values])


def _discounts(values: Sequence[Any]) -> np.ndarray:
  """dm_env discounts may be None (FIRST) or arrays; RLDS keeps one scalar (the minimum) per step."""
  if all(v is not None for v in values):
    stacked = _column(values)
    if isinstance(stacked, np.ndarray) and stacked.dtype.kind in 'biuf':
      return stacked.reshape(len(values), -1).min(axis=1).astype(np.float32)
  return np.array([1.0 if v is None else float(np.min(v)) for v in values], np.float32)


def _as_metadata_dict(custom_data: Any) -> dict[str, Any]:
  if custom_data is None:
    return {}
  data = dict(custom_data) if isinstance(custom_data, Mapping) else {CUSTOM_DATA: custom_data}
  clash = set(data) & set(fields.CORE_STEP_FIELDS)
  if clash:
    raise errors.SchemaError(f'step metadata keys {sorted(clash)} clash with RLDS step fields',
                             field='step_fn')
  return {key: step_features_lib.tuples_as_dicts(value) for key, value in data.items()}


def _as_episode_metadata(metadata: Any) -> dict[str, Any]:
  if metadata is None:
    return {}
  data = dict(metadata) if isinstance(metadata, Mapping) else {EPISODE_METADATA: metadata}
  if fields.STEPS in data:
    raise errors.SchemaError("episode metadata may not use the key 'steps'", field='episode_fn')
  return {key: step_features_lib.tuples_as_dicts(value) for key, value in data.items()}


def _has_image(features: Any) -> bool:
  if isinstance(features, tfds.features.Image):
    return True
  if isinstance(features, (Mapping, tfds.features.FeaturesDict)):
    return any(_has_image(value) for value in features.values())
  return False
