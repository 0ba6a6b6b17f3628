"""Beam builds on real engines (rlds_suite/tfds/beam.py): the DirectRunner's workers and Beam's
Dask runner on a dask.distributed LocalCluster write the same dataset as the single-process build,
record for record, and the Dask worker processes never import TensorFlow; other runners' flags
reach the pipeline; a damaged file is one line naming it.

The run is three batch_rl checkpoints of 1,000 rows written by benchmarks/dqn_replay_data.py (seed
34: episodes of 500-2,700 steps, two of which cross a checkpoint file), built in work items of ~700
rows. One LocalCluster serves the module.
"""

import importlib.util
import pathlib
import sys

import numpy as np
import pytest
import tree
import tensorflow_datasets as tfds

from rlds_suite import cli
from rlds_suite.builders.dqn_replay import dqn_replay_dataset_builder as dqn_builder
from rlds_suite.core import errors
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import datasets
from rlds_suite.tfds import tfrecord_files

pytest.importorskip('apache_beam')

_DATA_WRITER = pathlib.Path(__file__).resolve().parents[1] / 'benchmarks' / 'dqn_replay_data.py'
_spec = importlib.util.spec_from_file_location('dqn_replay_data', _DATA_WRITER)
dqn_replay_data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dqn_replay_data)

ROWS, CHECKPOINTS, ITEM_ROWS, SEED = 1_000, 3, 700, 34


@pytest.fixture(scope='module')
def manual_dir(tmp_path_factory) -> pathlib.Path:
  out = tmp_path_factory.mktemp('replay')
  with _quiet():
    return dqn_replay_data.write_run(out, ROWS, CHECKPOINTS, seed=SEED)


class _quiet:
  """Hides the data writer's per-file lines."""

  def __enter__(self):
    self._stdout, sys.stdout = sys.stdout, open('/dev/null', 'w')

  def __exit__(self, *exc_info):
    sys.stdout.close()
    sys.stdout = self._stdout


def _build(manual_dir, data_dir, beam_options=None, beam=True) -> tfds.core.DatasetBuilder:
  builder = dqn_builder.Builder(config='Pong-run1', data_dir=str(data_dir), beam=beam)
  builder.beam_item_rows = ITEM_ROWS
  builder.download_and_prepare(download_config=rlds_beam.download_config(
      str(manual_dir), beam_options=beam_options))
  return builder


def _episodes(builder) -> list[dict]:
  """Episodes in the order the dataset holds them, decoded."""
  return list(datasets.numpy_episodes(builder.as_dataset(split='train', shuffle_files=False)))


def _records(builder) -> list[bytes]:
  """The dataset's serialized examples, sorted: the non-Beam build holds an episode that crosses
  a checkpoint file after that checkpoint's own (one pass over the files); Beam, in add order."""
  split = builder.info.splits['train']
  return sorted(record for path in split.filepaths for record in tfrecord_files.read_records(path))


def _assert_same(episodes, reference) -> None:
  """The same episodes (keyed by their first add index), value for value."""
  by_key = {int(e['first_add_index']): e for e in reference}
  assert sorted(int(e['first_add_index']) for e in episodes) == sorted(by_key)
  for episode in episodes:
    tree.map_structure(np.testing.assert_array_equal, episode, by_key[int(episode['first_add_index'])])


@pytest.fixture(scope='module')
def single_process_build(manual_dir, tmp_path_factory) -> tfds.core.DatasetBuilder:
  """The reference: the build without Beam (tfds/writing.py), in this process."""
  return _build(manual_dir, tmp_path_factory.mktemp('single'), beam=False)


@pytest.fixture(scope='module')
def single_process(single_process_build) -> list[dict]:
  return _episodes(single_process_build)


@pytest.fixture(scope='module')
def dask_address():
  """A LocalCluster of 2 worker processes for the module."""
  pytest.importorskip('distributed')  # The tfds_cli extra's apache-beam[dask].
  with rlds_beam.local_dask_cluster(2) as address:
    yield address


@pytest.fixture(scope='module')
def dask_build(manual_dir, tmp_path_factory, dask_address) -> tfds.core.DatasetBuilder:
  options = rlds_beam.dask_options(dask_address)
  assert options.get_all_options()['runner'].endswith('.DaskRunner')
  return _build(manual_dir, tmp_path_factory.mktemp('dask'), options)


def test_plan_has_several_items_and_crosses_files(manual_dir):
  """The fixture exercises what the engines must get right: several work items, episodes that
  continue into the next checkpoint's files."""
  split = dqn_builder._beam_split(  # pylint: disable=protected-access
      str(manual_dir / 'Pong' / '1' / 'replay_logs'), None, ITEM_ROWS)
  assert len(split.items) >= 3
  spans = [span for item in split.items for span in item]
  assert any(span.first_add < ROWS < span.end_add for span in spans)


def test_dask_engine_build_equals_the_single_process_build(dask_build, single_process,
                                                           single_process_build):
  """Decoded values (PNG frames, nested episode metadata) and the serialized bytes: one writer."""
  episodes = _episodes(dask_build)
  _assert_same(episodes, single_process)
  assert len(dask_build.info.splits['train'].shard_lengths) >= 3  # At least a shard per item.
  # Shards are named in work-item order, so the engine does not change the dataset's order.
  assert [int(e['first_add_index']) for e in episodes] == sorted(
      int(e['first_add_index']) for e in episodes)
  assert _records(dask_build) == _records(single_process_build)


def test_dask_worker_processes_write_without_tensorflow(dask_build, dask_address):
  """The workers that wrote the shards (they hold the writer's modules) never loaded TensorFlow."""
  import distributed  # pylint: disable=g-import-not-at-top

  def loaded():  # Local, so it is pickled by value: the worker imports nothing of this module.
    modules = sys.modules
    return {name: name in modules for name in ('tensorflow', 'rlds_suite.tfds.beam')}

  with distributed.Client(dask_address) as client:
    workers = client.run(loaded)
  assert len(workers) == 2
  assert any(found['rlds_suite.tfds.beam'] for found in workers.values()), workers
  assert not any(found['tensorflow'] for found in workers.values()), workers


def test_direct_runner_workers_via_the_cli_equal_the_single_process_build(
    manual_dir, tmp_path, single_process, single_process_build, capfd, monkeypatch):
  """`rlds-suite build --beam_runner direct --workers 2`: the same episodes; the terminal gets a
  few lines and the name of the file holding Beam's and the workers' logs."""
  monkeypatch.setattr(dqn_builder.Builder, 'beam_item_rows', ITEM_ROWS)
  code = cli.main(['build', 'dqn_replay/Pong-run1', '--manual_dir', str(manual_dir), '--data_dir',
                   str(tmp_path), '--beam_runner', 'direct', '--workers', '2'])
  out, err = capfd.readouterr()
  assert code == 0, err
  log_line = next(line for line in out.splitlines() if line.startswith('Beam and worker logs: '))
  assert pathlib.Path(log_line.split(': ', 1)[1]).is_file()
  assert len((out + err).splitlines()) < 30, out + err
  built = datasets.load_builder(str(tmp_path / 'dqn_replay' / 'Pong-run1' / '1.0.0'))
  _assert_same(_episodes(built), single_process)
  assert _records(built) == _records(single_process_build)


@pytest.mark.parametrize('runner, flags, expected', [
    ('DataflowRunner', ['--project=my-project', '--region=europe-west4',
                        '--temp_location=gs://bucket/tmp', '--num_workers=50'],
     {'project': 'my-project', 'region': 'europe-west4', 'num_workers': 50}),
    ('FlinkRunner', ['--flink_master=localhost:8081', '--environment_type=LOOPBACK',
                     '--parallelism=8'],
     {'flink_master': 'localhost:8081', 'environment_type': 'LOOPBACK', 'parallelism': 8}),
    ('SparkRunner', ['--spark_master_url=spark://host:7077', '--environment_type=DOCKER'],
     {'spark_master_url': 'spark://host:7077', 'environment_type': 'DOCKER'}),
])
def test_runner_flags_reach_the_pipeline_from_the_cli(runner, flags, expected, monkeypatch,
                                                      manual_dir):
  """`--beam_runner NAME --beam_options '...'` arrive as the build's pipeline options."""
  seen = {}

  class Stop(Exception):
    pass

  def build(name, manual_dir=None, data_dir=None, beam_options=None):
    seen.update(beam_options().get_all_options())  # beam.options_for yields a function.
    raise Stop

  monkeypatch.setattr(datasets, 'build', build)
  with pytest.raises(Stop):
    cli.main(['build', 'dqn_replay/Pong-run1', '--manual_dir', str(manual_dir), '--beam_runner',
              runner, '--beam_options', ' '.join(flags)])
  assert seen['runner'] == runner
  assert {key: seen[key] for key in expected} == expected


def test_damaged_file_is_one_line_naming_it(manual_dir, tmp_path, capsys, monkeypatch):
  """A truncated frame file fails in a worker: the CLI prints the CorruptFileError, one line."""
  damaged = tmp_path / 'manual'
  logs = damaged / 'Pong' / '1' / 'replay_logs'
  logs.mkdir(parents=True)
  for path in (manual_dir / 'Pong' / '1' / 'replay_logs').iterdir():
    (logs / path.name).write_bytes(path.read_bytes())
  frames = logs / '$store$_observation_ckpt.1.gz'
  frames.write_bytes(frames.read_bytes()[:len(frames.read_bytes()) // 2])
  monkeypatch.setattr(dqn_builder.Builder, 'beam_item_rows', ITEM_ROWS)
  code = cli.main(['build', 'dqn_replay/Pong-run1', '--manual_dir', str(damaged), '--data_dir',
                   str(tmp_path / 'out'), '--workers', '2'])
  err = capsys.readouterr().err
  assert code == 2
  assert [line for line in err.splitlines() if line.strip()] == [err.strip()], err
  assert err.startswith('error: CorruptFileError: ') and str(frames) in err, err
  assert not dqn_builder.Builder(config='Pong-run1', data_dir=str(tmp_path / 'out')).is_prepared()


def test_worker_errors_come_back_typed():
  """What a worker sends back rebuilds the typed error, file and field included."""
  error = errors.CorruptFileError('truncated', path='/x/f.gz', field='observation')
  failure = rlds_beam._Failure(3, type(error).__name__, error.problem, error.path, error.field)  # pylint: disable=protected-access
  rebuilt = failure.error()
  assert type(rebuilt) is errors.CorruptFileError and str(rebuilt) == str(error)
