"""d4rl_pybullet over dummy_data (written by tests/fixtures/write_d4rl_pybullet.py, like collect.py)."""

import pathlib

import h5py
import numpy as np
import tensorflow_datasets as tfds

import rlds_suite
import rlds_suite.tfds.datasets  # rlds_suite loads it lazily; the tests use it by path.
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.builders.d4rl_pybullet import d4rl_pybullet_dataset_builder
from tests.fixtures import write_d4rl_pybullet

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'


class D4RLPybulletTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = d4rl_pybullet_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['hopper-bullet-medium-v0']
  SPLITS = {'train': 4}
  SKIP_CHECKSUMS = True  # Manual download only: no checksums are published.


class D4RLPybulletValuesTest(tfds.testing.TestCase):

  def _build(self, config: str, manual_dir: pathlib.Path) -> tfds.core.DatasetBuilder:
    return rlds_suite.tfds.datasets.build(f'd4rl_pybullet/{config}', manual_dir=str(manual_dir),
                                     data_dir=self.tmp_dir)

  def _episodes_by_length(self, builder) -> dict:
    return {len(e[fields.STEPS][fields.REWARD]): e[fields.STEPS]
            for e in rlds_suite.tfds.datasets.numpy_episodes(builder.as_dataset(split='train'))}

  def test_alignment_and_endings(self):
    builder = self._build('hopper-bullet-medium-v0', DUMMY_DATA)
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    # Row groups 0-3, 4-5, 6-8 end with a terminal row; 9-11 is the unfinished tail. Every group
    # becomes one step per row: its last row is the final observation.
    self.assertEqual((report.num_episodes, report.num_steps), (4, 12))
    with h5py.File(DUMMY_DATA / 'hopper-bullet-medium-v0.hdf5', 'r') as f:
      observations, rewards = f['observations'][()], f['rewards'][()][:, 0]
    found = [e[fields.STEPS] for e in rlds_suite.tfds.datasets.numpy_episodes(
        builder.as_dataset(split='train'))]
    by_start = {int(np.flatnonzero((observations == s[fields.OBSERVATION][0]).all(axis=1))[0]): s
                for s in found}
    self.assertEqual(sorted(by_start), [0, 4, 6, 9])
    for start, stop, terminated in [(0, 4, True), (4, 6, True), (6, 9, True), (9, 12, False)]:
      steps = by_start[start]
      np.testing.assert_array_equal(steps[fields.OBSERVATION], observations[start:stop])
      # Reward on arrival at row t+1 is the reward earned by row t's action; float64, exact.
      self.assertEqual(steps[fields.REWARD].dtype, np.float64)
      np.testing.assert_array_equal(steps[fields.REWARD], np.append(rewards[start + 1:stop], 0))
      self.assertEqual(bool(steps[fields.IS_TERMINAL][-1]), terminated)
      self.assertFalse(steps[fields.IS_TERMINAL][:-1].any())
      expected_discount = np.ones(stop - start)
      if terminated:
        expected_discount[-2:] = 0
      np.testing.assert_array_equal(steps[fields.DISCOUNT], expected_discount)
      np.testing.assert_array_equal(steps[fields.ACTION][-1], np.zeros(3))

  def test_time_limit_is_truncation(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    write_d4rl_pybullet.write_time_limited(manual_dir)
    builder = self._build('hopper-bullet-random-v0', manual_dir)
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    # Terminated after 2 actions; stopped by the 1000-step TimeLimit; the 1-row tail is skipped.
    self.assertEqual((report.num_episodes, report.num_steps), (2, 3 + 1001))
    episodes = self._episodes_by_length(builder)
    self.assertTrue(episodes[3][fields.IS_TERMINAL][-1])
    self.assertFalse(episodes[1001][fields.IS_TERMINAL].any())
    self.assertTrue((episodes[1001][fields.DISCOUNT] == 1).all())

  def test_empty_manual_dir(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'empty'
    manual_dir.mkdir()
    with self.assertRaises(errors.EmptyInputError) as raised:
      self._build('hopper-bullet-medium-v0', manual_dir)
    self.assertIn(str(manual_dir), str(raised.exception))
    self.assertFalse(d4rl_pybullet_dataset_builder.Builder(
        config='hopper-bullet-medium-v0', data_dir=self.tmp_dir).is_prepared())

  def test_manual_dir_without_the_configs_file(self):
    with self.assertRaisesRegex(errors.EmptyInputError, 'ant-bullet-mixed-v0.hdf5') as raised:
      self._build('ant-bullet-mixed-v0', DUMMY_DATA)
    self.assertEqual(raised.exception.path, str(DUMMY_DATA))

  def test_truncated_file_leaves_nothing_prepared(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    manual_dir.mkdir()
    path = manual_dir / 'hopper-bullet-medium-v0.hdf5'
    data = (DUMMY_DATA / path.name).read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with self.assertRaises(errors.CorruptFileError) as raised:
      self._build('hopper-bullet-medium-v0', manual_dir)
    self.assertIn(str(path), str(raised.exception))
    self.assertFalse(d4rl_pybullet_dataset_builder.Builder(
        config='hopper-bullet-medium-v0', data_dir=self.tmp_dir).is_prepared())
    with self.assertRaises(Exception):
      tfds.builder_from_directory(f'{self.tmp_dir}/d4rl_pybullet/hopper-bullet-medium-v0/1.0.0')

  def test_configs(self):
    names = [c.name for c in d4rl_pybullet_dataset_builder.Builder.BUILDER_CONFIGS]
    self.assertLen(names, 12)
    instructions = d4rl_pybullet_dataset_builder.Builder.MANUAL_DOWNLOAD_INSTRUCTIONS
    for name in names:
      self.assertIn(f'/{name}.hdf5?dl=1', instructions)


if __name__ == '__main__':
  tfds.testing.test_main()
