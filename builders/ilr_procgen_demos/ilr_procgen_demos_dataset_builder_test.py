"""ilr_procgen_demos over dummy_data, written by tests/fixtures/write_ilr_procgen.py as
il-representations' loader reads it (no real procgen demo file is available)."""

import pathlib
import sys

import numpy as np
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite.builders.ilr_procgen_demos import ilr_procgen_demos_dataset_builder
from rlds_suite.core import fields
from rlds_suite.tfds import datasets

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / 'tests' / 'fixtures'))
import write_ilr_procgen  # pylint: disable=g-import-not-at-top,wrong-import-position


class IlrProcgenDemosTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = ilr_procgen_demos_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['coinrun']
  SPLITS = {'train': 3}  # Trajectory 0: a done after 2 steps, then a tail; trajectory 1: one.
  SKIP_CHECKSUMS = True


class IlrProcgenDemosValuesTest(tfds.testing.TestCase):

  def test_episodes_equal_the_loaders_rows(self):
    builder = datasets.build('ilr_procgen_demos/coinrun', manual_dir=str(DUMMY_DATA),
                             data_dir=self.tmp_dir)
    rlds_suite.validate(builder).raise_if_invalid()
    found = sorted(datasets.numpy_episodes(builder.as_dataset(split='train')),
                   key=lambda e: (int(e['trajectory_index']), int(e['episode_in_trajectory'])))
    self.assertEqual([len(e[fields.STEPS][fields.IS_FIRST]) for e in found], [3, 4, 4])
    # Without each episode's placeholder last step, the steps are the loader's rows in order.
    real = lambda key: np.concatenate([e[fields.STEPS][key][:-1] for e in found])
    loaded = write_ilr_procgen.load_like_il_representations(DUMMY_DATA / 'demo_coinrun.pickle')
    np.testing.assert_array_equal(real(fields.OBSERVATION), loaded['obs'])
    np.testing.assert_array_equal(real(fields.ACTION), loaded['acts'])
    np.testing.assert_array_equal(real(fields.REWARD), loaded['rews'])
    # A done before procgen's 1000-step limit is a termination; the recording's tail a truncation.
    self.assertEqual([bool(e[fields.STEPS][fields.IS_TERMINAL][-1]) for e in found],
                     [True, False, True])
    np.testing.assert_array_equal(found[0][fields.STEPS][fields.DISCOUNT], [1, 0, 0])
    np.testing.assert_array_equal(found[1][fields.STEPS][fields.OBSERVATION_IS_COPY],
                                  [False, False, False, True])


if __name__ == '__main__':
  tfds.testing.test_main()
