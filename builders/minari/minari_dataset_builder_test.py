"""minari over datasets written by Minari's own create_dataset_from_buffers
(tests/fixtures/write_minari.py; dummy_data holds the HDF5 CartPole set), read back and compared
with Minari's own loader."""

import json
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite import scores
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.tfds import datasets
from rlds_suite.builders.minari import minari_dataset_builder

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'
FIXTURES = pathlib.Path(__file__).resolve().parents[2] / 'tests' / 'fixtures' / 'minari'


def _build(dataset_id: str, root: pathlib.Path, data_dir: pathlib.Path):
  builder = minari_dataset_builder.Builder(dataset_id=dataset_id, minari_root=str(root),
                                           data_dir=str(data_dir))
  builder.download_and_prepare()
  return builder


def _episodes(builder) -> list:
  found = list(datasets.numpy_episodes(builder.as_dataset(split='train')))
  return sorted(found, key=lambda episode: int(episode['episode_id']))


@pytest.mark.parametrize('dataset_id,root', [
    ('cartpole/random-hdf5-v0', DUMMY_DATA),
    ('cartpole/random-arrow-v0', FIXTURES),
    ('synthetic/dict-image-hdf5-v0', FIXTURES),
    ('synthetic/dict-image-arrow-v0', FIXTURES),
    ('synthetic/tuple-hdf5-v0', FIXTURES),
])
def test_same_steps_as_minari_loader(dataset_id, root, tmp_path, monkeypatch):
  import minari  # pylint: disable=g-import-not-at-top  # The test extra installs it.
  monkeypatch.setenv('MINARI_DATASETS_PATH', str(root))
  theirs = list(minari.load_dataset(dataset_id).iterate_episodes())
  builder = _build(dataset_id, root, tmp_path)
  rlds_suite.validate(builder).raise_if_invalid()
  ours = _episodes(builder)
  assert len(ours) == len(theirs)
  for episode, expected in zip(ours, theirs):
    steps = episode[fields.STEPS]
    n = len(expected.rewards)
    assert len(steps[fields.REWARD]) == n + 1  # The final observation is an extra last step.
    observations = expected.observations
    if isinstance(observations, tuple):  # Stored as a dict keyed '0', '1', ...
      observations = {str(j): value for j, value in enumerate(observations)}
    if isinstance(observations, dict):
      for key, value in observations.items():
        np.testing.assert_array_equal(steps[fields.OBSERVATION][key], value)
    else:
      np.testing.assert_array_equal(steps[fields.OBSERVATION], observations)
    np.testing.assert_array_equal(steps[fields.ACTION][:n], expected.actions)
    np.testing.assert_array_equal(steps[fields.REWARD][:n], expected.rewards)  # float64, exact.
    assert steps[fields.IS_TERMINAL][-1] == expected.terminations[-1]
    assert steps[fields.IS_LAST][-1] and not steps[fields.IS_LAST][:-1].any()
    discounts = steps[fields.DISCOUNT]
    if expected.terminations[-1]:
      assert discounts[n - 1] == 0
    else:  # Truncated (time limit, or no flag at all): discounts stay 1.
      assert (discounts == 1).all()


def test_dataset_metadata_holds_the_reference(tmp_path):
  builder = _build('cartpole/random-hdf5-v0', DUMMY_DATA, tmp_path)
  assert builder.builder_config.name == 'cartpole.random-hdf5-v0'
  stored = scores.directory_metadata(builder.data_dir)
  assert (stored['ref_min_score'], stored['ref_max_score']) == (9.0, 15.0)
  assert stored['dataset_id'] == 'cartpole/random-hdf5-v0'
  assert json.loads(stored['env_spec'])['id'] == 'CartPole-v1'
  # A return of 12 is half way between the dataset's refs (9, 15).
  np.testing.assert_allclose(scores.normalize('minari/cartpole.random-hdf5-v0', [12.0], stored),
                             [0.5])
  episodes = _episodes(builder)
  returns = [episode[fields.STEPS][fields.REWARD].sum() for episode in episodes]
  assert returns == [15.0, 9.0, 15.0, 9.0]  # CartPole pays 1 per step.


def test_found_by_name_through_env(tmp_path, monkeypatch):
  monkeypatch.setenv('MINARI_DATASETS_PATH', str(DUMMY_DATA))
  builder = tfds.builder('minari', dataset_id='cartpole/random-hdf5-v0', data_dir=str(tmp_path))
  builder.download_and_prepare()
  assert builder.info.splits['train'].num_examples == 4
  # The config name alone names the dataset too (tfds.builder, tfds.load).
  again = tfds.builder('minari/cartpole.random-hdf5-v0', data_dir=str(tmp_path))
  assert again.is_prepared()
  assert again.data_dir == builder.data_dir
  assert scores.directory_reference(again.data_dir).normalize(12.0) == 0.5


def test_mismatched_space_leaves_nothing_prepared(tmp_path):
  root = tmp_path / 'root'
  shutil.copytree(DUMMY_DATA, root)
  metadata_path = root / 'cartpole' / 'random-hdf5-v0' / 'data' / 'metadata.json'
  metadata = json.loads(metadata_path.read_text())
  metadata['observation_space'] = json.dumps(
      {'type': 'Box', 'dtype': 'float32', 'shape': [5], 'low': [0] * 5, 'high': [1] * 5})
  metadata_path.write_text(json.dumps(metadata))
  with pytest.raises(errors.SchemaError, match='main_data.hdf5'):
    _build('cartpole/random-hdf5-v0', root, tmp_path / 'out')
  builder = minari_dataset_builder.Builder(dataset_id='cartpole/random-hdf5-v0',
                                           minari_root=str(root), data_dir=str(tmp_path / 'out'))
  assert not builder.is_prepared()


@pytest.mark.timeout(600)
def test_beam_build_equals_single_process_build(tmp_path):
  """DirectRunner in multi-processing mode, 2 workers: the same episodes as the plain build."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top  # tfds_cli extra, in `all`.
  dataset_id = 'synthetic/dict-image-arrow-v0'
  plain = _build(dataset_id, FIXTURES, tmp_path / 'plain')
  builder = minari_dataset_builder.Builder(dataset_id=dataset_id, minari_root=str(FIXTURES),
                                           data_dir=str(tmp_path / 'beam'), beam=True)
  builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
      beam_options=beam.options.pipeline_options.PipelineOptions(
          flags=[], runner='DirectRunner', direct_num_workers=2,
          direct_running_mode='multi_processing')))
  ours, theirs = _episodes(builder), _episodes(plain)
  assert len(ours) == len(theirs) == 3
  for a, b in zip(ours, theirs):
    assert a['episode_id'] == b['episode_id']
    for key in (fields.ACTION, fields.REWARD, fields.DISCOUNT, fields.IS_TERMINAL, fields.IS_LAST):
      np.testing.assert_array_equal(a[fields.STEPS][key], b[fields.STEPS][key])
    for key in ('image', 'state', 'mode'):
      np.testing.assert_array_equal(a[fields.STEPS][fields.OBSERVATION][key],
                                    b[fields.STEPS][fields.OBSERVATION][key])



def test_nan_reward_names_the_file(tmp_path):
  import h5py  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  root = tmp_path / 'root'
  shutil.copytree(DUMMY_DATA, root)
  path = root / 'cartpole' / 'random-hdf5-v0' / 'data' / 'main_data.hdf5'
  with h5py.File(path, 'a') as f:
    f['episode_1/rewards'][2] = np.nan
  with pytest.raises(errors.InvalidValueError, match=r'non-finite values at steps \[2\]') as e:
    _build('cartpole/random-hdf5-v0', root, tmp_path / 'out')
  assert e.value.path == str(path)


def test_observations_outside_the_box_are_a_counted_warning(tmp_path):
  import h5py  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  root = tmp_path / 'root'
  shutil.copytree(DUMMY_DATA, root)
  with h5py.File(root / 'cartpole' / 'random-hdf5-v0' / 'data' / 'main_data.hdf5', 'a') as f:
    f['episode_1/observations'][2, 0] = 10.0  # CartPole's cart position is within [-4.8, 4.8].
  builder = _build('cartpole/random-hdf5-v0', root, tmp_path / 'out')
  assert builder.info.metadata['spaces']['action'] == {'discrete': {'n': 2, 'start': 0}}
  report = datasets.validate(builder)
  assert report.ok
  (warning,) = report.warnings
  assert (warning.episode, warning.step, warning.field, warning.kind) == (
      1, 2, 'observation', 'outside the declared Box bounds')
