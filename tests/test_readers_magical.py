"""MAGICAL reader: fixture fidelity, values, and every kind of bad input as a typed error."""

import gzip
import pickle
import pickletools
import shutil

import numpy as np
import pytest
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.core import episodes
from rlds_suite.builders.magical_demos import magical_demos_dataset_builder
from rlds_suite.readers import magical
from tests.fixtures import write_magical

DEMO = 'demo-MoveToCorner-Demo-v0-000.pkl.gz'


def _globals(path) -> set:
  """Module-level names a pickle refers to (what an unpickler must resolve)."""
  memo, pushed, found = [], [], set()
  for op, arg, _ in pickletools.genops(gzip.decompress(path.read_bytes())):
    if op.name in ('SHORT_BINUNICODE', 'BINUNICODE', 'UNICODE'):
      pushed.append(arg)
    elif op.name in ('BINGET', 'LONG_BINGET', 'GET'):
      pushed.append(memo[int(arg)])
    elif op.name == 'MEMOIZE':
      memo.append(pushed[-1] if pushed else None)
    elif op.name == 'STACK_GLOBAL':
      found.add(tuple(pushed[-2:]))
    elif op.name == 'GLOBAL':
      found.add(tuple(arg.split(' ')))
    if op.name not in ('SHORT_BINUNICODE', 'BINUNICODE', 'UNICODE', 'BINGET', 'LONG_BINGET', 'GET',
                       'MEMOIZE'):
      pushed.append(None)
  return found


def test_fixture_refers_to_the_same_classes_as_the_real_demo(fixtures, real_data):
  real = _globals(real_data / 'magical' / 'demo-MoveToRegion-Demo-v0-016.pkl.gz')
  ours = _globals(fixtures / 'magical' / DEMO)
  assert ('milbench.baselines.saved_trajectories', 'MILBenchTrajectory') in real
  # numpy 2 names its core module numpy._core where numpy 1 wrote numpy.core.
  assert ours == {(m.replace('numpy.core', 'numpy._core'), n) for m, n in real}


def test_read_demo_values(fixtures):
  trajectory = magical.read_demo(fixtures / 'magical' / DEMO)
  assert trajectory.ending is episodes.Ending.TRUNCATED
  assert trajectory.observations['allo'].shape == (3, 384, 384, 3)
  assert trajectory.final_observation['ego'].shape == (384, 384, 3)
  np.testing.assert_array_equal(trajectory.step_metadata['eval_score'], [0, 0, 1])
  assert trajectory.metadata['env_name'] == 'MoveToCorner-Demo-v0'


def test_real_demo_values(real_data):
  trajectory = magical.read_demo(real_data / 'magical' / 'demo-MoveToRegion-Demo-v0-016.pkl.gz')
  assert len(trajectory.actions) == 40
  assert trajectory.metadata['score'] == 1.0


def _rewrite(path, transform):
  """Edits a fixture demo with MAGICAL's own classes registered, so the globals stay real."""
  write_magical._register_milbench_module()
  with gzip.open(path) as f:
    data = pickle.load(f)  # Our own fixture: trusted.
  transform(data)
  with gzip.open(path, 'wb') as f:
    pickle.dump(data, f, protocol=4)


@pytest.fixture
def demo_copy(tmp_path, fixtures):
  shutil.copy(fixtures / 'magical' / DEMO, tmp_path / DEMO)
  return tmp_path / DEMO


def test_truncated_gzip(demo_copy):
  data = demo_copy.read_bytes()
  demo_copy.write_bytes(data[:len(data) // 2])
  with pytest.raises(errors.CorruptFileError, match=DEMO):
    magical.read_demo(demo_copy)


def test_not_gzip(demo_copy):
  demo_copy.write_bytes(b'plain text, not gzip')
  with pytest.raises(errors.CorruptFileError, match=DEMO):
    magical.read_demo(demo_copy)


def test_missing_key(demo_copy):
  _rewrite(demo_copy, lambda d: d.pop('score'))
  with pytest.raises(errors.SchemaError, match=f'{DEMO}: expected a dict'):
    magical.read_demo(demo_copy)


def test_wrong_image_shape(demo_copy):

  def shrink(d):
    d['trajectory'].obs[1]['ego'] = np.zeros((64, 64, 3), np.uint8)

  _rewrite(demo_copy, shrink)
  with pytest.raises(errors.SchemaError, match="obs: step 1: expected 'ego'"):
    magical.read_demo(demo_copy)


def test_mismatched_lengths(demo_copy):
  _rewrite(demo_copy, lambda d: d['trajectory'].obs.pop())
  with pytest.raises(errors.EpisodeBoundaryError, match=f'{DEMO}: observation'):
    magical.read_demo(demo_copy)


def test_nan_reward(demo_copy):
  _rewrite(demo_copy, lambda d: d['trajectory'].rews.__setitem__(0, float('nan')))
  with pytest.raises(errors.InvalidValueError, match='reward'):
    episodes.to_episode(magical.read_demo(demo_copy))
  builder = magical_demos_dataset_builder.Builder(config='move_to_corner',
                                                  data_dir=str(demo_copy.parent / 'data'))
  with pytest.raises(errors.InvalidValueError, match=f'{DEMO}: reward: non-finite'):
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(demo_copy.parent)))


def test_unknown_pickle_class(tmp_path):
  path = tmp_path / DEMO
  with gzip.open(path, 'wb') as f:
    f.write(b'\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x10magical.entities\x94\x8c\x05Robot\x94\x93\x94.')
  with pytest.raises(errors.UnsafePickleError, match='magical.entities.Robot'):
    magical.read_demo(path)


def test_empty_directory(tmp_path):
  with pytest.raises(errors.EmptyInputError, match=str(tmp_path)):
    magical.demo_paths(tmp_path, 'MoveToCorner')


def test_failed_build_leaves_no_complete_dataset(tmp_path, demo_copy):
  data = demo_copy.read_bytes()
  demo_copy.write_bytes(data[:len(data) // 2])
  data_dir = tmp_path / 'data'
  builder = magical_demos_dataset_builder.Builder(config='move_to_corner', data_dir=str(data_dir))
  with pytest.raises(errors.CorruptFileError):
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(demo_copy.parent)))
  fresh = magical_demos_dataset_builder.Builder(config='move_to_corner', data_dir=str(data_dir))
  assert not fresh.is_prepared()
  assert not list(data_dir.rglob('dataset_info.json'))
