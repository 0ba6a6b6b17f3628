"""Provenance of built and recorded datasets, and `rlds-suite verify`."""

import hashlib
import json
import pathlib
import shutil
import time

import pytest
import tensorflow_datasets as tfds

from rlds_suite import cli
from rlds_suite import recording
from rlds_suite.core import errors
from rlds_suite.tfds import datasets
from rlds_suite.tfds import provenance
from rlds_suite.tfds import tfrecord_files

REPO = pathlib.Path(__file__).resolve().parents[1]
MAGICAL_DUMMY = REPO / 'builders' / 'magical_demos' / 'dummy_data'


@pytest.fixture
def built(tmp_path):
  manual_dir = tmp_path / 'manual'
  shutil.copytree(MAGICAL_DUMMY, manual_dir)
  builder = datasets.build('magical_demos/move_to_corner', manual_dir=str(manual_dir),
                           data_dir=str(tmp_path / 'data'))
  return builder, manual_dir


def test_build_records_sources_config_and_files(built):
  builder, manual_dir = built
  record = provenance.read(str(builder.data_dir))
  (run,) = record['runs']
  assert (run['builder'], run['config']['name'], run['config']['task']) == (
      'magical_demos', 'move_to_corner', 'MoveToCorner')
  assert run['rlds_suite_version']
  expected = {p.name: {'size': p.stat().st_size, 'sha256': hashlib.sha256(p.read_bytes()).hexdigest()}
              for p in manual_dir.iterdir()}
  assert record['sources'] == expected
  shards = [name for name in record['dataset_files'] if '.tfrecord' in name]
  assert shards and 'dataset_info.json' in record['dataset_files']


def test_shards_hashed_as_written_match_their_bytes_and_a_changed_one_is_read_again(tmp_path):
  # tfrecord_files.RecordWriter hashes records as it writes them (writev in batches, one piece
  # after a short write); provenance.write takes that digest only while the file is unchanged.
  dataset = tmp_path / 'dataset'
  dataset.mkdir()
  records = [bytes([i % 251]) * (i * 997 % 70_000) for i in range(600)]
  writer = tfrecord_files.RecordWriter(dataset / 'shard.tfrecord')
  for record in records:
    writer.write(record)
  writer.close()
  (dataset / 'linked.tfrecord').hardlink_to(dataset / 'shard.tfrecord')  # As publish_split places.
  assert list(tfrecord_files.read_records(dataset / 'linked.tfrecord')) == records
  written = (dataset / 'shard.tfrecord').read_bytes()
  expected = {'size': len(written), 'sha256': hashlib.sha256(written).hexdigest()}
  files = provenance.write(str(dataset), produced_by={})['dataset_files']
  assert files == {'linked.tfrecord': expected, 'shard.tfrecord': expected}
  time.sleep(0.05)  # Past the file system's timestamp granularity: the change shows in mtime.
  with open(dataset / 'shard.tfrecord', 'r+b') as f:  # Same size, other bytes: hashed again.
    f.write(b'x')
  changed = (dataset / 'shard.tfrecord').read_bytes()
  files = provenance.write(str(dataset), produced_by={})['dataset_files']
  assert files['shard.tfrecord'] == {'size': len(changed),
                                     'sha256': hashlib.sha256(changed).hexdigest()}


def test_digests_remembered_are_bounded_and_a_forgotten_file_is_read_again(tmp_path, monkeypatch):
  # A long-lived writer (the creator) must not keep one digest per file it ever wrote.
  monkeypatch.setattr(provenance, '_written', {})
  monkeypatch.setattr(provenance, '_MAX_REMEMBERED', 2)
  paths = [tmp_path / f'shard{i}.tfrecord' for i in range(3)]
  for i, path in enumerate(paths):
    writer = tfrecord_files.RecordWriter(path)
    writer.write(bytes([i]) * 100)
    writer.close()
  assert len(provenance._written) == 2  # pylint: disable=protected-access
  read = []
  monkeypatch.setattr(provenance, 'open', lambda path, mode: read.append(path) or open(path, mode),
                      raising=False)
  for path in paths:
    data = path.read_bytes()
    assert provenance.digest(path, trust_written=True) == {
        'size': len(data), 'sha256': hashlib.sha256(data).hexdigest()}
  assert read == [paths[0]]  # The oldest was forgotten and hashed from disk; the others were not.


def test_verify_passes_then_names_changed_files(built, capsys):
  builder, manual_dir = built
  directory = str(builder.data_dir)
  assert cli.main(['verify', directory]) == 0
  assert json.loads(capsys.readouterr().out)['sources_checked'] == 2
  shard = next(pathlib.Path(directory).glob('*.tfrecord*'))
  shard.write_bytes(shard.read_bytes()[:-1] + b'\x00')
  source = next(manual_dir.iterdir())
  source.write_bytes(source.read_bytes() + b'x')
  assert cli.main(['verify', directory]) == 1
  out = capsys.readouterr().out
  assert f'DIFFERENT dataset file {shard.name}: size' in out
  assert f'DIFFERENT source {source.name}: size {source.stat().st_size}' in out
  assert json.loads(out.splitlines()[-1])['differences'] == 2


def test_verify_without_sources_checks_the_dataset_and_says_so(built, capsys):
  builder, manual_dir = built
  shutil.rmtree(manual_dir)
  assert cli.main(['verify', str(builder.data_dir)]) == 0
  assert 'not present (pass --manual_dir)' in json.loads(capsys.readouterr().out)['sources_skipped']


def test_recording_records_environment_and_is_named_after_it(tmp_path):
  out = tmp_path / 'rollouts'
  recording.record('gymnasium:CartPole-v1', 'random', episodes=2, data_dir=str(out), seed=3,
                   max_episode_steps=5, progress=False)
  recording.record('gymnasium:CartPole-v1', 'random', episodes=1, data_dir=str(out), seed=4,
                   max_episode_steps=5, progress=False)
  runs = provenance.read(str(out))['runs']
  assert [r['recording']['seed'] for r in runs] == [3, 4]
  assert runs[0]['recording']['env'] == 'gymnasium:CartPole-v1'
  assert runs[0]['recording']['policy'] == 'random'
  assert runs[0]['recording']['episodes_written'] == 2
  assert runs[0]['recording']['started'] <= runs[0]['recording']['ended']
  assert tfds.builder_from_directory(str(out)).info.name == 'gymnasium_cartpole_v1'
  assert provenance.verify(str(out)).ok


def test_missing_provenance_is_a_typed_error(tmp_path):
  with pytest.raises(errors.EmptyInputError, match='no rlds_suite_provenance.json'):
    provenance.verify(str(tmp_path))


def test_magical_without_manual_dir_explains_the_files_and_layout(tmp_path):
  with pytest.raises(Exception) as raised:
    tfds.load('magical_demos/move_to_region', data_dir=str(tmp_path),
              download_and_prepare_kwargs={'download_config': tfds.download.DownloadConfig(
                  manual_dir=str(tmp_path / 'nothing_here'))})
  message = str(raised.value)
  assert 'https://github.com/qxcv/magical-data/archive/master.zip' in message
  assert 'magical-data-master/move-to-region/demo-MoveToRegion-Demo-v0-000.pkl.gz' in message
  assert 'move_to_region: MoveToRegion' in message
