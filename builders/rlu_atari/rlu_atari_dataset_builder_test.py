"""rlu_atari over dummy_data (tests/fixtures/write_rlu.py), and side by side with TFDS's rlu_atari."""

import pathlib

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.rl_unplugged.rlu_atari import rlu_atari as tfds_rlu_atari
import tree

import rlds_suite
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.builders.rlu_atari import rlu_atari_dataset_builder as rlu_atari
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import datasets

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'


class RLUAtariTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = rlu_atari.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['Pong_run_1']
  SPLITS = {'train': 3}
  SKIP_TF1_GRAPH_MODE = True

  def _make_builder(self, config=None):
    return self.dataset_class(data_dir=self.tmp_dir, config=config, version=self.VERSION,
                              beam=False, num_shards=2)


def _episodes(builder) -> dict[int, dict]:
  return {int(e['episode_id']): e for e in datasets.numpy_episodes(builder.as_dataset(split='train'))}


class RLUAtariValuesTest(tfds.testing.TestCase):

  def _build(self, manual_dir=DUMMY_DATA, beam=False, name='ours'):
    builder = rlu_atari.Builder(config='Pong_run_1', data_dir=f'{self.tmp_dir}/{name}', beam=beam,
                                num_shards=2)
    builder.download_and_prepare(download_config=rlds_beam.download_config(str(manual_dir)))
    return builder

  def test_side_by_side_with_tfds_rlu_atari(self):
    ours = self._build(beam=True)
    rlds_suite.validate(ours).raise_if_invalid()
    self.assertEqual(ours.info.metadata['game'], 'Pong')
    tree.map_structure(np.testing.assert_array_equal, _episodes(self._build(name='single')),
                       _episodes(ours))  # Beam (2 processes) == one process.
    tfds_rlu_atari.RluAtari._INPUT_FILE_PREFIX = str(DUMMY_DATA)  # As TFDS's own test does.
    tfds_rlu_atari.RluAtari._SHARDS = 2
    theirs = tfds_rlu_atari.RluAtari(config='Pong_run_1', data_dir=f'{self.tmp_dir}/tfds')
    theirs.download_and_prepare(download_config=rlds_beam.download_config())
    ours, theirs = _episodes(ours), _episodes(theirs)
    self.assertEqual(sorted(ours), [0, 1, 2])
    self.assertEqual(sorted(theirs), [0, 1, 2])
    for episode_id, terminated in ((0, True), (1, False), (2, True)):
      a, b = ours[episode_id][fields.STEPS], theirs[episode_id][fields.STEPS]
      # Same episode metadata; ours adds clipped_episode_return.
      for key in ('episode_id', 'checkpoint_id', 'episode_return'):
        self.assertEqual(ours[episode_id][key], theirs[episode_id][key])
      self.assertNotIn('clipped_episode_return', theirs[episode_id])
      n = len(b[fields.REWARD])
      if terminated:  # Same steps: the terminal frame is the last step.
        self.assertLen(a[fields.REWARD], n)
        for key in b:
          np.testing.assert_array_equal(a[key], b[key], err_msg=key)
      else:
        # Difference: TFDS ends a truncated episode on its last action's row, so that action and
        # reward sit on an is_last step (which RLDS tools ignore); ours adds the placeholder step
        # repeating the last frame (observation_is_copy).
        self.assertLen(a[fields.REWARD], n + 1)
        for key in b:
          if key not in (fields.IS_LAST,):
            np.testing.assert_array_equal(a[key][:n], b[key], err_msg=key)
        np.testing.assert_array_equal(a[fields.OBSERVATION][n], b[fields.OBSERVATION][-1])
        np.testing.assert_array_equal(a['observation_is_copy'], [False] * n + [True])
        self.assertTrue(b[fields.IS_LAST][-1])
      # TFDS's `reward` holds the unclipped rewards (its doc says "Clipped reward"); ours too, named
      # so, with the clipped ones beside them.
      self.assertNotIn('clipped_reward', b)
      self.assertTrue(np.any(np.abs(a[fields.REWARD]) > 1))
      np.testing.assert_array_equal(a['clipped_reward'], np.clip(a[fields.REWARD], -1, 1))
      self.assertEqual(a[fields.REWARD].sum(), ours[episode_id]['episode_return'])
      self.assertEqual(a['clipped_reward'].sum(), ours[episode_id]['clipped_episode_return'])

  def _assert_fails_unprepared(self, manual_dir, error, path):
    with self.assertRaises(error) as raised:
      self._build(manual_dir, name='bad')
    self.assertIn(str(path), str(raised.exception))
    self.assertFalse(rlu_atari.Builder(config='Pong_run_1', data_dir=f'{self.tmp_dir}/bad',
                                       num_shards=2).is_prepared())

  def test_corrupt_tfrecord(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    (manual_dir / 'Pong').mkdir(parents=True)
    for shard in (DUMMY_DATA / 'Pong').iterdir():
      data = shard.read_bytes()
      (manual_dir / 'Pong' / shard.name).write_bytes(
          data[:len(data) // 2] if shard.name.endswith('00001-of-00002') else data)
    self._assert_fails_unprepared(manual_dir, errors.CorruptFileError,
                                  manual_dir / 'Pong' / 'run_1-00001-of-00002')

  def test_missing_shard(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    (manual_dir / 'Pong').mkdir(parents=True)
    (manual_dir / 'Pong' / 'run_1-00000-of-00002').write_bytes(
        (DUMMY_DATA / 'Pong' / 'run_1-00000-of-00002').read_bytes())
    self._assert_fails_unprepared(manual_dir, errors.SchemaError,
                                  manual_dir / 'Pong' / 'run_1-00001-of-00002')


if __name__ == '__main__':
  tfds.testing.test_main()
