"""An EnvLogger backend that writes an RLDS dataset in TFDS format, fast and crash-safe.

    writer = rlds_suite.RLDSWriter('/data/cartpole', name='cartpole_random', env=env)
    with envlogger.EnvLogger(env, backend=writer) as logged_env:
      ...

The environment loop only appends EnvLogger `StepData` to the episode in flight, as EnvLogger's
in-memory backend does. When the episode is over (the next reset, `close()`, or a signal) it joins
the pending batch. A batch (a shard's worth of episodes, fewer once their steps hold
MAX_BATCH_BYTES, or whatever ended episodes wait when `flush_seconds` have passed) goes to a worker
(`background`: the caller's thread by default, or a thread), which converts its episodes together
with `rlds_suite.core.episodes.to_episodes` (the one place with boundary rules; each ending as its
last timestep says: discount 0 -> terminated, otherwise truncated), serializes them
(`serialization.serialize_batch`), appends them to the open shard file of a `ShardedDatasetWriter`
and flushes it: from then on a SIGKILL cannot lose them (`recovery` salvages the unfinished shard).
Metadata is written per completed shard and at close; so is the recording's provenance (when
given), which is also written as the writer opens. A write that fails (a full disk, a quota)
stops the writer with one line saying how many episodes were kept: the unfinished shard's complete
episodes are salvaged at once (`recovery`), never renamed into place with a torn record.
Converting many episodes at once is what makes the per-step cost small: Python work per episode,
not per step, was the whole cost for short episodes of small observations. `checkpoint` and
`close` write the pending batch and drain the worker first. An episode that cannot be written (a
NaN reward, metadata that does not match the features) fails when its batch is converted: the
episodes before it are written, and the error is raised by that recording call (or the next one,
with a writer thread), `checkpoint` or `close`.

Only the public `BackendWriter` API (`_record_step`, `set_episode_metadata`, `close`, the
constructor's `metadata`/`scheduler`) is used, so the class works with envlogger 1.2 and 1.3.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import weakref
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import dm_env
from absl import logging
from envlogger import step_data
from envlogger.backends import backend_writer
import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.tfds import features as features_lib
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.core.episodes import Episode, EpisodeBatch, TrajectoryBatch, to_episodes
from rlds_suite.recording import background
from rlds_suite.recording import recovery
from rlds_suite.recording import run_provenance
from rlds_suite.recording import serialization
from rlds_suite.recording import shards
from rlds_suite.recording import step_features as step_features_lib

# Ended episodes are converted together once their steps hold this many bytes (or a shard's worth
# of episodes ended): it bounds the memory they hold. Pong frames: ~3 episodes of 200 steps.
MAX_BATCH_BYTES = 64 << 20
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

  Every ended episode is written to the open shard file and flushed within `flush_seconds` of its
  end (at once when `flush_seconds` have passed since the last write, as with long episodes), so a
  killed process loses only the episodes of its last `flush_seconds` and the one in flight (and,
  with a writer thread, the batches in its queue). Opening a directory that a killed recording left
  salvages its unfinished shard first (`recovery.recover`; the report is `recovery_report`). While
  the writer is open it holds the directory's lock: a second writer or `recover` is refused.
  A shard is completed (renamed into place, metadata rewritten, so readers see it) after
  `max_episodes_per_shard` episodes, `max_bytes_per_shard` bytes, or at the first episode end
  `max_seconds_per_shard` seconds after its first episode ended, whichever comes first.

  `writer_thread`: by default (False) batches are converted and written in the caller's thread, so
  the recording overhead is exactly the writer's CPU time. True: on a background thread, with at
  most `max_pending_batches` batches queued (a bound on their memory); image encoding (ISA-L)
  releases the GIL and can then overlap the environment, which pays off only when a core is idle.
  On 2 busy cores the thread's GIL contention costs more than it hides.

  `keep_reset_only_episodes`: an episode of only a reset (no action) is written as one step, first
  and last, truncated, with its metadata, as TFDS's EnvLogger reader keeps it (`convert` does
  this); by default such an episode is not written.

  `provenance`: what is recording (`record` gives the environment, options, seed, policy): kept in
  rlds_suite_provenance.json from the start, with the episodes written and a status, updated as
  shards complete and at close. Recording into a directory that holds another dataset (another
  name, or other declared features) is refused here, before the first step.
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
               max_episodes_per_shard: int = 1000,
               max_bytes_per_shard: int = 256 << 20,
               max_seconds_per_shard: float = 60.0,
               flush_seconds: float = 5.0,
               dataset_metadata: Optional[Mapping[str, Any]] = None,
               max_pending_batches: int = 2,
               writer_thread: bool = False,
               keep_reset_only_episodes: bool = False,
               provenance: Optional[Mapping[str, Any]] = None,
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
    self._keep_reset_only = keep_reset_only_episodes
    self._declared_episode = dict(episode_metadata_features or {})
    self._max_episodes = max_episodes_per_shard
    self._max_bytes = max_bytes_per_shard
    self._max_seconds = max_seconds_per_shard
    self._shard_deadline: Optional[float] = None  # When the open shard is due, on time.monotonic.
    self._flush_seconds = flush_seconds
    # A timer raises _flush_due when pending episodes have waited flush_seconds; the next recording
    # call writes them. A flag, not a clock read per step: that cost ~10% of CartPole's writer time.
    self._flush_timer: Optional[threading.Timer] = None
    self._flush_due = False
    self._last_flush = time.monotonic()
    self._dataset_metadata = dict(dataset_metadata or {})
    self._serializer: Optional[serialization.EpisodeSerializer] = None
    self._shards: Optional[shards.ShardedDatasetWriter] = None
    self._steps: Optional[list[step_data.StepData]] = None
    self._episode_metadata: Any = None
    self._pending: list[Recorded] = []  # Ended episodes not yet handed to the worker.
    self._pending_bytes = 0
    self._step_bytes: Optional[int] = None  # Raw bytes of one step, from the first one recorded.
    self.num_episodes_written = 0
    self.num_episodes_discarded = 0
    self._row_paths = (frozenset(self._image_fields) |
                       serialization.row_encoded_paths(self._declared_steps))
    self._examples_before = 0  # Episodes the dataset held when this writer opened it.
    self.provenance = None if provenance is None else {
        **provenance, 'episodes_written': 0, 'status': 'recording'}
    self._lock = recovery.DirectoryLock(self.data_directory)
    try:
      self.recovery_report = recovery.recover(self.data_directory, lock=self._lock)
      self._check_existing_dataset()
      self._write_provenance(new=True)
    except BaseException:
      self._lock.release()
      raise
    if self.recovery_report.changed:
      logging.warning('%s', self.recovery_report)
    self._worker = (background.BackgroundWorker(f'RLDSWriter({self.data_directory})',
                                                max_pending_batches)
                    if writer_thread else background.InlineWorker())
    self._close_at_exit = _close_at_exit(self)
    atexit.register(self._close_at_exit)
    self._closed = False

  # EnvLogger's BackendWriter interface.

  def _record_step(self, data: step_data.StepData, is_new_episode: bool) -> None:
    steps = self._steps  # One read: a signal handler may hand the episode off in between.
    if (not is_new_episode and not self._flush_due and not self._closed and
        self._worker.error is None):
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
      else:
        if steps is not None:
          steps.append(data)
        self._submit_pending()  # Ended episodes waited flush_seconds.

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
        try:
          self._write_episode_in_flight()
          self._submit_pending()
          self._worker.submit(self._close_shards)
        finally:
          try:
            self._worker.close()
          except BaseException:
            with contextlib.suppress(Exception):  # The thread's own error is the one to raise.
              self._close_shards()  # Keeps the episodes written before the failure.
            raise
      finally:
        self._lock.release()

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
      self._submit_pending()
      self._worker.submit(self._finish_shard)
      self._worker.wait()

  def flush(self) -> None:
    """Writes the episode in flight (truncated unless it ended) and the ended ones into the open
    shard file and flushes it, without completing the shard (the shard policy stays the writer's):
    once this returns a SIGKILL cannot lose them (`recovery` salvages the shard), though readers
    see them only once their shard is completed."""
    with self._operation():
      if self._closed:
        return
      self._write_episode_in_flight()
      self._submit_pending()
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
    """Adds the episode in flight to the pending batch; a full batch goes to the worker."""
    steps, metadata = self._steps, self._episode_metadata
    self._steps, self._episode_metadata = None, None
    if steps is None or len(steps) < (1 if self._keep_reset_only else 2):
      return  # No action was taken: nothing to write (unless reset-only episodes are kept).
    # A tuple: later appends (after a signal handler's hand-off) cannot reach it.
    self._pending.append((tuple(steps), metadata))
    now, deadline = time.monotonic(), self._shard_deadline  # The worker may reset it meanwhile.
    if deadline is None:
      deadline = self._shard_deadline = now + self._max_seconds
    if self._step_bytes is None:
      self._step_bytes = _raw_bytes(steps[0])
    self._pending_bytes += len(steps) * self._step_bytes
    if now >= deadline:
      self._submit_pending()
      self._worker.submit(self._finish_shard)
    elif (len(self._pending) >= self._max_episodes or self._pending_bytes >= MAX_BATCH_BYTES or
          now - self._last_flush >= self._flush_seconds):
      self._submit_pending()
    elif self._flush_timer is None:
      self._flush_timer = threading.Timer(self._flush_seconds, self._set_flush_due)
      self._flush_timer.daemon = True
      self._flush_timer.start()

  def _set_flush_due(self) -> None:
    self._flush_due = True

  def _submit_pending(self) -> None:
    """Hands the ended episodes to the worker, which writes and flushes them."""
    pending, self._pending, self._pending_bytes = self._pending, [], 0
    if self._flush_timer is not None:
      self._flush_timer.cancel()
      self._flush_timer = None
    self._flush_due, self._last_flush = False, time.monotonic()
    if pending:
      self._worker.submit(lambda: self._write_episodes(pending))

  # Jobs of the worker.

  def _write_episodes(self, recorded: Sequence[Recorded]) -> None:
    """Converts, serializes and writes episodes in order; when one of them fails, the episodes
    before it are written and its error is raised."""
    with self._stop_on_write_error():
      self._write_episodes_or_fail(recorded)

  def _write_episodes_or_fail(self, recorded: Sequence[Recorded]) -> None:
    try:
      batch = episodes_from_steps(recorded, self._row_paths.__contains__,
                                  _no_rows(self._declared_steps))
      if self._serializer is None:
        self._open(batch.episode(0))
      serialized = self._serializer.serialize_batch(batch)
    except errors.RLDSSuiteError:
      if len(recorded) == 1:
        raise
      for one in recorded:  # Finds the failing episode, writing those before it.
        self._write_episodes_or_fail([one])
      return  # Each was written: only converting them together failed.
    for example in serialized:
      self._shards.write(example)
      self.num_episodes_written += 1
      if (self._shards.open_shard_examples >= self._max_episodes or
          self._shards.open_shard_bytes >= self._max_bytes):
        self._finish_shard()
    self._shards.flush()

  def _finish_shard(self) -> None:
    if self._shards is not None:
      with self._stop_on_write_error():
        self._shards.finish_shard()
    self._shard_deadline = None

  def _close_shards(self) -> None:
    if self._shards is not None and self._shards.failed:
      return  # Stopped by a failed write: salvaged then.
    with self._stop_on_write_error():
      if self._shards is not None:
        self._shards.close()
      if self.provenance is not None:
        if self.provenance['status'] == 'recording':  # Else what stopped it ('interrupted').
          self.provenance['status'] = 'closed'
        self.provenance['ended'] = run_provenance.timestamp()
      self._write_provenance()

  def _write_provenance(self, new: bool = False) -> None:
    if self.provenance is not None:
      self.provenance['episodes_written'] = self.num_episodes_written
      run_provenance.write_run(self.data_directory, self.provenance, new=new)

  @contextlib.contextmanager
  def _stop_on_write_error(self) -> Iterator[None]:
    """A failed write (full disk, quota) stops the writer: the complete episodes of the abandoned
    shard are salvaged now, and the error says how many episodes were kept."""
    try:
      yield
    except errors.OutputWriteError as e:
      raise self._salvage(e) from e

  def _salvage(self, error: errors.OutputWriteError) -> errors.OutputWriteError:
    if self._shards is not None:
      self._shards.abandon()
    hint = ''
    try:  # Trimming the torn record frees what the metadata needs.
      recovery.recover(self.data_directory, lock=self._lock, note_provenance=False)
      info = shards.read_info(self.data_directory)
      kept = (sum(info.splits[self._split].shard_lengths) - self._examples_before
              if info is not None and self._split in info.splits else 0)
    except (errors.RLDSSuiteError, OSError):
      kept = 0 if self._shards is None else self._shards.num_examples - self._examples_before
      hint = (f'; the complete episodes of its last shard are on disk too: free space, then '
              f'run rlds-suite recover {self.data_directory}')
    self.num_episodes_written = kept
    if self.provenance is not None:
      self.provenance.update(status=f'stopped: {error.problem}', ended=run_provenance.timestamp())
      with contextlib.suppress(errors.RLDSSuiteError):
        self._write_provenance()
    return errors.OutputWriteError(f'{error.problem}: {kept} episodes kept{hint}')

  def _check_existing_dataset(self) -> None:
    """Refuses to record into a directory holding another dataset (checked before the first step)."""
    existing = shards.read_info(self.data_directory)
    if existing is None:
      return
    if existing.name != self._name:
      raise errors.SpecMismatchError(
          f'holds dataset {existing.name!r}: cannot record {self._name!r} into it; choose another '
          f'directory (or name {existing.name!r} if it is the same environment)',
          path=self.data_directory)
    if self._split in existing.splits:
      self._examples_before = sum(existing.splits[self._split].shard_lengths)
    declared = self._declared_steps
    if fields.OBSERVATION not in declared or fields.ACTION not in declared:
      return  # Features are fixed by the first episode; ShardedDatasetWriter compares them then.
    new = features_lib.rlds_features(
        observation=declared[fields.OBSERVATION], action=declared[fields.ACTION],
        reward=declared.get(fields.REWARD),
        step_metadata={k: v for k, v in declared.items() if k not in fields.CORE_STEP_FIELDS})
    old_steps, new_steps = existing.features[fields.STEPS].feature, new[fields.STEPS].feature
    for key in declared:
      if key not in old_steps or repr(old_steps[key]) != repr(new_steps[key]):
        raise errors.SpecMismatchError(
            f'holds dataset {existing.name!r} whose steps differ: {key} is '
            f'{old_steps[key] if key in old_steps else None!r} there, {new_steps[key]!r} here; '
            f'choose another directory', path=self.data_directory, field=f'steps/{key}')

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
          split=self._split, description=self._description, metadata=self._dataset_metadata,
          on_metadata=self._write_provenance)
      self._examples_before = self._shards.num_examples
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


Recorded = tuple[Sequence[step_data.StepData], Any]  # One episode's StepData and its metadata.


def episodes_from_steps(recorded: Sequence[Recorded],
                        keep_rows: Callable[[str], bool] = lambda path: False,
                        no_rows: Optional[Mapping[str, Any]] = None) -> EpisodeBatch:
  """EnvLogger StepData of episodes (each from its reset timestep) -> RLDS episodes, converted
  together by `rlds_suite.core.episodes.to_episodes`.

  Step t pairs o_t with a_t and the reward of the timestep a_t produced. The ending follows the last
  timestep: LAST with discount 0 is a termination, anything else (time limit, recording stopped
  mid-episode) a truncation. EnvLogger's step metadata belongs to the timestep it was computed at,
  so the final step keeps the final timestep's metadata. Fields at paths where `keep_rows` is true
  (those encoded row by row, e.g. images) stay one array per row, uncopied. An episode of only its
  reset timestep becomes one step; a batch of only such episodes takes its empty action and reward
  columns from `no_rows` (`_no_rows` of the declared features).
  """
  for index, (steps, _) in enumerate(recorded):
    if not steps[0].timestep.first():
      raise errors.EpisodeBoundaryError(f'episode {index} does not start with a FIRST timestep',
                                        field=fields.IS_FIRST)
  acted = [s.timestep for steps, _ in recorded for s in steps[1:]]
  num_actions = np.array([len(steps) - 1 for steps, _ in recorded])
  lasts = [steps[-1].timestep for steps, _ in recorded]
  final_observations = _column([t.observation for t in lasts], fields.OBSERVATION, keep_rows)
  if acted:
    observations = _column([s.timestep.observation for steps, _ in recorded for s in steps[:-1]],
                           fields.OBSERVATION, keep_rows)
    actions = _column([s.action for steps, _ in recorded for s in steps[1:]], fields.ACTION,
                      keep_rows)
    rewards = _column([t.reward for t in acted], fields.REWARD, keep_rows)
  elif no_rows is not None and {fields.ACTION, fields.REWARD} <= set(no_rows):
    observations = nested.take_rows(final_observations, slice(0, 0))
    actions, rewards = no_rows[fields.ACTION], no_rows[fields.REWARD]
  else:
    raise errors.SchemaError('episodes without any action need declared action and reward specs',
                             field=fields.ACTION)
  discounts = _discounts([t.discount for t in acted])
  ended = np.array([t.last() for t in lasts])  # Anything else stopped mid-episode: truncated.
  has_custom = any(s.custom_data is not None for steps, _ in recorded for s in steps)
  if has_custom:
    custom = [_as_metadata_dict(s.custom_data) for steps, _ in recorded for s in steps[:-1]]
    final_custom = [_as_metadata_dict(steps[-1].custom_data) for steps, _ in recorded]
    keys = set(final_custom[0])
    changed = next((c for c in custom + final_custom if set(c) != keys), None)
    if changed is not None:
      raise errors.SchemaError(f'step metadata keys changed from {sorted(keys)} to '
                               f'{sorted(changed)}', field='step_fn')
    final_custom_column = _column(final_custom, '', keep_rows)
  terminated = ended & (num_actions > 0)  # A reset alone is never a termination.
  terminated[terminated] = discounts[(np.cumsum(num_actions) - 1)[terminated]] == 0.0
  step_metadata: Any = {}
  if has_custom:
    step_metadata = (_column(custom, '', keep_rows) if custom else
                     nested.take_rows(final_custom_column, slice(0, 0)))
  batch = TrajectoryBatch(
      observations=observations,
      actions=actions,
      rewards=rewards,
      discounts=discounts,
      num_actions=num_actions,
      terminated=terminated,
      final_observations=final_observations,
      step_metadata=step_metadata,
      final_step_metadata=final_custom_column if has_custom else None,
      metadata=[_as_episode_metadata(metadata) for _, metadata in recorded])
  return to_episodes(batch)


def _column(values: Sequence[Any], path: str,
            keep_rows: Callable[[str], bool] = lambda path: False) -> Any:
  """One field's values, one per step -> stacked arrays (tuples become dicts; rows at `keep_rows`
  paths, and ragged or text rows, stay one value per row)."""
  if not isinstance(values[0], (np.ndarray, np.generic, int, float)):
    values = [step_features_lib.tuples_as_dicts(v) for v in values]
  return nested.stack_rows_allowing_ragged(values, keep_rows, path)


def _no_rows(declared_steps: Mapping[str, Any]) -> Optional[dict[str, Any]]:
  """Zero-row arrays of the declared action and reward features (None when not declared)."""
  empty = {}
  for key in (fields.ACTION, fields.REWARD):
    if key not in declared_steps:
      return None
    empty[key] = _no_rows_of(declared_steps[key])
  return empty


def _no_rows_of(feature: Any) -> Any:
  if isinstance(feature, (Mapping, tfds.features.FeaturesDict)):
    return {key: _no_rows_of(feature[key]) for key in feature.keys()}
  return np.zeros((0, *(d or 0 for d in feature.shape)), feature.np_dtype)


def _discounts(values: Sequence[Any]) -> np.ndarray:
  """dm_env discounts may be None (FIRST) or arrays; RLDS keeps one scalar (the minimum) per step."""
  if not values:
    return np.zeros(0, np.float32)
  if all(v is not None for v in values):
    stacked = _column(values, fields.DISCOUNT)
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


def _raw_bytes(step: step_data.StepData) -> int:
  """Bytes of a step's observation, action and step metadata as arrays (an estimate for text)."""
  parts = (step.timestep.observation, step.action, step.custom_data)
  return sum(np.asarray(leaf).nbytes for part in parts if part is not None
             for leaf in nested.leaves(part))
