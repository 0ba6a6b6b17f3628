"""magical_demos over dummy_data (written by tests/fixtures/write_magical.py) and the real demo."""

import pathlib

import numpy as np
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite.core import fields
from rlds_suite.builders.magical_demos import magical_demos_dataset_builder

REAL_DATA = pathlib.Path(__file__).resolve().parents[2].parent / 'shared' / 'real_data' / 'magical'


class MagicalDemosTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = magical_demos_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['move_to_corner']
  SPLITS = {'train': 2}
  SKIP_CHECKSUMS = True


class MagicalDemosValuesTest(tfds.testing.TestCase):

  def _build(self, config: str, manual_dir: pathlib.Path) -> tfds.core.DatasetBuilder:
    return rlds_suite.tfds.datasets.build(f'magical_demos/{config}', manual_dir=str(manual_dir),
                                     data_dir=self.tmp_dir)

  def test_dummy_data_values_and_validation(self):
    builder = self._build('move_to_corner', pathlib.Path(__file__).parent / 'dummy_data')
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    self.assertEqual((report.num_episodes, report.num_steps), (2, 4 + 2))
    by_file = {ep['demo_file'].decode(): ep for ep in rlds_suite.tfds.datasets.numpy_episodes(
        builder.as_dataset(split='train'))}
    long = by_file['demo-MoveToCorner-Demo-v0-000.pkl.gz']
    steps = long[fields.STEPS]
    self.assertEqual(long['env_name'], b'MoveToCorner-Demo-v0')
    self.assertAlmostEqual(float(long['score']), 1.0)
    np.testing.assert_array_equal(steps[fields.IS_LAST], [False, False, False, True])
    np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False] * 4)  # Always truncated.
    np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 1, 1, 1])
    np.testing.assert_array_equal(steps['eval_score'], [0, 0, 1, 0])
    self.assertEqual(steps[fields.ACTION][-1], 0)  # Placeholder action on the final observation.
    # The square marking step t sits at row 10 + 20 t in the allocentric view (PNG is lossless).
    for t in range(4):
      self.assertEqual(steps[fields.OBSERVATION]['allo'][t, 10 + 20 * t, 10, 2], 90)

  def test_real_demo(self):
    if not REAL_DATA.is_dir():
      self.skipTest(f'no real data at {REAL_DATA}')
    builder = self._build('move_to_region', REAL_DATA)
    report = rlds_suite.validate(builder)
    report.raise_if_invalid()
    self.assertEqual((report.num_episodes, report.num_steps), (1, 41))
    (episode,) = rlds_suite.tfds.datasets.numpy_episodes(builder.as_dataset(split='train'))
    steps = episode[fields.STEPS]
    self.assertEqual(episode['env_name'], b'MoveToRegion-Demo-v0')
    self.assertAlmostEqual(float(episode['score']), 1.0)
    self.assertEqual(steps[fields.OBSERVATION]['ego'].shape, (41, 384, 384, 3))
    self.assertEqual(steps['eval_score'][39], 1.0)
    self.assertTrue(np.all(steps[fields.ACTION][:5] == 7))


if __name__ == '__main__':
  tfds.testing.test_main()
