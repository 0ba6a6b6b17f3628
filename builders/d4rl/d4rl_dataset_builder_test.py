"""d4rl over dummy_data (written by tests/fixtures/write_d4rl.py, like D4RL's own writers)."""

import pathlib
import shutil

import h5py
import numpy as np
import tensorflow_datasets as tfds

import rlds_suite
import rlds_suite.tfds.datasets  # rlds_suite loads it lazily; the tests use it by path.
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.builders.d4rl import d4rl_dataset_builder

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'
NO_TIMEOUTS = pathlib.Path(__file__).resolve().parents[2] / 'tests' / 'fixtures' / 'd4rl' / (
    'no_timeouts.hdf5')


class D4RLTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = d4rl_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['halfcheetah-medium-v2', 'hopper-medium-replay-v2',
                                  'walker2d-random-v2']
  SPLITS = {'train': 5}


def _raw(path: pathlib.Path) -> dict:
  with h5py.File(path, 'r') as f:
    return {key: f[key][()] for key in ('observations', 'actions', 'rewards', 'terminals')}


class D4RLValuesTest(tfds.testing.TestCase):

  def _build(self, config: str, manual_dir: pathlib.Path, **kwargs) -> tfds.core.DatasetBuilder:
    return rlds_suite.tfds.datasets.build(f'd4rl/{config}', manual_dir=str(manual_dir),
                                     data_dir=self.tmp_dir, **kwargs)

  def _episodes_in_file_order(self, builder, file: pathlib.Path) -> list:
    """Episodes sorted by the file row of their first observation."""
    observations = _raw(file)['observations']
    found = []
    for episode in rlds_suite.tfds.datasets.numpy_episodes(builder.as_dataset(split='train')):
      first = episode[fields.STEPS][fields.OBSERVATION][0]
      (row,) = np.flatnonzero((observations == first).all(axis=1))
      found.append((row, episode))
    return [episode for _, episode in sorted(found, key=lambda item: item[0])]

  def _assert_not_left_prepared(self, config: str) -> None:
    self.assertFalse(d4rl_dataset_builder.Builder(config=config, data_dir=self.tmp_dir).is_prepared())
    with self.assertRaises(Exception):
      tfds.builder_from_directory(f'{self.tmp_dir}/d4rl/{config}/1.0.0')

  def test_medium_values(self):
    builder = self._build('halfcheetah-medium-v2', DUMMY_DATA)
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    # Episodes of 4 (timeout), 3, 1 (terminal), 4 (timeout) and 2 (tail) actions, each followed by
    # the final observation from next_observations.
    self.assertEqual((report.num_episodes, report.num_steps), (5, 19))
    file = DUMMY_DATA / 'halfcheetah_medium-v2.hdf5'
    raw = _raw(file)
    with h5py.File(file, 'r') as f:
      next_observations, qpos = f['next_observations'][()], f['infos/qpos'][()]
      log_probs = f['infos/action_log_probs'][()]
    episodes = self._episodes_in_file_order(builder, file)
    starts, lengths = [0, 4, 7, 8, 12], [4, 3, 1, 4, 2]
    terminal = [False, True, True, False, False]
    for episode, start, length, ends_terminal in zip(episodes, starts, lengths, terminal):
      steps = episode[fields.STEPS]
      rows = slice(start, start + length)
      np.testing.assert_array_equal(steps[fields.OBSERVATION][:-1], raw['observations'][rows])
      np.testing.assert_array_equal(steps[fields.OBSERVATION][-1], next_observations[rows.stop - 1])
      np.testing.assert_array_equal(steps[fields.REWARD], np.append(raw['rewards'][rows], 0))
      np.testing.assert_array_equal(steps[fields.IS_LAST], [False] * length + [True])
      np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False] * length + [ends_terminal])
      expected_discount = np.ones(length + 1)
      if ends_terminal:
        expected_discount[-2:] = 0
      np.testing.assert_array_equal(steps[fields.DISCOUNT], expected_discount)
      np.testing.assert_array_equal(steps['infos']['qpos'][:-1], qpos[rows])  # float64, exact.
      self.assertEqual(steps['infos']['qpos'].dtype, np.float64)
      np.testing.assert_array_equal(steps['infos']['action_log_probs'],
                                    np.append(log_probs[rows], 0).astype(np.float64))
      self.assertEqual(episode['algorithm'], b'SAC')
      self.assertEqual(episode['iteration'], 1000)
      self.assertEqual(episode['policy']['nonlinearity'], b'relu')
      np.testing.assert_allclose(episode['policy']['fc1']['weight'], np.full((256, 256), 0.02))

  def test_replay_column_rewards(self):
    builder = self._build('hopper-medium-replay-v2', DUMMY_DATA)
    rlds_suite.validate(builder).raise_if_invalid()
    file = DUMMY_DATA / 'hopper_medium_replay-v2.hdf5'
    episodes = self._episodes_in_file_order(builder, file)
    rewards = _raw(file)['rewards']
    self.assertEqual(rewards.shape, (11, 1))
    np.testing.assert_array_equal(
        np.concatenate([e[fields.STEPS][fields.REWARD][:-1] for e in episodes]), rewards[:, 0])
    # Terminal after 2, timeout, terminal after 1, done at the time limit (recorded as a timeout).
    self.assertEqual([bool(e[fields.STEPS][fields.IS_TERMINAL][-1]) for e in episodes],
                     [True, False, True, False, False])
    self.assertNotIn('policy', episodes[0])

  def test_without_next_observations_the_last_observation_is_repeated_as_a_marked_copy(self):
    builder = self._build('walker2d-random-v2', DUMMY_DATA)
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    self.assertEqual((report.num_episodes, report.num_steps), (5, 10 + 5))  # Rows + placeholders.
    file = DUMMY_DATA / 'walker2d_random-v2.hdf5'
    raw = _raw(file)
    episodes = self._episodes_in_file_order(builder, file)
    self.assertEqual([len(e[fields.STEPS][fields.REWARD]) for e in episodes], [2, 4, 3, 4, 2])
    first = episodes[0][fields.STEPS]  # Terminal after one action.
    np.testing.assert_array_equal(first[fields.OBSERVATION], raw['observations'][[0, 0]])
    np.testing.assert_array_equal(first[fields.OBSERVATION_IS_COPY], [False, True])
    np.testing.assert_array_equal(first[fields.IS_TERMINAL], [False, True])
    np.testing.assert_array_equal(first[fields.DISCOUNT], [0, 0])
    for episode in episodes:
      copies = episode[fields.STEPS][fields.OBSERVATION_IS_COPY]
      self.assertEqual(copies.tolist(), [False] * (len(copies) - 1) + [True])
    np.testing.assert_array_equal(
        np.concatenate([e[fields.STEPS][fields.REWARD][:-1] for e in episodes]), raw['rewards'])

    # RLDS's own statistics see every real action and reward: only the placeholders are is_last.
    from rlds_suite.compat.rlds_compat import rlds  # pylint: disable=g-import-not-at-top
    mean, std = rlds.transformations.mean_and_std(builder.as_dataset(split='train'),
                                                  rlds.transformations.sar_fields_mask)
    np.testing.assert_allclose(mean[fields.REWARD], raw['rewards'].mean(), rtol=1e-6)
    # rlds's std is the sample std.
    np.testing.assert_allclose(std[fields.REWARD], raw['rewards'].std(ddof=1), rtol=1e-5)
    np.testing.assert_allclose(mean[fields.ACTION], raw['actions'].mean(axis=0), rtol=1e-5)

  def test_files_with_next_observations_have_the_same_fields_and_no_copies(self):
    builder = self._build('halfcheetah-medium-v2', DUMMY_DATA)
    for episode in rlds_suite.tfds.datasets.numpy_episodes(builder.as_dataset(split='train')):
      self.assertFalse(episode[fields.STEPS][fields.OBSERVATION_IS_COPY].any())

  def test_file_without_timeouts_needs_the_time_limit(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    manual_dir.mkdir()
    shutil.copyfile(NO_TIMEOUTS, manual_dir / 'walker2d_random-v2.hdf5')
    with self.assertRaisesRegex(errors.SchemaError, 'timeouts.*time_limit') as raised:
      self._build('walker2d-random-v2', manual_dir)
    self.assertIn(str(manual_dir / 'walker2d_random-v2.hdf5'), str(raised.exception))
    self._assert_not_left_prepared('walker2d-random-v2')

    builder = self._build('walker2d-random-v2', manual_dir, time_limit=3)
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    self.assertEqual((report.num_episodes, report.num_steps), (4, 10 + 4))
    episodes = self._episodes_in_file_order(builder, manual_dir / 'walker2d_random-v2.hdf5')
    self.assertEqual([bool(e[fields.STEPS][fields.IS_TERMINAL][-1]) for e in episodes],
                     [False, True, False, False])

  def test_manual_dir_without_the_file_is_an_error_not_a_download(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    manual_dir.mkdir()
    shutil.copyfile(NO_TIMEOUTS, manual_dir / 'some-other-file.hdf5')
    with self.assertRaisesRegex(errors.EmptyInputError,
                                f'{manual_dir}: no halfcheetah_medium-v2.hdf5 here'):
      self._build('halfcheetah-medium-v2', manual_dir)
    self._assert_not_left_prepared('halfcheetah-medium-v2')

  def test_truncated_file_leaves_nothing_prepared(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    manual_dir.mkdir()
    data = (DUMMY_DATA / 'halfcheetah_medium-v2.hdf5').read_bytes()
    (manual_dir / 'halfcheetah_medium-v2.hdf5').write_bytes(data[:len(data) // 2])
    with self.assertRaises(errors.CorruptFileError) as raised:
      self._build('halfcheetah-medium-v2', manual_dir)
    self.assertIn(str(manual_dir / 'halfcheetah_medium-v2.hdf5'), str(raised.exception))
    self._assert_not_left_prepared('halfcheetah-medium-v2')

  def test_wrong_schema_leaves_nothing_prepared(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    manual_dir.mkdir()
    path = manual_dir / 'halfcheetah_medium-v2.hdf5'
    shutil.copyfile(DUMMY_DATA / path.name, path)
    with h5py.File(path, 'r+') as f:
      del f['actions']
    with self.assertRaises(errors.SchemaError) as raised:
      self._build('halfcheetah-medium-v2', manual_dir)
    self.assertEqual((raised.exception.path, raised.exception.field), (str(path), 'actions'))
    self._assert_not_left_prepared('halfcheetah-medium-v2')

  def test_nan_reward_leaves_nothing_prepared(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    manual_dir.mkdir()
    path = manual_dir / 'halfcheetah_medium-v2.hdf5'
    shutil.copyfile(DUMMY_DATA / path.name, path)
    with h5py.File(path, 'r+') as f:
      f['rewards'][9] = np.nan
    with self.assertRaisesRegex(errors.InvalidValueError, r'rows \[9\]') as raised:
      self._build('halfcheetah-medium-v2', manual_dir)
    self.assertIn(str(path), str(raised.exception))
    self._assert_not_left_prepared('halfcheetah-medium-v2')

  def test_configs_are_the_v2_locomotion_catalogue(self):
    configs = {c.name: c for c in d4rl_dataset_builder.Builder.BUILDER_CONFIGS}
    self.assertLen(configs, 24)
    checksums = (pathlib.Path(__file__).parent / 'checksums.tsv').read_text()
    for config in configs.values():
      self.assertIn(f'{config.url}\t', checksums)
      self.assertIn(f'\t{config.file_name}\n', checksums)
    self.assertEqual(configs['ant-full-replay-v2'].file_name, 'ant_full_replay-v2.hdf5')


if __name__ == '__main__':
  tfds.testing.test_main()
