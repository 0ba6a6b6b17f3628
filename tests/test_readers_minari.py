"""rlds_suite.readers.minari against Minari's own loader on datasets written by Minari itself
(tests/fixtures/write_minari.py: create_dataset_from_buffers, both storage backends)."""

import json
import pathlib
import shutil

import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.readers import minari as minari_reader

ROOT = pathlib.Path(__file__).resolve().parent / 'fixtures' / 'minari'
DATASETS = ['cartpole/random-hdf5-v0', 'cartpole/random-arrow-v0',
            'synthetic/dict-image-hdf5-v0', 'synthetic/dict-image-arrow-v0',
            'synthetic/tuple-hdf5-v0', 'synthetic/tuple-arrow-v0']


def _with_final(steps, final):
  if isinstance(steps, dict):
    return {key: _with_final(steps[key], final[key]) for key in steps}
  return np.concatenate([steps, np.asarray(final)[None]])


def _assert_nested_equal(ours, theirs):
  if isinstance(theirs, tuple):  # Tuple spaces are read as dicts keyed '0', '1', ...
    theirs = {str(j): value for j, value in enumerate(theirs)}
  if isinstance(theirs, dict):
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
      _assert_nested_equal(ours[key], theirs[key])
  else:
    np.testing.assert_array_equal(ours, theirs)
    assert np.asarray(ours).dtype == np.asarray(theirs).dtype


@pytest.mark.parametrize('dataset_id', DATASETS)
def test_same_episodes_as_minari_loader(dataset_id, monkeypatch):
  monkeypatch.setenv('MINARI_DATASETS_PATH', str(ROOT))
  import minari  # pylint: disable=g-import-not-at-top  # The test extra installs it (the fixtures' writer).
  theirs = list(minari.load_dataset(dataset_id).iterate_episodes())
  ours = list(minari_reader.read_trajectories(minari_reader.find_dataset(dataset_id)))
  assert len(ours) == len(theirs) > 0
  for a, b in zip(ours, theirs):
    _assert_nested_equal(_with_final(a.observations, a.final_observation), b.observations)
    _assert_nested_equal(a.actions, b.actions)
    np.testing.assert_array_equal(a.rewards, b.rewards)
    # Terminations and truncations stay apart: terminated iff Minari's last step terminated.
    expected = episodes.Ending.TERMINATED if b.terminations[-1] else episodes.Ending.TRUNCATED
    assert a.ending is expected
    assert a.metadata['episode_id'] == b.id


def test_endings_and_rlds_steps():
  data = minari_reader.find_dataset('cartpole/random-hdf5-v0', ROOT)
  trajectories = list(minari_reader.read_trajectories(data))
  # Seeded CartPole rollouts with a 15-step limit: two hit the limit, two fell over.
  assert [t.ending for t in trajectories] == [
      episodes.Ending.TRUNCATED, episodes.Ending.TERMINATED,
      episodes.Ending.TRUNCATED, episodes.Ending.TERMINATED]
  assert [len(t.rewards) for t in trajectories] == [15, 9, 15, 9]
  assert [t.metadata['seed'] for t in trajectories] == [0, 1, 2, 3]
  truncated, terminated = (episodes.to_episode(t).steps for t in trajectories[:2])
  assert len(terminated[fields.IS_FIRST]) == 10  # 9 actions + the final observation.
  assert terminated[fields.IS_TERMINAL][-1] and terminated[fields.DISCOUNT][-2] == 0
  assert not truncated[fields.IS_TERMINAL].any() and (truncated[fields.DISCOUNT] == 1).all()
  assert truncated[fields.IS_LAST][-1]


def test_metadata_and_spaces():
  meta = minari_reader.read_metadata(minari_reader.find_dataset('synthetic/dict-image-arrow-v0',
                                                                ROOT))
  assert meta.data_format == 'arrow' and meta.jpeg_encoding
  assert meta.observation_space == {
      'image': minari_reader.Box((32, 32, 3), np.dtype(np.uint8), image=True),
      'mode': minari_reader.Discrete(3),
      'state': minari_reader.Box((3,), np.dtype(np.float64))}
  cartpole = minari_reader.read_metadata(minari_reader.find_dataset('cartpole/random-hdf5-v0', ROOT))
  assert (cartpole.raw['ref_min_score'], cartpole.raw['ref_max_score']) == (9.0, 15.0)
  assert json.loads(cartpole.raw['env_spec'])['max_episode_steps'] == 15


def test_found_by_name_in_env_root(monkeypatch):
  monkeypatch.setenv('MINARI_DATASETS_PATH', str(ROOT))
  assert minari_reader.find_dataset('cartpole/random-arrow-v0') == (
      ROOT / 'cartpole' / 'random-arrow-v0' / 'data')
  with pytest.raises(errors.EmptyInputError, match='no-such/dataset-v0'):
    minari_reader.find_dataset('no-such/dataset-v0')


def _copy(tmp_path, dataset_id):
  target = tmp_path / dataset_id
  shutil.copytree(ROOT / dataset_id, target)
  return target / 'data'


def _declare(data, key, space):
  path = data / 'metadata.json'
  metadata = json.loads(path.read_text())
  metadata[key] = json.dumps(space)
  path.write_text(json.dumps(metadata))


@pytest.mark.parametrize('dataset_id', ['cartpole/random-hdf5-v0', 'cartpole/random-arrow-v0'])
def test_metadata_naming_a_different_space(tmp_path, dataset_id):
  data = _copy(tmp_path, dataset_id)
  _declare(data, 'observation_space',
           {'type': 'Box', 'dtype': 'float32', 'shape': [6], 'low': [0] * 6, 'high': [1] * 6})
  with pytest.raises(errors.SchemaError, match=r'declares shape \(6,\)') as e:
    list(minari_reader.read_trajectories(data))
  assert e.value.path.endswith(('main_data.hdf5', 'part-0.arrow'))
  assert 'observations' in e.value.field


@pytest.mark.parametrize('dataset_id', ['synthetic/dict-image-hdf5-v0',
                                        'synthetic/dict-image-arrow-v0'])
def test_metadata_naming_other_dict_keys(tmp_path, dataset_id):
  data = _copy(tmp_path, dataset_id)
  _declare(data, 'observation_space', {'type': 'Dict', 'subspaces': {
      'pixels': {'type': 'Discrete', 'dtype': 'int64', 'start': 0, 'n': 3}}})
  with pytest.raises(errors.SchemaError, match=r"declares keys \['pixels'\]") as e:
    list(minari_reader.read_trajectories(data))
  assert e.value.path.endswith(('main_data.hdf5', 'part-0.arrow'))


def test_discrete_values_outside_the_space(tmp_path):
  data = _copy(tmp_path, 'cartpole/random-hdf5-v0')
  _declare(data, 'action_space', {'type': 'Discrete', 'dtype': 'int64', 'start': 0, 'n': 1})
  with pytest.raises(errors.SchemaError, match=r'outside Discrete\(1'):
    list(minari_reader.read_trajectories(data))


def test_truncated_hdf5(tmp_path):
  data = _copy(tmp_path, 'cartpole/random-hdf5-v0')
  path = data / 'main_data.hdf5'
  path.write_bytes(path.read_bytes()[:3000])
  with pytest.raises(errors.CorruptFileError) as e:
    list(minari_reader.read_trajectories(data))
  assert e.value.path == str(path)


def test_corrupt_arrow(tmp_path):
  data = _copy(tmp_path, 'cartpole/random-arrow-v0')
  path = data / '2' / 'part-0.arrow'
  path.write_bytes(path.read_bytes()[:200])
  with pytest.raises(errors.CorruptFileError) as e:
    list(minari_reader.read_trajectories(data))
  assert e.value.path == str(path)


def test_flag_before_the_last_step(tmp_path):
  import h5py  # pylint: disable=g-import-not-at-top
  data = _copy(tmp_path, 'cartpole/random-hdf5-v0')
  with h5py.File(data / 'main_data.hdf5', 'a') as f:
    f['episode_1/truncations'][3] = True
  with pytest.raises(errors.EpisodeBoundaryError, match=r'before the last step, at steps \[3\]'):
    list(minari_reader.read_trajectories(data))


def test_bad_metadata_json(tmp_path):
  data = _copy(tmp_path, 'cartpole/random-hdf5-v0')
  (data / 'metadata.json').write_text('{"observation_space": ')
  with pytest.raises(errors.CorruptFileError, match='metadata.json'):
    minari_reader.read_metadata(data)


def test_jpeg_flag_missing_and_images_raw(tmp_path):
  """A dataset written without JPEG and without the flag (as before Minari had it): Minari's default
  (true) does not fit the raw images; declaring jpeg_encoding=False reads them."""
  data = _copy(tmp_path, 'synthetic/dict-image-hdf5-v0')
  import h5py  # pylint: disable=g-import-not-at-top
  decoded = list(minari_reader.read_trajectories(data))
  with h5py.File(data / 'main_data.hdf5', 'a') as f:
    for i, t in enumerate(decoded):
      del f[f'episode_{i}/observations/image']
      f[f'episode_{i}/observations/image'] = np.concatenate(
          [t.observations['image'], t.final_observation['image'][None]])
  path = data / 'metadata.json'
  metadata = json.loads(path.read_text())
  del metadata['jpeg_encoding']
  path.write_text(json.dumps(metadata))
  with pytest.raises(errors.SchemaError, match='raw images of') as e:
    list(minari_reader.read_trajectories(data))
  assert e.value.field == 'episode_0/observations/image'
  raw = list(minari_reader.read_trajectories(data, jpeg_encoding=False))
  for a, b in zip(raw, decoded):
    np.testing.assert_array_equal(a.observations['image'], b.observations['image'])
  (data / 'metadata.json').write_text(json.dumps({**metadata, 'jpeg_encoding': True}))
  with pytest.raises(errors.SchemaError, match='jpeg_encoding=False was declared'):
    minari_reader.read_metadata(data, jpeg_encoding=False)


@pytest.mark.parametrize('dataset_id', ['synthetic/dict-image-hdf5-v0',
                                        'synthetic/dict-image-arrow-v0'])
def test_metadata_declaring_a_narrower_dtype(tmp_path, dataset_id):
  data = _copy(tmp_path, dataset_id)
  space = json.loads(json.loads((data / 'metadata.json').read_text())['observation_space'])
  space['subspaces']['state']['dtype'] = 'float32'  # The file stores float64.
  _declare(data, 'observation_space', space)
  with pytest.raises(errors.SchemaError, match='declares float32, the file stores float64') as e:
    list(minari_reader.read_trajectories(data))
  assert e.value.field.endswith('observations/state')


def test_tuple_and_multi_discrete_spaces():
  meta = minari_reader.read_metadata(minari_reader.find_dataset('synthetic/tuple-hdf5-v0', ROOT))
  assert meta.observation_space == (minari_reader.Box((2,), np.dtype(np.float32)),
                                    minari_reader.Discrete(4, start=1))
  assert meta.action_space == minari_reader.Box((2,), np.dtype(np.int64))
  first = next(minari_reader.trajectories(meta))
  assert sorted(first.observations) == ['0', '1']
  assert first.observations['1'].min() >= 1 and first.observations['1'].max() <= 4



@pytest.mark.parametrize('dataset_id', ['cartpole/random-hdf5-v0', 'cartpole/random-arrow-v0'])
def test_an_episode_missing_from_the_declared_total_is_refused(tmp_path, dataset_id):
  # metadata.json says total_episodes 4; before, the 3 left were built without a word.
  import h5py  # pylint: disable=g-import-not-at-top
  data = _copy(tmp_path, dataset_id)
  if dataset_id.endswith('hdf5-v0'):
    with h5py.File(data / 'main_data.hdf5', 'a') as f:
      del f['episode_2']
  else:
    shutil.rmtree(data / '2')
  with pytest.raises(errors.SchemaError, match=r"total_episodes: metadata.json declares "
                     r"total_episodes 4, the data holds 3 episodes \(missing \['episode_2'\]"):
    list(minari_reader.read_trajectories(data))
  with pytest.raises(errors.SchemaError, match='total_episodes'):
    minari_reader.episode_ids(minari_reader.read_metadata(data))


@pytest.mark.parametrize('dataset_id', ['cartpole/random-hdf5-v0', 'cartpole/random-arrow-v0'])
def test_steps_differing_from_the_declared_total_are_refused(tmp_path, dataset_id):
  data = _copy(tmp_path, dataset_id)
  path = data / 'metadata.json'
  metadata = json.loads(path.read_text())
  assert metadata['total_steps'] == 48
  metadata['total_steps'] = 47
  path.write_text(json.dumps(metadata))
  with pytest.raises(errors.SchemaError, match='declares total_steps 47, the episodes hold 48'):
    list(minari_reader.read_trajectories(data))
