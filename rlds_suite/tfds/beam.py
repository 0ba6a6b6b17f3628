"""Apache Beam builds whose workers write the shards: memory bounded by one example, on any runner.

TFDS's Beam path sends every example through the runner (a GroupByKey into shards), and Beam's
DirectRunner holds each stage's whole output in memory: a DQN Replay checkpoint of 1M rows took
more than 10 GB. Here a builder's Beam split is `WorkerWritten`: small work items, and a function
giving an item's examples. Each worker serializes its item's examples with the non-Beam builds'
encoder (`writing.Serializer`) into TFRecord shards of its own (`tfrecord_files`), importing no
TensorFlow; only the items and the shards' sizes pass through the runner. The driver then names
the shards in item order (so every runner and worker count gives the same dataset) and records
them as the split.

Runners: the DirectRunner in threads (`direct_options`, the default), Beam's Dask runner on a
dask.distributed LocalCluster (`dask_options`, or `--dask_client_address` for a running one), or
any runner's own flags (`runner_options(['--runner=DataflowRunner', ...])`, see the README for
Dataflow, Flink and Spark). A build's Beam and worker logs go to a file (`BeamBuild.log_path`);
the terminal shows one progress bar over all workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import sys
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from etils import epath
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.tfds import tfrecord_files
from rlds_suite.tfds import writing

# A worker starts a new shard file after this many serialized bytes.
MAX_SHARD_BYTES = 256 << 20
PROGRESS_SECONDS = 1.0  # A worker rewrites its progress file at most this often (and at the end).
_PROGRESS_PREFIX = '.progress-'


def _beam() -> Any:
  return tfds.core.lazy_imports.apache_beam


def runner_options(flags: Sequence[str] = (), **options: Any) -> Any:
  """PipelineOptions from command-line `flags` (any runner's, e.g. '--runner=FlinkRunner',
  '--flink_master=HOST:8081') and keyword `options`."""
  return _beam().options.pipeline_options.PipelineOptions(flags=list(flags), **options)


def direct_options(num_workers: int = 2, flags: Sequence[str] = (),
                   processes: bool = False) -> Any:
  """DirectRunner options: `num_workers` worker threads in this process (the default: a worker
  process holds its own Beam, TFDS and builders, ~0.2 GiB), or worker processes with `processes`."""
  return runner_options(flags, runner='DirectRunner', direct_num_workers=num_workers,
                        direct_running_mode='multi_processing' if processes else 'multi_threading')


def dask_options(address: str, flags: Sequence[str] = ()) -> Any:
  """Beam's Dask runner on the dask.distributed scheduler at `address`."""
  from apache_beam.runners.dask import dask_runner  # pylint: disable=g-import-not-at-top
  return runner_options(list(flags) + [f'--dask_client_address={address}'],
                        runner=f'{dask_runner.__name__}.DaskRunner')


@contextlib.contextmanager
def local_dask_cluster(num_workers: int) -> Iterator[str]:
  """A dask.distributed LocalCluster of `num_workers` one-thread worker processes; yields its
  scheduler address."""
  if importlib.util.find_spec('distributed') is None:
    raise errors.MissingDependencyError(
        "the Dask runner needs apache-beam[dask]: pip install 'rlds_suite[tfds_cli]'")
  import distributed  # pylint: disable=g-import-not-at-top
  with distributed.LocalCluster(n_workers=num_workers, threads_per_worker=1, processes=True,
                                dashboard_address=None) as cluster:
    yield cluster.scheduler_address


@contextlib.contextmanager
def options_for(runner: str = 'direct', num_workers: int = 2,
                flags: Sequence[str] = ()) -> Iterator[Callable[[], Any]]:
  """A function making the pipeline options for `runner` (Apache Beam is imported when it is
  called: `datasets.build` calls it only for a builder that needs Beam): 'direct' or 'dask' (on a
  LocalCluster while in the block) with `num_workers` workers, or another Beam runner by name
  ('DataflowRunner', 'FlinkRunner', 'SparkRunner', 'PortableRunner'), configured by its `flags`."""
  if runner == 'dask':
    with local_dask_cluster(num_workers) as address:
      yield lambda: dask_options(address, flags)
  elif runner == 'direct':
    yield lambda: direct_options(num_workers, flags)
  else:
    yield lambda: runner_options(flags, runner=runner)


def download_config(manual_dir: Optional[str] = None, num_workers: int = 2,
                    beam_options: Any = None, **kwargs: Any) -> tfds.download.DownloadConfig:
  """A DownloadConfig carrying Beam runner options (ignored by non-Beam builders): `beam_options`,
  or the DirectRunner with `num_workers` processes when Apache Beam is installed (the tfds_cli
  extra); without it only non-Beam builders can build anyway. TFDS asks on standard input before
  a Beam build without options, so every build passes them."""
  if beam_options is None and importlib.util.find_spec('apache_beam'):
    beam_options = direct_options(num_workers)
  return tfds.download.DownloadConfig(manual_dir=manual_dir, beam_options=beam_options, **kwargs)


@dataclasses.dataclass
class WorkerWritten:
  """A split built by Beam workers: `examples(item)` yields an item's (key, example)s in order.

  `items` and `examples` are pickled to the workers: keep items small (file names, row ranges)
  and `examples` a module-level function (or a functools.partial of one). `total_steps`,
  `total_episodes` and `total_files` (items that are source files), when known, are the progress
  bar's totals.
  """
  items: Sequence[Any]
  examples: Callable[[Any], Iterable[tuple[Any, Any]]]
  total_steps: Optional[int] = None
  total_episodes: Optional[int] = None
  total_files: Optional[int] = None


def per_file(paths: Sequence[str], examples: Callable[[str], Iterable[Any]]) -> WorkerWritten:
  """One work item per source file; `examples(path)` yields its (key, example)s."""
  return WorkerWritten(list(paths), examples, total_files=len(paths))


@dataclasses.dataclass(frozen=True)
class _Shard:
  """A shard a worker wrote: item `item`'s `part`-th file."""
  item: int
  part: int
  path: str
  num_examples: int
  num_bytes: int


@dataclasses.dataclass(frozen=True)
class _Failure:
  """A typed error a worker met, carried back to be raised as itself."""
  item: int
  kind: str
  problem: str
  path: Optional[str]
  field: Optional[str]

  def error(self) -> errors.RLDSSuiteError:
    kind = getattr(errors, self.kind, errors.RLDSSuiteError)
    return kind(self.problem, path=self.path, field=self.field)


class _ProgressFile:
  """A worker's counts (examples and steps written) in a small file the driver polls: rewritten at
  most every `interval` seconds, and by `write` at the end of the item."""

  def __init__(self, path: str, interval: float = PROGRESS_SECONDS,
               clock: Callable[[], float] = time.monotonic):
    self._path, self._interval, self._clock = path, interval, clock
    self._written_at = clock()
    self.examples = self.steps = self.items = 0  # items: 1 once the item is done.

  def add(self, examples: int, steps: int) -> None:
    self.examples += examples
    self.steps += steps
    if self._clock() - self._written_at >= self._interval:
      self.write()

  def write(self) -> None:
    """Replaces the file (the driver never reads half of it)."""
    staged = os.path.join(os.path.dirname(self._path), '.staged' + os.path.basename(self._path))
    with open(staged, 'w') as f:
      json.dump({'examples': self.examples, 'steps': self.steps, 'items': self.items}, f)
    os.replace(staged, self._path)
    self._written_at = self._clock()


class _ItemShards:
  """An item's shard files, `PREFIX.itemINDEX-partPART`: a new one after `max_bytes`."""

  def __init__(self, directory: str, prefix: str, index: int, max_bytes: int):
    self._directory, self._prefix, self._index, self._max_bytes = (
        directory, prefix, index, max_bytes)
    self._part = self._examples = self._bytes = 0
    self._writer: Optional[tfrecord_files.RecordWriter] = None

  def write(self, serialized: bytes) -> Optional[_Shard]:
    """Writes one example; the shard it completed, if it did."""
    if self._writer is None:
      self._writer = tfrecord_files.RecordWriter(self._path())
    self._writer.write(serialized)
    self._examples += 1
    self._bytes += len(serialized)
    return self.close() if self._bytes >= self._max_bytes else None

  def close(self) -> Optional[_Shard]:
    """Closes the open shard; what it holds (None when none was open)."""
    if self._writer is None:
      return None
    self._writer.close()
    self._writer = None
    shard = _Shard(self._index, self._part, self._path(), self._examples, self._bytes)
    self._part += 1
    self._examples = self._bytes = 0
    return shard

  def _path(self) -> str:
    return os.path.join(self._directory,
                        f'{self._prefix}.item{self._index:05d}-part{self._part:04d}')


class _ItemWriter:
  """The worker's job: one item's examples, serialized by the builds' one writer
  (`writing.Serializer`: batch per field with episode_wire, or TFDS's encoder for features it
  cannot plan) into TFRecord shards of at most MAX_SHARD_BYTES named after the item, with no
  TensorFlow; its progress in a small file the driver polls."""

  def __init__(self, split: WorkerWritten, features: tfds.features.FeaturesDict, directory: str,
               prefix: str, max_shard_bytes: int):
    self._examples = split.examples
    self._features = features
    self._directory = directory
    self._prefix = prefix
    self._max_shard_bytes = max_shard_bytes

  def __call__(self, indexed_item: tuple[int, Any]) -> Iterator[Any]:
    index, item = indexed_item
    try:
      yield from self._write(index, item)
    except errors.RLDSSuiteError as e:
      yield _Failure(index, type(e).__name__, e.problem, e.path, e.field)

  def _write(self, index: int, item: Any) -> Iterator[_Shard]:
    serializer = writing.Serializer(self._features, workers=0)
    shards = _ItemShards(self._directory, self._prefix, index, self._max_shard_bytes)
    counts = _ProgressFile(os.path.join(self._directory,
                                        f'{_PROGRESS_PREFIX}{self._prefix}-{index:05d}'))
    try:
      for _, example in self._examples(item):
        steps = progress.num_steps(example)
        for serialized in serializer.add(example):
          yield from _completed(shards.write(serialized))
        counts.add(1, steps)
      for serialized in serializer.flush():
        yield from _completed(shards.write(serialized))
      yield from _completed(shards.close())
      counts.items = 1
    finally:
      serializer.close()
      shards.close()
      counts.write()


def _completed(shard: Optional[_Shard]) -> Iterator[_Shard]:
  if shard is not None:
    yield shard


def _progress_thread(directory: str, prefix: str, totals: progress.Totals,
                     out: Any) -> tuple[threading.Event, threading.Thread]:
  """Polls the workers' progress files into one progress.Bar (on `out`) until set."""
  stop = threading.Event()

  def poll() -> None:
    with progress.Bar(totals, prefix, file=out) as bar:
      while True:
        done = stop.wait(0.5)
        steps = episodes = items = 0
        for path in epath.Path(directory).glob(f'{_PROGRESS_PREFIX}{prefix}-*'):
          with contextlib.suppress(ValueError, OSError):
            counts = json.loads(path.read_text())
            steps, episodes = steps + counts['steps'], episodes + counts['examples']
            items += counts.get('items', 0)
        bar.update_to(episodes, steps, items)
        if done:
          return

  thread = threading.Thread(target=poll, daemon=True)
  thread.start()
  return stop, thread


@contextlib.contextmanager
def _output_to(log_path: str) -> Iterator[Any]:
  """Sends this process's and its children's stderr (Beam's and the workers' logs) to `log_path`;
  yields a stream on the terminal's stderr for the progress bar."""
  sys.stderr.flush()
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  saved = os.dup(2)
  terminal = os.fdopen(os.dup(saved), 'w')
  with open(log_path, 'ab') as log:
    os.dup2(log.fileno(), 2)
    try:
      yield terminal
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      terminal.close()


class BeamBuild:
  """Runs a builder's WorkerWritten splits in one Beam pipeline and returns their SplitInfos."""

  def __init__(self, builder: tfds.core.GeneratorBasedBuilder,
               download_config: tfds.download.DownloadConfig, log_path: str):
    self.builder = builder
    self.download_config = download_config
    self.log_path = log_path

  def run(self, splits: dict[str, WorkerWritten]) -> list[tfds.core.SplitInfo]:
    beam = _beam()
    info = self.builder.info
    info.as_proto.disable_shuffling = True  # Written in work-item order, the same on any runner.
    if info.file_format not in (None, tfds.core.FileFormat.TFRECORD):
      raise errors.SchemaError(f'Beam workers write TFRecord shards, not {info.file_format.value}',
                               path=self.builder.name)
    directory = os.fspath(self.builder.data_path)
    templates = {name: self.builder._get_filename_template(name)  # pylint: disable=protected-access
                 for name in splits}
    options = self.download_config.beam_options or direct_options()
    pipeline = beam.Pipeline(runner=self.download_config.beam_runner, options=options)
    for name, split in splits.items():
      prefix = f'{info.name}-{name}'
      writer = _ItemWriter(split, info.features, directory, prefix, MAX_SHARD_BYTES)
      _ = (pipeline
           | f'{name}: items' >> beam.Create(list(enumerate(split.items)), reshuffle=False)
           | f'{name}: one item a worker' >> beam.Reshuffle()
           | f'{name}: write shards' >> beam.FlatMap(writer)
           | f'{name}: collect' >> beam.combiners.ToList()
           | f'{name}: record' >> beam.Map(_record, path=os.path.join(directory, f'.{prefix}.json')))
    with _output_to(self.log_path) as terminal:
      bars = [_progress_thread(directory, f'{info.name}-{name}',
                               progress.Totals(split.total_episodes, split.total_steps,
                                               split.total_files), terminal)
              for name, split in splits.items()]
      result = None
      try:
        result = pipeline.run()
        result.wait_until_finish()
      except Exception as e:  # pylint: disable=broad-except
        message = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise errors.RLDSSuiteError(f'the Beam pipeline failed: {message} (full log: '
                                    f'{self.log_path})', path=self.builder.name) from e
      finally:
        if getattr(result, 'client', None) is not None:  # The Dask runner's: it leaves it open.
          result.client.close()
        for stop, thread in bars:
          stop.set()
          thread.join()
    return [self._finish(name, templates[name], directory) for name in splits]

  def _finish(self, name: str, template: Any, directory: str) -> tfds.core.SplitInfo:
    """Raises the first worker's typed error, or names the shards in item order."""
    prefix = f'{self.builder.info.name}-{name}'
    record = epath.Path(directory) / f'.{prefix}.json'
    written = json.loads(record.read_text())
    record.unlink()
    for path in epath.Path(directory).glob(f'{_PROGRESS_PREFIX}{prefix}-*'):
      path.unlink()
    failures = [_Failure(**f) for f in written['failures']]
    if failures:
      raise min(failures, key=lambda f: f.item).error()
    shards = sorted((_Shard(**s) for s in written['shards']), key=lambda s: (s.item, s.part))
    for index, shard in enumerate(shards):
      final = template.sharded_filepath(shard_index=index, num_shards=len(shards))
      epath.Path(shard.path).rename(final)
    if not shards:
      raise errors.EmptyInputError(f'no examples for split {name}', path=self.builder.name)
    return tfds.core.SplitInfo(name=name, shard_lengths=[s.num_examples for s in shards],
                               num_bytes=sum(s.num_bytes for s in shards),
                               filename_template=template)


def _record(written: list[Any], path: str) -> None:
  """Writes what the workers returned (shards and failures) for the driver."""
  epath.Path(path).write_text(json.dumps({
      'shards': [dataclasses.asdict(w) for w in written if isinstance(w, _Shard)],
      'failures': [dataclasses.asdict(w) for w in written if isinstance(w, _Failure)]}))


class WorkerWrittenBuilder:
  """Mixin (before RLDSBuilder) for builders whose Beam splits are WorkerWritten.

  While splits are generated, `beam_workers` is the runner's worker count (when its options say,
  else 2), for builders that cut work items to it. After a build, `beam_log_path` names the file
  holding the Beam and worker logs.
  """
  beam_log_path: Optional[str] = None
  beam_workers: int = 2
  _beam: bool = True  # Builders with a non-Beam mode set it from their `beam` argument.

  @property
  def uses_beam(self) -> bool:
    """Whether this build runs a Beam pipeline."""
    return self._beam

  def _generate_splits(self, dl_manager: Any, download_config: tfds.download.DownloadConfig):
    options = (download_config.beam_options.get_all_options()
               if download_config.beam_options is not None else {})
    self.beam_workers = max(1, options.get('direct_num_workers') or 2)
    splits = self._split_generators(dl_manager)
    if not (isinstance(splits, dict) and splits
            and all(isinstance(s, WorkerWritten) for s in splits.values())):
      return super()._generate_splits(dl_manager, download_config)
    root = os.fspath(self._data_dir_root)
    stamp = time.strftime('%Y%m%d-%H%M%S')
    self.beam_log_path = os.path.join(root, 'logs', f'{self.name}-{stamp}-{os.getpid()}.log')
    return BeamBuild(self, download_config, self.beam_log_path).run(splits)


def needs_beam(builder: tfds.core.DatasetBuilder) -> bool:
  """Whether building `builder` runs a Beam pipeline: a WorkerWrittenBuilder in its Beam mode, or a
  builder not of this package (TFDS's own Beam builders). Our other builders write with
  `writing.write_split`."""
  from rlds_suite.tfds import builder_base  # pylint: disable=g-import-not-at-top
  if isinstance(builder, WorkerWrittenBuilder):
    return builder.uses_beam
  return not isinstance(builder, builder_base.RLDSBuilder)


# Builders import this module: if registering them was put off while it was imported, do it now.
rlds_suite.register_deferred_builders(__name__)
