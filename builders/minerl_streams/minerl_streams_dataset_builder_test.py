"""minerl_streams over dummy_data (tests/fixtures/write_minerl.py, with videos) and the real
Treechop VectorObf stream (no video)."""

import pathlib

import numpy as np
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite.builders.minerl_streams import minerl_streams_dataset_builder
from rlds_suite.core import fields
from rlds_suite.tfds import datasets

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'
REAL_DATA = pathlib.Path(__file__).resolve().parents[2].parent / 'shared' / 'real_data' / 'minerl'


class MineRLStreamsTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = minerl_streams_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['treechop_vector_obf']
  SPLITS = {'train': 2}
  SKIP_CHECKSUMS = True


class MineRLStreamsNavigateTest(MineRLStreamsTest):
  BUILDER_CONFIG_NAMES_TO_TEST = ['navigate']
  SPLITS = {'train': 1}


class MineRLStreamsValuesTest(tfds.testing.TestCase):

  def _episodes(self, config: str, manual_dir: pathlib.Path) -> dict:
    builder = datasets.build(f'minerl_streams/{config}', manual_dir=str(manual_dir),
                             data_dir=self.tmp_dir)
    rlds_suite.validate(builder).raise_if_invalid()
    return {e['stream_name'].decode(): e
            for e in datasets.numpy_episodes(builder.as_dataset(split='train'))}

  def test_pov_frames_aligned_as_minerls_pipeline(self):
    found = self._episodes('treechop_vector_obf', DUMMY_DATA)
    done, quit_ = found['v3_fixture_a-1_0-5'], found['v3_fixture_b-2_0-3']
    steps = done[fields.STEPS]
    # 3 loading frames skipped; state t shows 40 + 20 t (H.264 keeps it within 2 levels).
    np.testing.assert_allclose(steps[fields.OBSERVATION]['pov'][:, 32, 32, 0],
                               [40, 60, 80, 100, 120, 140], atol=2)
    np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False] * 5 + [True])  # success.
    np.testing.assert_array_equal(steps[fields.REWARD], [0, 1, 0, 1, 1, 0])
    self.assertTrue(done['success'])
    steps = quit_[fields.STEPS]
    self.assertFalse(steps[fields.IS_TERMINAL].any())  # Not successful: truncated.
    np.testing.assert_array_equal(steps[fields.DISCOUNT], 1)
    self.assertEqual(int(quit_['true_video_frame_count']), 3 + 4)

  def test_basic_env_keys_nested_and_enums_as_text(self):
    (episode,) = self._episodes('navigate', DUMMY_DATA).values()
    steps = episode[fields.STEPS]
    np.testing.assert_array_equal(steps[fields.OBSERVATION]['inventory']['dirt'], [0, 1, 2, 3, 4])
    np.testing.assert_allclose(steps[fields.OBSERVATION]['compassAngle'],
                               np.linspace(-180, 90, 5))
    self.assertEqual(list(steps[fields.ACTION]['place']), [b'none', b'dirt', b'none', b'dirt', b''])
    np.testing.assert_array_equal(steps[fields.ACTION]['camera'][:4, 0], [0, 1, 2, 3])
    np.testing.assert_array_equal(steps[fields.ACTION]['forward'], [0, 1, 0, 1, 0])

  def test_real_treechop_stream_without_video(self):
    if not REAL_DATA.is_dir():
      self.skipTest(f'no real data at {REAL_DATA}')
    stream = REAL_DATA / 'MineRLTreechopVectorObf-v0' / 'v3_unselfish_blood_orange_savage-21_2496-4361'
    native = np.load(stream / 'rendered.npz')
    (episode,) = self._episodes('treechop_vector_obf_without_video', REAL_DATA).values()
    steps = episode[fields.STEPS]
    self.assertNotIn('pov', steps[fields.OBSERVATION])
    np.testing.assert_array_equal(steps[fields.OBSERVATION]['vector'], native['observation$vector'])
    np.testing.assert_array_equal(steps[fields.ACTION]['vector'][:-1], native['action$vector'])
    np.testing.assert_array_equal(steps[fields.REWARD][:-1], native['reward'])
    self.assertEqual(float(steps[fields.REWARD].sum()), 64.0)  # 64 logs: Treechop's goal.
    self.assertTrue(steps[fields.IS_TERMINAL][-1])
    self.assertEqual(len(steps[fields.IS_FIRST]), 1841)
    self.assertEqual(int(episode['true_video_frame_count']), 1867)


if __name__ == '__main__':
  tfds.testing.test_main()
