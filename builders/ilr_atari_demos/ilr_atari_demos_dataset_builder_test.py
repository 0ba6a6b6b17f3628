"""ilr_atari_demos over dummy_data (tests/fixtures/write_ilr_atari.py) and the real Pong demos."""

import pathlib
import shutil

import numpy as np
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite.builders.ilr_atari_demos import ilr_atari_demos_dataset_builder
from rlds_suite.core import fields
from rlds_suite.tfds import datasets

REAL_DATA = (pathlib.Path(__file__).resolve().parents[2].parent / 'shared' / 'real_data' /
             'il_representations' / 'native')


class IlrAtariDemosTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = ilr_atari_demos_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['pong']
  SPLITS = {'train': 3}  # Trajectory 0 holds two episodes (a done at step 2), trajectory 1 one.
  SKIP_CHECKSUMS = True


class IlrAtariDemosValuesTest(tfds.testing.TestCase):

  def _episodes(self, manual_dir: pathlib.Path) -> list:
    builder = datasets.build('ilr_atari_demos/pong', manual_dir=str(manual_dir),
                                             data_dir=self.tmp_dir)
    rlds_suite.validate(builder).raise_if_invalid()
    found = datasets.numpy_episodes(builder.as_dataset(split='train'))
    return sorted(found, key=lambda e: (int(e['trajectory_index']),
                                        int(e['episode_in_trajectory'])))

  def test_dummy_data_episodes_split_at_done(self):
    first, second, third = self._episodes(pathlib.Path(__file__).parent / 'dummy_data')
    # Trajectory 0: a done at step 2 ends a terminated episode; steps 3-5 end with the recording.
    # Each episode ends with the placeholder step that repeats the last real observation (the
    # observation after the last action was not kept), marked observation_is_copy.
    steps = first[fields.STEPS]
    np.testing.assert_array_equal(steps[fields.ACTION], [1, 2, 3, 0])
    np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False, False, False, True])
    np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 1, 0, 0])  # a_2 ended the game.
    np.testing.assert_array_equal(steps[fields.OBSERVATION_IS_COPY], [False, False, False, True])
    np.testing.assert_array_equal(steps[fields.OBSERVATION][:, 0, 0, :],
                                  [[0, 0, 0, 1], [0, 0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3]])
    steps = second[fields.STEPS]
    np.testing.assert_array_equal(steps[fields.ACTION], [0, 1, 2, 0])
    np.testing.assert_array_equal(steps[fields.IS_LAST], [False, False, False, True])
    np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False] * 4)
    np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 1, 1, 1])
    np.testing.assert_array_equal(steps[fields.OBSERVATION][:3, 40, 40, :],
                                  [[0, 0, 0, 4], [0, 0, 4, 5], [0, 4, 5, 6]])
    self.assertEqual(int(second['episode_in_trajectory']), 1)
    steps = third[fields.STEPS]
    np.testing.assert_array_equal(steps[fields.OBSERVATION][-1, 83, 83], [101, 102, 103, 104])
    for episode in (first, second, third):
      self.assertFalse(episode['has_rewards'])
      np.testing.assert_array_equal(episode[fields.STEPS][fields.REWARD], 0)

  def test_any_noframeskip_game_by_a_manual_config(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'seaquest_demos'
    manual_dir.mkdir()
    shutil.copy(pathlib.Path(__file__).parent / 'dummy_data' / 'pong.npz',
                manual_dir / 'SeaquestNoFrameskip-v4_rollouts.npz')
    config = ilr_atari_demos_dataset_builder.config_for('SeaquestNoFrameskip-v4')
    builder = ilr_atari_demos_dataset_builder.Builder(config=config, data_dir=self.tmp_dir)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir)))
    self.assertEqual(builder.info.full_name, 'ilr_atari_demos/seaquest/1.0.0')
    self.assertEqual(builder.info.splits['train'].num_examples, 3)

  def test_real_pong_demos(self):
    path = REAL_DATA / 'atari-pong.npz'
    if not path.is_file():
      self.skipTest(f'no real data at {path}')
    native = np.load(path, allow_pickle=True)['arr_0']  # The authors' own reading of the file.
    episodes = self._episodes(REAL_DATA)
    self.assertLen(episodes, 2)  # 2 recordings x 500 steps, no done: two truncated episodes.
    for episode, recorded in zip(episodes, native):
      steps = episode[fields.STEPS]
      self.assertEqual(len(steps[fields.ACTION]), 501)  # 500 recorded + the placeholder step.
      np.testing.assert_array_equal(steps[fields.OBSERVATION][:500], np.stack(recorded['states']))
      np.testing.assert_array_equal(steps[fields.ACTION][:500], np.stack(recorded['actions']))
      self.assertEqual(steps[fields.OBSERVATION_IS_COPY].sum(), 1)
      self.assertFalse(steps[fields.IS_TERMINAL].any())
      self.assertTrue(steps[fields.IS_LAST][-1])
      np.testing.assert_array_equal(steps[fields.DISCOUNT], 1)
      self.assertEqual(episode['source_file'], b'atari-pong.npz')
    # Values that pin the file: action counts per recording, and the first stack of a reset.
    np.testing.assert_array_equal(
        [np.bincount(e[fields.STEPS][fields.ACTION][:500], minlength=4) for e in episodes],
        [[75, 119, 134, 172], [90, 104, 136, 170]])
    first = episodes[0][fields.STEPS][fields.OBSERVATION][0]
    self.assertFalse(first[..., :3].any())
    self.assertEqual(first.max(), 148)


if __name__ == '__main__':
  tfds.testing.test_main()
