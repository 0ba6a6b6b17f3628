"""Writing RLDS episodes into TFDS dataset directories: the builders' writer, resumable, in parallel.

`write_split` is what every non-Beam builder (`builder_base.RLDSBuilder`) writes with, instead of
TFDS's writer, which encodes one example at a time in Python and keeps every serialized example in
memory (up to 1 GiB) to shuffle it: a 1M-row DQN Replay build grew by ~0.3 GB over the run.
Here:
  * examples are checked and stacked per field in this process, then serialized batch per field by
    `episode_wire` (the recording's wire format and encoders) in a pool of worker processes that
    import neither TensorFlow nor TFDS; a batch goes to a worker and its TFRecord frames come
    back in one shared-memory block (nothing large is pickled); memory is a few batches in
    flight, whatever the size; the workers die with this process;
  * examples are written in the order they are generated (the dataset says so: disable_shuffling),
    into shards of about `shard_bytes`, each written under a hidden name, then fsynced, renamed
    and recorded in the work directory's `progress.json` by a thread while the next is written;
  * a build killed at any moment and run again continues after the last recorded shard (the
    generator is run again and the examples already written are skipped unserialized): the result
    equals an uninterrupted build. SIGTERM/SIGUSR1 close the open shard at the next example and
    stop; Ctrl-C keeps the completed shards. Either raises `BuildStopped`, which says what was kept.

The work directory (`incomplete.resumable_VERSION` beside the version directory) holds no
dataset_info.json, so nothing half-built looks like a dataset to TFDS or to our readers. When a
split is complete its shards are hard-linked under TFDS's names into TFDS's own incomplete
directory, which TFDS renames into place.

`write_episodes` writes episodes given in memory (tests, benchmarks, recorded datasets) with
`tfds.dataset_builders.store_as_tfds_dataset`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import ctypes
import dataclasses
import functools
import fcntl
import json
import multiprocessing
import os
import queue
import re
import shutil
import signal
import sys
import threading
import types
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core.episodes import Episode
from rlds_suite.tfds import episode_wire
from rlds_suite.tfds import tfrecord_files

EpisodeLike = Union[Episode, Mapping[str, Any]]

SHARD_BYTES = 64 << 20  # Serialized bytes per shard: at most this much work is redone on resume.
BATCH_BYTES = 8 << 20  # Raw bytes of episodes sent to a worker at a time.
POOL_AFTER_BYTES = 32 << 20  # Smaller builds serialize in this process (they wait for no worker).
WORK_DIR_PREFIX = 'incomplete.resumable_'
PROGRESS_FILE = 'progress.json'
_TFDS_INCOMPLETE = re.compile(r'incomplete\.[A-Z0-9]{6}_')
_STOP_SIGNALS = episode_wire.STOP_SIGNALS


class BuildStopped(KeyboardInterrupt):
  """A build stopped by Ctrl-C, SIGTERM or SIGUSR1; the completed shards are kept for a resume."""

  def __init__(self, signal_name: str, episodes: int, shards: int, directory: str):
    self.signal_name, self.episodes, self.shards, self.directory = (
        signal_name, episodes, shards, directory)
    super().__init__(f'{signal_name}: {episodes} episodes in {shards} shards kept in {directory}; '
                     'run the same command to resume')


# --- The plan: how each flat feature is written -----------------------------------------------

def plan_of(features: tfds.features.FeaturesDict) -> Optional[list[episode_wire.Leaf]]:
  """The episode_wire plan of an RLDS FeaturesDict, or None when a feature needs TFDS's own
  encoder (ragged or unknown shapes, uint64, per-step text, other connectors)."""
  leaves: list[episode_wire.Leaf] = []
  for key, feature in features.items():
    if key == fields.STEPS and isinstance(feature, tfds.features.Dataset):
      found = _leaves(feature.feature, f'{key}/', per_step=True)
    else:
      found = _leaves(feature, f'{key}/', per_step=False) if isinstance(
          feature, tfds.features.FeaturesDict) else _leaves({key: feature}, '', per_step=False)
    if found is None:
      return None
    leaves += found
  return leaves


def _leaves(features: Any, prefix: str, per_step: bool) -> Optional[list[episode_wire.Leaf]]:
  leaves = []
  for key, feature in features.items():
    if isinstance(feature, tfds.features.FeaturesDict):
      nested = _leaves(feature, f'{prefix}{key}/', per_step)
      if nested is None:
        return None
      leaves += nested
      continue
    kind = _kind(feature, per_step)
    if kind is None:
      return None
    shape = tuple(feature.shape) if kind != episode_wire.TEXT else ()
    leaves.append(episode_wire.Leaf(f'{prefix}{key}', kind, np.dtype(feature.np_dtype).str
                                    if kind != episode_wire.TEXT else '|O', shape, per_step))
  return leaves


def _kind(feature: Any, per_step: bool) -> Optional[str]:
  # pylint: disable=protected-access
  if type(feature) is tfds.features.Text:
    return None if per_step else episode_wire.TEXT
  shape = getattr(feature, 'shape', None)
  if shape is None or None in shape:
    return None
  dtype = np.dtype(feature.np_dtype)
  if type(feature) is tfds.features.Image:
    ok = feature._encoding_format == 'png' and dtype in (np.uint8, np.uint16)
    return episode_wire.PNG if ok else None
  if type(feature) not in (tfds.features.Tensor, tfds.features.Scalar):
    return None
  encoding = feature._encoding
  if encoding == tfds.features.Encoding.ZLIB:
    return episode_wire.ZLIB
  if encoding == tfds.features.Encoding.BYTES:
    return episode_wire.RAW
  if encoding != tfds.features.Encoding.NONE or dtype == np.uint64:
    return None
  if dtype.kind == 'f':
    return episode_wire.FLOAT
  return episode_wire.INT if dtype.kind in 'biu' else None


def flat_episode(plan: Sequence[episode_wire.Leaf], example: EpisodeLike) -> dict[str, Any]:
  """An example's values by leaf key, steps stacked, checked against the plan (SchemaError)."""
  if isinstance(example, Episode):
    example = example.as_example()
  steps = example.get(fields.STEPS) if isinstance(example, Mapping) else None
  if isinstance(steps, (list, tuple)):  # A list of step dicts: stack per leaf below.
    steps = {'__rows__': steps}
  flat = {}
  for leaf in plan:
    path = leaf.key.split('/')
    if leaf.per_step:
      if '__rows__' in (steps or {}):
        rows = [_get(row, path[1:], leaf.key) for row in steps['__rows__']]
        value = np.asarray(rows) if rows else np.zeros((0,) + leaf.shape, leaf.dtype)
      else:
        value = _get(steps, path[1:], leaf.key)
      flat[leaf.key] = _checked(np.asarray(value), leaf, per_step=True)
    elif leaf.kind == episode_wire.TEXT:
      value = _get(example, path, leaf.key)
      if not isinstance(value, (str, bytes)):
        raise errors.SchemaError(f'expected text, got {type(value).__name__}', field=leaf.key)
      flat[leaf.key] = value
    else:
      flat[leaf.key] = _checked(np.asarray(_get(example, path, leaf.key)), leaf, per_step=False)
  return flat


def _get(value: Any, path: Sequence[str], key: str) -> Any:
  for part in path:
    if not isinstance(value, Mapping) or part not in value:
      raise errors.SchemaError('missing from the example', field=key)
    value = value[part]
  return value


def _checked(array: np.ndarray, leaf: episode_wire.Leaf, per_step: bool) -> np.ndarray:
  shape = array.shape[1:] if per_step else array.shape
  if (per_step and array.ndim == 0) or tuple(shape) != leaf.shape:
    raise errors.SchemaError(f'expected {"rows of " if per_step else ""}shape {list(leaf.shape)}, '
                             f'got {list(array.shape)}', field=leaf.key)
  dtype = np.dtype(leaf.dtype)
  if array.dtype != dtype and not (array.size == 0 or np.can_cast(array.dtype, dtype, 'same_kind')):
    raise errors.SchemaError(f'expected {dtype.name}, got {array.dtype.name}', field=leaf.key)
  return np.ascontiguousarray(array, dtype=dtype)


# --- Serializing: in this process or in a pool ------------------------------------------------

class Serializer:
  """Serialized examples in order; batches go to a process pool once the build proves large and
  the pool's workers are up (until then they are serialized here: a build never waits for the
  workers' start-up, ~0.7 s of spawning and imports). `start` starts the pool in the background.
  The builds' one encoder: write_split's, and each Beam worker's (tfds/beam.py, workers=0)."""

  def __init__(self, features: tfds.features.FeaturesDict, workers: int):
    self._plan = plan_of(features)
    self._features = features
    self._workers = workers if self._plan is not None else 0
    self._pool: Optional[concurrent.futures.ProcessPoolExecutor] = None
    self._warm_up: list[concurrent.futures.Future] = []  # One no-op per worker.
    self._pooling = False  # Whether batches go to the pool (once they do, always: in order).
    self._batch: list[dict[str, Any]] = []
    self._batch_bytes = self._seen_bytes = 0
    self._in_flight: collections.deque = collections.deque()
    self._shared = episode_wire.SharedBatches()  # Batches reach the pool in shared memory.
    self._tfds_serializer = None if self._plan is not None else (
        tfds.core.example_serializer.ExampleSerializer(features.get_serialized_info()))

  def add(self, example: EpisodeLike) -> Iterator[episode_wire.Serialized]:
    """Takes one example; yields the serialized examples that are ready, in order: bytes, or
    (from the pool) Frames in shared memory, to be written before the next is asked for."""
    if self._plan is None:  # TFDS's own encoding, one example at a time.
      if isinstance(example, Episode):
        example = example.as_example()
      try:
        yield self._tfds_serializer.serialize_example(
            self._features.encode_example(example))
      except (TypeError, ValueError, KeyError) as e:
        raise errors.SchemaError(f'example does not match the declared features: {e}') from e
      return
    flat = flat_episode(self._plan, example)
    size = sum(value.nbytes for value in flat.values() if isinstance(value, np.ndarray))
    self._batch.append(flat)
    self._batch_bytes += size
    self._seen_bytes += size
    if self._batch_bytes >= BATCH_BYTES:
      yield from self._submit()

  def flush(self) -> Iterator[episode_wire.Serialized]:
    """Every example taken, serialized."""
    if self._plan is None:
      return
    yield from self._submit()
    while self._in_flight:
      yield from self._in_flight.popleft().records()

  def start(self) -> None:
    """Starts the workers without waiting for them, so that they import while examples are read
    (a no-op where this serializer uses no pool or has started it)."""
    if self._pool is not None or self._workers <= 1:
      return
    self._pool = concurrent.futures.ProcessPoolExecutor(
        self._workers, mp_context=multiprocessing.get_context('spawn'),
        initializer=episode_wire.worker_init, initargs=(os.getpid(),))
    with _main_module_hidden():  # The first submit starts the workers.
      self._warm_up = [self._pool.submit(episode_wire.ready) for _ in range(self._workers)]

  def close(self) -> None:
    if self._pool is not None:
      for submitted in self._in_flight:
        submitted.cancel()
      # A pool that took no batch (a small build) is left to exit on its own, unwaited for.
      self._pool.shutdown(wait=self._pooling, cancel_futures=True)
      self._pool = None
    self._in_flight.clear()
    self._shared.close()

  def _submit(self) -> Iterator[episode_wire.Serialized]:
    batch, self._batch, self._batch_bytes = self._batch, [], 0
    if not batch:
      return
    if not self._pooling and self._workers > 1 and self._seen_bytes >= POOL_AFTER_BYTES:
      self.start()
      self._pooling = all(future.done() for future in self._warm_up)
    if not self._pooling:
      yield from episode_wire.serialize(self._plan, batch)
      return
    with _main_module_hidden():  # A submit may start a worker.
      self._in_flight.append(self._shared.submit(self._pool, self._plan, batch))
    while len(self._in_flight) > self._workers or (
        self._in_flight and self._in_flight[0].done()):
      yield from self._in_flight.popleft().records()


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
  """Spawned workers need nothing from __main__; shown it, they would run the caller's script
  again (which may not guard itself with `if __name__ == '__main__'`)."""
  main = sys.modules.get('__main__')
  sys.modules['__main__'] = types.ModuleType('__main__')
  try:
    yield
  finally:
    sys.modules['__main__'] = main


# --- The work directory: completed shards and what they hold ----------------------------------

@dataclasses.dataclass
class _Progress:
  """progress.json: the build's identity, and per split its completed shards and whether it is
  done."""
  identity: dict[str, Any]
  splits: dict[str, dict[str, Any]]

  @classmethod
  def load(cls, directory: str, identity: dict[str, Any]) -> tuple['_Progress', bool]:
    """(progress, whether it continues an earlier build of the same identity)."""
    path = os.path.join(directory, PROGRESS_FILE)
    try:
      with open(path) as f:
        data = json.load(f)
    except (OSError, ValueError):
      return cls(identity, {}), False
    if data.get('identity') != identity:
      return cls(identity, {}), False
    return cls(identity, data.get('splits', {})), True

  def save(self, directory: str) -> None:
    path = os.path.join(directory, PROGRESS_FILE)
    staged = path + '.tmp'
    with open(staged, 'w') as f:
      json.dump(dataclasses.asdict(self), f)
      f.flush()
      os.fsync(f.fileno())
    os.replace(staged, path)

  def shards(self, split: str) -> list[dict[str, Any]]:
    return self.splits.setdefault(split, {'shards': [], 'done': False})['shards']

  @property
  def num_shards(self) -> int:
    return sum(len(value['shards']) for value in self.splits.values())

  @property
  def num_examples(self) -> int:
    return sum(s['examples'] for value in self.splits.values() for s in value['shards'])


class WorkDir:
  """A build's resumable work directory, locked while a build uses it."""

  def __init__(self, version_dir: str, identity: Mapping[str, Any], in_use: str = ''):
    """`in_use`: TFDS's incomplete directory of this build, which is not stale."""
    version_dir = os.fspath(version_dir).rstrip('/')
    self.parent = os.path.dirname(version_dir)
    self.path = os.path.join(self.parent, WORK_DIR_PREFIX + os.path.basename(version_dir))
    os.makedirs(self.path, exist_ok=True)
    self._lock = open(os.path.join(self.path, '.lock'), 'w')  # pylint: disable=consider-using-with
    try:
      fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      self._lock.close()
      raise errors.UnfinishedRecordingError(
          'another build is writing this dataset now', path=self.path) from None
    self.progress, self.resumed = _Progress.load(self.path, json.loads(json.dumps(identity)))
    listed = {s['file'] for value in self.progress.splits.values() for s in value['shards']}
    for name in os.listdir(self.path):  # What a killed build left unlisted.
      if name not in listed and name not in ('.lock', PROGRESS_FILE):
        os.remove(os.path.join(self.path, name))
    self._remove_stale_tfds_dirs(os.path.basename(os.fspath(in_use).rstrip('/')))

  def _remove_stale_tfds_dirs(self, in_use: str) -> None:
    """TFDS's own incomplete.XXXXXX_VERSION directories of killed builds: with the lock held no
    other build uses them, and in a build of ours they only hold links to this directory."""
    suffix = os.path.basename(self.path)[len(WORK_DIR_PREFIX):]
    for name in os.listdir(self.parent):
      if _TFDS_INCOMPLETE.match(name) and name.endswith('_' + suffix) and name != in_use:
        shutil.rmtree(os.path.join(self.parent, name), ignore_errors=True)

  def remove(self) -> None:
    self.release()
    shutil.rmtree(self.path, ignore_errors=True)

  @staticmethod
  def discard_stale(version_dir: str) -> None:
    """Removes the work directory a build killed after its dataset was in place left behind."""
    version_dir = os.fspath(version_dir).rstrip('/')
    path = os.path.join(os.path.dirname(version_dir), WORK_DIR_PREFIX + os.path.basename(version_dir))
    if not os.path.isdir(path) or not os.path.exists(os.path.join(version_dir, 'dataset_info.json')):
      return
    with open(os.path.join(path, '.lock'), 'w') as lock:
      try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        return
      shutil.rmtree(path, ignore_errors=True)

  def release(self) -> None:
    if not self._lock.closed:
      self._lock.close()


# --- Writing a split --------------------------------------------------------------------------

class _StopRequest:
  """SIGTERM/SIGUSR1 while the block runs (main thread only): the writer stops at the next
  example boundary."""

  def __init__(self):
    self.signal_name: Optional[str] = None

  @contextlib.contextmanager
  def installed(self) -> Iterator['_StopRequest']:
    if threading.current_thread() is not threading.main_thread():
      yield self
      return
    previous = {}

    def handler(signum, frame):  # pylint: disable=unused-argument
      self.signal_name = signal.Signals(signum).name

    for name in _STOP_SIGNALS:
      previous[name] = signal.signal(getattr(signal, name), handler)
    try:
      yield self
    finally:
      for name, old in previous.items():
        signal.signal(getattr(signal, name), old if old is not None else signal.SIG_DFL)


def write_split(examples: Iterable[Any], *, features: tfds.features.FeaturesDict, work: WorkDir,
                split: str, workers: Optional[int] = None,
                shard_bytes: int = SHARD_BYTES) -> None:
  """Writes `examples` ((key, example) pairs or examples; keys are ignored) as `split`'s shards in
  `work`, after the shards an earlier run completed. Raises BuildStopped on Ctrl-C or a stop
  signal, after recording what is complete."""
  work.progress.shards(split)  # Registers the split.
  if work.progress.splits[split]['done']:
    return
  serializer = Serializer(features, workers if workers is not None else (os.cpu_count() or 1))
  shards = _ShardWriter(work, split, shard_bytes)
  stop = _StopRequest()
  try:
    serializer.start()  # Its workers start while the first examples are read.
    with stop.installed():
      for index, item in enumerate(examples):
        if index < shards.examples_done:
          continue
        example = item[1] if isinstance(item, tuple) and len(item) == 2 else item
        shards.write_all(serializer.add(example))
        if stop.signal_name:
          break
      shards.write_all(serializer.flush())
      shards.finish()
      shards.wait()
  except KeyboardInterrupt:
    raise shards.stopped('SIGINT') from None
  finally:
    serializer.close()
    shards.drop_open_shard()
    shards.wait()
  if stop.signal_name:
    raise shards.stopped(stop.signal_name)
  work.progress.splits[split]['done'] = True
  work.progress.save(work.path)


class _ShardWriter:
  """Serialized examples -> shards of about `shard_bytes` in the work directory, each listed in
  progress.json once it is complete and in place. A closed shard is completed (fsynced, renamed,
  listed) by a thread, in order, while the next is written: an fsync waits ~50 ms per 64 MiB, and
  the pool's workers would run dry meanwhile."""

  def __init__(self, work: WorkDir, split: str, shard_bytes: int):
    self._work, self._split, self._shard_bytes = work, split, shard_bytes
    self._done = work.progress.shards(split)
    self.examples_done = sum(shard['examples'] for shard in self._done)
    self._index = len(self._done)  # The open shard's.
    self._writer: Any = None
    self._examples = self._bytes = 0
    self._closed: queue.Queue = queue.Queue()  # Shards to complete; None: no more.
    self._completer: Optional[threading.Thread] = None
    self._error: Optional[BaseException] = None

  def write_all(self, serialized: Iterable[episode_wire.Serialized]) -> None:
    """Writes each in turn (a Frames' view of shared memory is not kept beyond this call)."""
    for item in serialized:
      self.write(item)

  def write(self, serialized: episode_wire.Serialized) -> None:
    if isinstance(serialized, tfrecord_files.Frames):
      self._write_frames(serialized)
      return
    self._open().write(serialized)
    self._examples += 1
    self._bytes += len(serialized)
    if self._bytes >= self._shard_bytes:
      self.finish()

  def _write_frames(self, frames: tfrecord_files.Frames) -> None:
    """Records framed by a worker, cut into shards where single records would be."""
    start = 0
    for index, length in enumerate(frames.lengths):
      self._examples += 1
      self._bytes += length
      if self._bytes >= self._shard_bytes:
        self._open().write_frames(frames.cut(start, index + 1))
        start = index + 1
        self.finish()
    if start < len(frames.lengths):
      self._open().write_frames(frames.cut(start, len(frames.lengths)))

  def _open(self) -> tfrecord_files.RecordWriter:
    if self._writer is None:
      self._writer = tfrecord_files.RecordWriter(self._partial_path())
    return self._writer

  def finish(self) -> None:
    """Closes the open shard and has it completed: fsynced, renamed into place, then listed."""
    if self._writer is None:
      return
    self._writer.close()
    self._writer = None
    self._raise_failure()
    if self._completer is None:
      self._completer = threading.Thread(target=self._complete_in_order, daemon=True,
                                         name=f'complete {self._split} shards')
      self._completer.start()
    self._closed.put((self._partial_path(), _shard_name(self._split, self._index),
                      self._examples, self._bytes))
    self._index += 1
    self._examples = self._bytes = 0
    release_free_heap()

  def wait(self) -> None:
    """Waits until every closed shard is complete and listed; raises what failed."""
    if self._completer is not None:
      self._closed.put(None)
      self._completer.join()
      self._completer = None
    self._raise_failure()

  def _complete_in_order(self) -> None:
    while (shard := self._closed.get()) is not None:
      if self._error is None:  # After a failure nothing more is listed.
        try:
          self._complete(*shard)
        except BaseException as e:  # pylint: disable=broad-except  # Raised by the writer.
          self._error = e

  def _complete(self, partial: str, name: str, examples: int, size: int) -> None:
    with open(partial, 'rb') as f:
      os.fsync(f.fileno())
    os.replace(partial, os.path.join(self._work.path, name))
    self._done.append({'file': name, 'examples': examples, 'bytes': size})
    self._work.progress.save(self._work.path)

  def _raise_failure(self) -> None:
    """Raises a completion's failure, again at every later call: it stays, so that the thread
    lists no shard after the failed one (shards closed meanwhile are still in its queue)."""
    if self._error is not None:
      raise self._error

  def drop_open_shard(self) -> None:
    """An interrupted shard is removed: the next run writes it again."""
    if self._writer is not None:
      self._writer.close()
      self._writer = None
      with contextlib.suppress(OSError):
        os.remove(self._partial_path())

  def stopped(self, signal_name: str) -> BuildStopped:
    self.wait()
    progress = self._work.progress
    return BuildStopped(signal_name, progress.num_examples, progress.num_shards, self._work.path)

  def _partial_path(self) -> str:
    return os.path.join(self._work.path, f'.{_shard_name(self._split, self._index)}.partial')


def release_free_heap() -> bool:
  """Hands the C heap's free pages back to the system (glibc's malloc_trim); whether it could.

  Episodes of 3-20 MB of frames are allocated and freed all build long; glibc serves them from its
  heap (its mmap threshold rises to 32 MiB after the first large free) and keeps what they leave
  free, so a non-Beam build's resident memory crept up over the run (a 5x1M-row DQN Replay build:
  ~+70 MiB) while the memory in use stayed flat. Called once a shard (every ~64 MiB written)."""
  trim = _malloc_trim()
  if trim is None:
    return False
  trim(0)
  return True


@functools.lru_cache(maxsize=None)
def _malloc_trim() -> Optional[Any]:
  try:
    trim = ctypes.CDLL(None).malloc_trim
  except (OSError, AttributeError):  # Not glibc (musl, macOS): nothing to hand back this way.
    return None
  trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
  return trim


def _shard_name(split: str, index: int) -> str:
  return f'{split}.shard-{index:05d}.tfrecord'


def publish_split(work: WorkDir, split: str, template: Any, data_dir: str) -> Any:
  """Hard-links `split`'s shards into `data_dir` under TFDS's names; its SplitInfo."""
  shards = work.progress.shards(split)
  if not shards:
    raise errors.EmptyInputError(f'no episodes were generated for split {split!r}',
                                 path=work.path)
  template = template.replace(data_dir=data_dir)
  for index, shard in enumerate(shards):
    target = os.fspath(template.sharded_filepath(shard_index=index, num_shards=len(shards)))
    with contextlib.suppress(FileNotFoundError):
      os.remove(target)
    os.link(os.path.join(work.path, shard['file']), target)
  return tfds.core.SplitInfo(name=split, shard_lengths=[s['examples'] for s in shards],
                             num_bytes=sum(s['bytes'] for s in shards), filename_template=template)


# --- Episodes in memory -----------------------------------------------------------------------

def write_episodes(episodes: Union[Iterable[EpisodeLike], Mapping[str, Iterable[EpisodeLike]]],
                   *,
                   features: tfds.features.FeaturesDict,
                   data_dir: Union[str, os.PathLike],
                   name: str,
                   version: str = '1.0.0',
                   config: Optional[str] = None,
                   split: str = 'train',
                   description: Optional[str] = None) -> str:
  """Writes episodes (or {split: episodes}) as the TFDS dataset `name` under `data_dir`.

  Episodes are `Episode`s or examples {'steps': {...}, **metadata} matching `features` (see
  `rlds_suite.tfds.features.rlds_features`). Returns the dataset's version directory, which
  `rlds_suite.tfds.datasets.load_builder` accepts.
  """
  splits = dict(episodes) if isinstance(episodes, Mapping) else {split: episodes}

  def keyed(split_episodes: Iterable[EpisodeLike]):
    for index, episode in enumerate(split_episodes):
      yield index, episode.as_example() if isinstance(episode, Episode) else dict(episode)

  try:
    builder = tfds.dataset_builders.store_as_tfds_dataset(
        name=name,
        version=version,
        config=config,
        features=features,
        split_datasets={key: keyed(value) for key, value in splits.items()},
        data_dir=os.fspath(data_dir),
        description=description,
        disable_shuffling=True)
  except errors.RLDSSuiteError:
    raise
  except (TypeError, ValueError, KeyError) as e:
    raise errors.SchemaError(f'episodes do not match the declared features: {e}',
                             path=os.path.join(os.fspath(data_dir), name)) from e
  return os.fspath(builder.data_dir)
