"""imitation_rollouts over dummy_data (written by tests/fixtures/write_imitation.py) and the real
CartPole rollouts of imitation's test data."""

import pathlib
import shutil

import numpy as np
import tensorflow_datasets as tfds

import rlds_suite
import rlds_suite.tfds.datasets  # rlds_suite loads it lazily; the tests use it by path.
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.builders.imitation_rollouts import imitation_rollouts_dataset_builder
from tests.fixtures import write_imitation

DUMMY_DATA = pathlib.Path(__file__).resolve().parent / 'dummy_data'
REAL_DATA = pathlib.Path(__file__).resolve().parents[2].parent / 'shared' / 'real_data' / 'imitation'
REAL_FILE = 'cartpole_0_rollouts_final.npz'
CARTPOLE_TIME_LIMIT = 500


class CartPoleRolloutsTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = imitation_rollouts_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['cartpole']
  SPLITS = {'train': 4 + 3}  # cartpole_rollouts.npz and cartpole_rollouts.pkl.
  SKIP_CHECKSUMS = True


class PendulumRolloutsTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = imitation_rollouts_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['pendulum']
  SPLITS = {'train': 2 + 2}  # pendulum_rollouts.npz and the older pendulum_rollouts.pkl.
  SKIP_CHECKSUMS = True


class ImitationRolloutsValuesTest(tfds.testing.TestCase):

  def _build(self, config: str, manual_dir: pathlib.Path) -> tfds.core.DatasetBuilder:
    return rlds_suite.tfds.datasets.build(f'imitation_rollouts/{config}', manual_dir=str(manual_dir),
                                     data_dir=self.tmp_dir)

  def _episodes(self, builder) -> dict:
    """Episodes keyed by (source file, index in the file)."""
    return {(ep['source_file'].decode(), int(ep['trajectory_index'])): ep
            for ep in rlds_suite.tfds.datasets.numpy_episodes(builder.as_dataset(split='train'))}

  def test_dummy_data_values_and_validation(self):
    builder = self._build('cartpole', DUMMY_DATA)
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    # Trajectory lengths 3, 1, 4, 2 (npz) and 2, 1, 3 (pickle), each plus the final observation.
    self.assertEqual((report.num_episodes, report.num_steps), (7, 10 + 4 + 6 + 3))
    self.assertEqual(report.summary()['observation_spec'], 'float64[4]')
    self.assertEqual(report.summary()['action_spec'], 'int64[]')
    episodes = self._episodes(builder)

    npz = np.load(DUMMY_DATA / 'cartpole_rollouts.npz')  # Numeric members only: no pickle.
    first = episodes[('cartpole_rollouts.npz', 0)][fields.STEPS]
    np.testing.assert_array_equal(first[fields.OBSERVATION], npz['obs'][0:4])
    np.testing.assert_array_equal(first[fields.ACTION], [*npz['acts'][0:3], 0])
    np.testing.assert_array_equal(first[fields.REWARD], [*npz['rews'][0:3], 0])
    np.testing.assert_array_equal(first[fields.IS_TERMINAL], [False, False, False, True])
    np.testing.assert_array_equal(first[fields.DISCOUNT], [1, 1, 0, 0])

    # Length-1 trajectory saved without infos: one action, then the final observation.
    single = episodes[('cartpole_rollouts.npz', 1)][fields.STEPS]
    np.testing.assert_array_equal(single[fields.OBSERVATION], npz['obs'][4:6])
    np.testing.assert_array_equal(single[fields.IS_FIRST], [True, False])
    np.testing.assert_array_equal(single[fields.IS_TERMINAL], [False, True])
    np.testing.assert_array_equal(single[fields.DISCOUNT], [0, 0])

    # terminal=False: an unfinished fragment, truncated.
    fragment = episodes[('cartpole_rollouts.npz', 2)]
    self.assertFalse(fragment['native_terminal'])
    np.testing.assert_array_equal(fragment[fields.STEPS][fields.IS_TERMINAL], [False] * 5)
    np.testing.assert_array_equal(fragment[fields.STEPS][fields.DISCOUNT], [1] * 5)

    # terminal=True, but gym's TimeLimit.truncated on the last info: truncated.
    cut = episodes[('cartpole_rollouts.npz', 3)]
    self.assertTrue(cut['native_terminal'])
    np.testing.assert_array_equal(cut[fields.STEPS][fields.IS_TERMINAL], [False] * 3)
    np.testing.assert_array_equal(cut[fields.STEPS][fields.OBSERVATION], npz['obs'][11:14])

    from_pickle = episodes[('cartpole_rollouts.pkl', 1)]
    self.assertTrue(from_pickle['has_rewards'])
    self.assertFalse(from_pickle['native_terminal'])
    self.assertEqual(len(from_pickle[fields.STEPS][fields.IS_FIRST]), 2)
    # The older pickle's float64 observations, bit for bit.
    for index, native in enumerate(write_imitation.CARTPOLE_PICKLE):
      steps = episodes[('cartpole_rollouts.pkl', index)][fields.STEPS]
      self.assertEqual(steps[fields.OBSERVATION].dtype, np.float64)
      self.assertEqual(steps[fields.OBSERVATION].tobytes(), native.obs.tobytes())

  def test_pendulum_older_pickle_and_npz(self):
    builder = self._build('pendulum', DUMMY_DATA)
    rlds_suite.validate(builder).raise_if_invalid()
    episodes = self._episodes(builder)
    for name, natives in (('pendulum_rollouts.pkl', write_imitation.PENDULUM_PICKLE),
                          ('pendulum_rollouts.npz', write_imitation.PENDULUM_NPZ)):
      for index, native in enumerate(natives):
        steps = episodes[(name, index)][fields.STEPS]
        self.assertEqual(steps[fields.OBSERVATION].tobytes(),
                         native.obs.astype(np.float64).tobytes())
        self.assertEqual(steps[fields.REWARD][:-1].tobytes(),
                         native.rews.astype(np.float64).tobytes())

  def test_real_cartpole_rollouts(self):
    if not (REAL_DATA / REAL_FILE).is_file():
      self.skipTest(f'no real data at {REAL_DATA}')
    builder = self._build('cartpole', REAL_DATA)
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    self.assertEqual((report.num_episodes, report.num_steps), (57, 26964 + 57))

    npz = np.load(REAL_DATA / REAL_FILE)  # Numeric members only: no pickle.
    bounds = np.concatenate([[0], npz['indices'], [len(npz['acts'])]])
    episodes = self._episodes(builder)
    self.assertEqual(sorted(episodes), [(REAL_FILE, i) for i in range(57)])
    num_terminated = 0
    for i in range(57):
      start, stop = bounds[i], bounds[i + 1]
      length = stop - start
      episode = episodes[(REAL_FILE, i)]
      steps = episode[fields.STEPS]
      self.assertEqual(len(steps[fields.IS_FIRST]), length + 1)
      self.assertEqual(steps[fields.REWARD].sum(), npz['rews'][start:stop].sum())
      # Trajectory i's observations are rows start + i .. stop + i of obs.
      np.testing.assert_array_equal(steps[fields.OBSERVATION][0], npz['obs'][start + i])
      np.testing.assert_array_equal(steps[fields.OBSERVATION][-1], npz['obs'][stop + i])
      np.testing.assert_array_equal(steps[fields.ACTION][:-1], npz['acts'][start:stop])
      self.assertEqual(bool(episode['native_terminal']), bool(npz['terminal'][i]))
      # imitation marks every complete episode terminal; CartPole-v1 cuts at 500 steps.
      terminated = bool(npz['terminal'][i]) and length < CARTPOLE_TIME_LIMIT
      self.assertEqual(bool(steps[fields.IS_TERMINAL][-1]), terminated)
      self.assertEqual(float(steps[fields.DISCOUNT][-2]), 0.0 if terminated else 1.0)
      num_terminated += terminated
    self.assertEqual(num_terminated, 42)  # 15 of the 57 episodes reached the 500-step limit.
    np.testing.assert_allclose(sorted(report.returns), sorted(
        npz['rews'][a:b].sum() for a, b in zip(bounds[:-1], bounds[1:])))

  def test_failed_build_leaves_no_dataset(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    manual_dir.mkdir()
    shutil.copy(DUMMY_DATA / 'cartpole_rollouts.npz', manual_dir / 'cartpole_a.npz')
    data = (DUMMY_DATA / 'cartpole_rollouts.npz').read_bytes()
    (manual_dir / 'cartpole_b.npz').write_bytes(data[:len(data) // 2])
    data_dir = pathlib.Path(self.tmp_dir) / 'data'
    builder = imitation_rollouts_dataset_builder.Builder(config='cartpole', data_dir=str(data_dir))
    with self.assertRaisesRegex(errors.CorruptFileError, 'cartpole_b.npz'):
      builder.download_and_prepare(
          download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir)))
    fresh = imitation_rollouts_dataset_builder.Builder(config='cartpole', data_dir=str(data_dir))
    self.assertFalse(fresh.is_prepared())

  def test_manual_dir_without_files_of_the_config(self):
    # (A manual dir with no file at all is refused by TFDS itself before the builder runs.)
    manual_dir = pathlib.Path(self.tmp_dir) / 'only_cartpole'
    manual_dir.mkdir()
    shutil.copy(DUMMY_DATA / 'cartpole_rollouts.npz', manual_dir)
    data_dir = pathlib.Path(self.tmp_dir) / 'data'
    builder = imitation_rollouts_dataset_builder.Builder(config='pendulum', data_dir=str(data_dir))
    with self.assertRaisesRegex(errors.EmptyInputError, "only_cartpole.*'pendulum'"):
      builder.download_and_prepare(
          download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir)))
    fresh = imitation_rollouts_dataset_builder.Builder(config='pendulum', data_dir=str(data_dir))
    self.assertFalse(fresh.is_prepared())

if __name__ == '__main__':
  tfds.testing.test_main()
