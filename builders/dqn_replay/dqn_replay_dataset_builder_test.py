"""dqn_replay over dummy_data (written by dopamine's own buffer, tests/fixtures/write_dqn_replay.py)."""

import gzip
import importlib.util
import pathlib
import shutil
import tempfile
from typing import Optional

import numpy as np
import tree
import tensorflow_datasets as tfds
from tensorflow_datasets.testing import dataset_builder_testing

import rlds_suite
from rlds_suite import scores
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.builders.dqn_replay import dqn_replay_dataset_builder as dqn_builder
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import datasets

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'
LOGS = DUMMY_DATA / 'Pong' / '1' / 'replay_logs'
WRITER = pathlib.Path(__file__).resolve().parents[2] / 'tests' / 'fixtures' / 'write_dqn_replay.py'
_spec = importlib.util.spec_from_file_location('write_dqn_replay', WRITER)
writer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(writer)


class DQNReplayTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = dqn_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['Pong-run1']
  SPLITS = {'train': 5}
  SKIP_TF1_GRAPH_MODE = True

  def _make_builder(self, config=None):
    return self.dataset_class(data_dir=self.tmp_dir, config=config, version=self.VERSION,
                              beam=False)

  def _assertAsDataset(self, builder):  # pylint: disable=invalid-name
    """TFDS's check less its per-example checksums, which only serve to tell whether two splits
    overlap (there is one split here): hashing each of the fixture's ~30k steps in Python, twice,
    was ~80% of this test. DQNReplayValuesTest decodes and compares every step."""
    for split, count in self.SPLITS.items():
      dataset = builder.as_dataset(split=split)
      dataset_builder_testing.compare_shapes_and_types(
          builder.info.features.get_tensor_info(), element_spec=dataset.element_spec)
      self.assertLen(list(tfds.as_numpy(dataset)), count)


def _expected_episodes() -> list[dict]:
  """Each fixture episode as the writer generated it: global step numbers, actions, rewards."""
  expected, step = [], 0
  for episode, (length, timed_out) in enumerate(writer.EPISODES):
    steps = np.arange(step, step + length)
    expected.append({
        'frames': np.stack([writer.frame(s, episode) for s in steps]),
        'actions': (steps * 7) % 18,
        'rewards': np.clip([writer.raw_reward(s) for s in steps], -1, 1).astype(np.float32),
        'terminated': not timed_out,
    })
    step += length
  return expected


def _by_first_frame(builder: tfds.core.DatasetBuilder) -> dict[int, dict]:
  """Episodes keyed by the global step number written into their first frame."""
  found = {}
  for episode in datasets.numpy_episodes(builder.as_dataset(split='train')):
    first = episode[fields.STEPS][fields.OBSERVATION][0, 0, :4, 0]
    found[int(np.frombuffer(first.tobytes(), np.uint32)[0])] = episode
  return found


class DQNReplayValuesTest(tfds.testing.TestCase):

  def _build(self, config, manual_dir=DUMMY_DATA, beam=False, data_dir=None):
    builder = dqn_builder.Builder(config=config, data_dir=data_dir or self.tmp_dir, beam=beam)
    builder.download_and_prepare(
        download_config=rlds_beam.download_config(manual_dir=str(manual_dir)))
    return builder

  _single: Optional[tuple[tfds.core.DatasetBuilder, dict[int, dict]]] = None

  def _single_build(self) -> tuple[tfds.core.DatasetBuilder, dict[int, dict]]:
    """The Pong-run1 build without Beam and its episodes, made once for the tests that read it."""
    cls = type(self)
    if cls._single is None:
      data_dir = tempfile.mkdtemp()
      cls.addClassCleanup(shutil.rmtree, data_dir, ignore_errors=True)
      builder = self._build('Pong-run1', data_dir=data_dir)
      cls._single = builder, _by_first_frame(builder)
    return cls._single

  def test_episodes_are_the_written_ones(self):
    builder, episodes = self._single_build()
    rlds_suite.validate(builder).raise_if_invalid()
    self.assertEqual(builder.info.metadata['game'], 'Pong')
    # The game's reference scores, found by rlds_suite.scores from the prepared directory.
    self.assertEqual(scores.directory_reference(builder.data_dir), scores.reference('Pong'))
    starts = np.cumsum([0] + [length for length, _ in writer.EPISODES])[:-1]
    self.assertEqual(sorted(episodes), list(starts))
    for start, want in zip(starts, _expected_episodes()):
      steps = episodes[start][fields.STEPS]
      n = len(want['actions'])
      # n real steps, then the placeholder step repeating the last frame (not stored by dopamine).
      np.testing.assert_array_equal(steps[fields.OBSERVATION][:n, ..., 0], want['frames'])
      np.testing.assert_array_equal(steps[fields.OBSERVATION][n], steps[fields.OBSERVATION][n - 1])
      np.testing.assert_array_equal(steps['observation_is_copy'], [False] * n + [True])
      np.testing.assert_array_equal(steps[fields.ACTION][:n], want['actions'])
      np.testing.assert_array_equal(steps[fields.REWARD][:n], want['rewards'])
      self.assertEqual(bool(steps[fields.IS_TERMINAL][-1]), want['terminated'])
      discount = np.ones(n + 1, np.float32)
      if want['terminated']:
        discount[-2:] = 0
      np.testing.assert_array_equal(steps[fields.DISCOUNT], discount)
    # The 27,000-step episode was stored with terminal=1 but is a time-out: truncated.
    self.assertFalse(episodes[starts[1]][fields.STEPS][fields.IS_TERMINAL].any())
    # Episode 2 crosses from checkpoint 0 into checkpoint 1 (row 27,999 lies at the file's end).
    self.assertEqual(episodes[starts[2]]['checkpoint'], 0)
    self.assertEqual(episodes[starts[3]]['checkpoint'], 1)

  def test_checkpoint_ranges_hold_the_episodes_starting_in_them(self):
    first = self._build(dqn_builder.config('Pong', 1, 0, 0))
    self.assertEqual(sorted(_by_first_frame(first)), [0, 6, 27006])  # Episode 2 read on into ckpt 1.
    second = self._build(dqn_builder.config('Pong', 1, 1, 1))
    self.assertEqual(sorted(_by_first_frame(second)), [29006, 29016])

  def test_beam_multiprocessing_build_equals_the_single_process_build(self):
    _, single_episodes = self._single_build()
    parallel = self._build('Pong-run1', beam=True, data_dir=f'{self.tmp_dir}/beam')
    parallel_episodes = _by_first_frame(parallel)
    # The same episodes in the same order: time order (episode 2, which crosses from checkpoint 0
    # into checkpoint 1, before checkpoint 1's own).
    self.assertEqual(list(single_episodes), list(parallel_episodes))
    self.assertEqual(list(single_episodes), sorted(single_episodes))
    for key, episode in single_episodes.items():
      tree.map_structure(np.testing.assert_array_equal, parallel_episodes[key], episode)

  def _copy_logs(self) -> pathlib.Path:
    manual_dir = pathlib.Path(self.tmp_dir) / 'manual'
    shutil.copytree(DUMMY_DATA, manual_dir)
    return manual_dir

  def _assert_fails_unprepared(self, manual_dir, error, pattern, path):
    with self.assertRaisesRegex(error, pattern) as raised:
      self._build('Pong-run1', manual_dir=manual_dir)
    self.assertIn(str(path), str(raised.exception))
    self.assertFalse(dqn_builder.Builder(config='Pong-run1', data_dir=self.tmp_dir).is_prepared())

  def test_files_of_different_lengths(self):
    manual_dir = self._copy_logs()
    path = manual_dir / 'Pong' / '1' / 'replay_logs' / '$store$_reward_ckpt.1.gz'
    with gzip.open(path, 'wb') as f:
      np.save(f, np.zeros(100, np.float32))
    self._assert_fails_unprepared(manual_dir, errors.EpisodeBoundaryError, 'different lengths',
                                  path)

  def test_missing_terminal_file(self):
    manual_dir = self._copy_logs()
    path = manual_dir / 'Pong' / '1' / 'replay_logs' / '$store$_terminal_ckpt.1.gz'
    path.unlink()
    self._assert_fails_unprepared(manual_dir, errors.SchemaError, 'not this one', path)

  def test_truncated_gzip(self):
    manual_dir = self._copy_logs()
    path = manual_dir / 'Pong' / '1' / 'replay_logs' / '$store$_observation_ckpt.0.gz'
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    self._assert_fails_unprepared(manual_dir, errors.CorruptFileError, 'truncated', path)


if __name__ == '__main__':
  tfds.testing.test_main()
