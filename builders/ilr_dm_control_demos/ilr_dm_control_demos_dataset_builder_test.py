"""ilr_dm_control_demos over dummy_data (tests/fixtures/write_ilr_dm_control.py) and the real
reacher-easy demos."""

import gzip
import pathlib

import cloudpickle
import numpy as np
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite.builders.ilr_dm_control_demos import ilr_dm_control_demos_dataset_builder
from rlds_suite.core import fields
from rlds_suite.tfds import datasets

REAL_DATA = (pathlib.Path(__file__).resolve().parents[2].parent / 'shared' / 'real_data' /
             'il_representations' / 'native')


class IlrDmControlDemosTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = ilr_dm_control_demos_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['reacher_easy']
  SPLITS = {'train': 2}
  SKIP_CHECKSUMS = True


class IlrDmControlDemosValuesTest(tfds.testing.TestCase):

  def _episodes(self, manual_dir: pathlib.Path) -> list:
    builder = datasets.build('ilr_dm_control_demos/reacher_easy', manual_dir=str(manual_dir),
                             data_dir=self.tmp_dir)
    rlds_suite.validate(builder).raise_if_invalid()
    return sorted(datasets.numpy_episodes(builder.as_dataset(split='train')),
                  key=lambda e: int(e['trajectory_index']))

  def test_dummy_data_truncated_and_terminated(self):
    cut, absorbed = self._episodes(pathlib.Path(__file__).parent / 'dummy_data')
    steps = cut[fields.STEPS]
    self.assertLen(steps[fields.IS_FIRST], 4)  # 3 actions + the final observation.
    np.testing.assert_array_equal(steps[fields.OBSERVATION][:, 0, 50, 50], [0, 1, 2, 3])
    np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False] * 4)
    np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 1, 1, 1])
    # float64 rewards kept exactly (0.1 * 3 is not a float32).
    self.assertEqual(steps[fields.REWARD].dtype, np.float64)
    np.testing.assert_array_equal(steps[fields.REWARD], [0.1, 0.2, 0.1 * 3, 0.0])
    steps = absorbed[fields.STEPS]
    np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False, False, True])
    np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 0, 0])
    np.testing.assert_array_equal(steps[fields.REWARD], [0.1 + 1e-12, 0.2 + 1e-12, 0])
    np.testing.assert_array_equal(steps['internal_state'][-1], np.zeros(4))

  def test_real_reacher_demos_equal_cloudpickle_load(self):
    path = REAL_DATA / 'dm_control-reacher-easy-test.pkl.gz'
    if not path.is_file():
      self.skipTest(f'no real data at {path}')
    episodes = self._episodes(REAL_DATA)
    with gzip.open(path) as f:  # il-representations' own reading (code from a test-local class).
      native = _load_with_imitation_stand_in(f)
    self.assertLen(episodes, 2)
    for episode, recorded in zip(episodes, native):
      steps = episode[fields.STEPS]
      self.assertLen(steps[fields.IS_FIRST], 126)  # 125 actions (1000 / frame skip 8) + 1.
      np.testing.assert_array_equal(steps[fields.OBSERVATION], recorded.obs)
      np.testing.assert_array_equal(steps[fields.ACTION][:-1], recorded.acts)
      np.testing.assert_array_equal(steps[fields.REWARD][:-1], recorded.rews)
      np.testing.assert_array_equal(steps['internal_state'][:-1],
                                    [info['internal_state'] for info in recorded.infos])
      self.assertFalse(steps[fields.IS_TERMINAL].any())  # dm_control's time limit: truncation.
      np.testing.assert_array_equal(steps[fields.DISCOUNT], 1)
    self.assertEqual([float(e[fields.STEPS][fields.REWARD].sum()) for e in episodes], [874., 980.])


def _load_with_imitation_stand_in(f):
  """cloudpickle.load with a stand-in `imitation.data.types` module (imitation is not installed)."""
  import sys  # pylint: disable=g-import-not-at-top
  import types  # pylint: disable=g-import-not-at-top
  from unittest import mock  # pylint: disable=g-import-not-at-top

  class TrajectoryWithRew:
    pass

  module = types.ModuleType('imitation.data.types')
  module.TrajectoryWithRew = TrajectoryWithRew
  parents = {name: types.ModuleType(name) for name in ('imitation', 'imitation.data')}
  with mock.patch.dict(sys.modules, {**parents, module.__name__: module}):
    return cloudpickle.load(f)


if __name__ == '__main__':
  tfds.testing.test_main()
