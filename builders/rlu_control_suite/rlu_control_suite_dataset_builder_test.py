"""rlu_control_suite over dummy_data (tests/fixtures/write_rlu.py), side by side with TFDS's own."""

import importlib.util
import pathlib

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.rl_unplugged.rlu_control_suite import rlu_control_suite as tfds_rlu_cs
import tree

import rlds_suite
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.builders.rlu_control_suite import rlu_control_suite_dataset_builder as rlu_cs
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import datasets

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'
WRITER = pathlib.Path(__file__).resolve().parents[2] / 'tests' / 'fixtures' / 'write_rlu.py'
_spec = importlib.util.spec_from_file_location('write_rlu', WRITER)
writer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(writer)


class RLUControlSuiteTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = rlu_cs.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['cartpole_swingup']
  SPLITS = {'train': 2}
  SKIP_TF1_GRAPH_MODE = True

  def _make_builder(self, config=None):
    return self.dataset_class(data_dir=self.tmp_dir, config=config, version=self.VERSION,
                              beam=False, num_shards=2)


def _episodes(builder) -> dict[int, dict]:
  return {int(e['episode_id']): e for e in datasets.numpy_episodes(builder.as_dataset(split='train'))}


class RLUControlSuiteValuesTest(tfds.testing.TestCase):

  def _build(self, manual_dir=DUMMY_DATA, beam=False, name='ours'):
    builder = rlu_cs.Builder(config='cartpole_swingup', data_dir=f'{self.tmp_dir}/{name}',
                             beam=beam, num_shards=2)
    builder.download_and_prepare(download_config=rlds_beam.download_config(str(manual_dir)))
    return builder

  def test_rsa_rows_realigned_to_rlds(self):
    episodes = _episodes(self._build())
    for episode_id, steps, terminated in (e for shard in writer.CONTROL_EPISODES for e in shard):
      rows = writer.control_rows(episode_id, steps, terminated)
      got = episodes[episode_id][fields.STEPS]
      # Time step t's observation; the action taken at it; the reward and discount of arriving at
      # t + 1; the last time step's action (never taken) becomes the zero placeholder.
      np.testing.assert_array_equal(got[fields.OBSERVATION]['position'],
                                    rows['observation/position'].astype(np.float32))
      np.testing.assert_array_equal(got[fields.ACTION][:-1], rows['action'][:-1].astype(np.float32))
      np.testing.assert_array_equal(got[fields.ACTION][-1], [0])
      np.testing.assert_array_equal(got[fields.REWARD],
                                    np.append(rows['reward'][1:], 0).astype(np.float32))
      discount = np.append(rows['discount'][1:], 0 if terminated else 1)
      np.testing.assert_array_equal(got[fields.DISCOUNT], discount)
      self.assertEqual(bool(got[fields.IS_TERMINAL][-1]), terminated)
      np.testing.assert_array_equal(got[fields.IS_LAST], [False] * (steps - 1) + [True])

  def test_side_by_side_with_tfds_rlu_control_suite(self):
    ours = self._build(beam=True)
    rlds_suite.validate(ours).raise_if_invalid()
    tree.map_structure(np.testing.assert_array_equal, _episodes(self._build(name='single')),
                       _episodes(ours))  # Beam (2 processes) == one process.
    tfds_rlu_cs.RluControlSuite._INPUT_FILE_PREFIX = str(DUMMY_DATA)  # As TFDS's own test does.
    tfds_rlu_cs.RluControlSuite._SHARDS = 2
    theirs = tfds_rlu_cs.RluControlSuite(config='cartpole_swingup', data_dir=f'{self.tmp_dir}/tfds')
    theirs.download_and_prepare(download_config=rlds_beam.download_config())
    ours, theirs = _episodes(ours), _episodes(theirs)
    self.assertEqual(sorted(ours), sorted(theirs))
    for episode_id in ours:
      a, b = ours[episode_id], theirs[episode_id]
      self.assertEqual(a['timestamp'], b['timestamp'])
      for key in b[fields.STEPS]:
        if key != fields.ACTION:
          tree.map_structure(np.testing.assert_array_equal, a[fields.STEPS][key],
                             b[fields.STEPS][key])
      # The one difference: TFDS keeps the LAST time step's stored action (never taken); ours is
      # the zero placeholder. The fixture stores zeros there, so the values agree here too.
      np.testing.assert_array_equal(a[fields.STEPS][fields.ACTION], b[fields.STEPS][fields.ACTION])

  def test_corrupt_tfrecord_leaves_nothing_prepared(self):
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual' / 'cartpole_swingup'
    manual_dir.mkdir(parents=True)
    for shard in (DUMMY_DATA / 'cartpole_swingup').iterdir():
      data = bytearray(shard.read_bytes())
      if shard.name.startswith('train-00000'):
        data[len(data) // 2:len(data) // 2 + 8] = b'\xff' * 8
      (manual_dir / shard.name).write_bytes(bytes(data))
    with self.assertRaises(errors.CorruptFileError) as raised:
      self._build(manual_dir.parent, name='bad')
    self.assertIn(str(manual_dir / 'train-00000-of-00002'), str(raised.exception))
    self.assertFalse(rlu_cs.Builder(config='cartpole_swingup', data_dir=f'{self.tmp_dir}/bad',
                                    num_shards=2).is_prepared())


if __name__ == '__main__':
  tfds.testing.test_main()
