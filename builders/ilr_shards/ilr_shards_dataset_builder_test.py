"""ilr_shards over dummy_data (written by tests/fixtures/write_il_representations.py with the
authors' writer) and over the authors' real Pong and reacher shards."""

import json
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow_datasets as tfds

from rlds_suite.builders.ilr_shards import ilr_shards_dataset_builder
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.readers import il_representations
from rlds_suite.tfds import datasets

DUMMY = pathlib.Path(__file__).parent / 'dummy_data'
REAL = pathlib.Path(__file__).resolve().parents[2].parent / 'shared' / 'real_data' / 'il_representations'


class IlrShardsTest(tfds.testing.DatasetBuilderTestCase):
  DATASET_CLASS = ilr_shards_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['demos-atari-PongNoFrameskip-v4', 'demos-dm_control-reacher-easy',
                                  'demos-procgen-coinrun', 'demos-magical-MoveToRegion']
  SPLITS = {'train': 2}
  SKIP_CHECKSUMS = True


def _episodes(tmp_path, root, config):
  builder = datasets.build(f'ilr_shards/{config}', manual_dir=str(root), data_dir=str(tmp_path))
  report = datasets.validate(builder)
  return list(datasets.numpy_episodes(builder.as_dataset(split='train'))), report


def _real_root(tmp_path, benchmark, task, name):
  if not (REAL / name).is_file():
    pytest.skip(f'no real shard at {REAL / name}')
  shard = tmp_path / 'root' / 'data' / 'processed' / 'demos' / benchmark / task / 'demos.tar.zst'
  shard.parent.mkdir(parents=True)
  shard.symlink_to(REAL / name)
  return tmp_path / 'root'


def test_real_pong_shard_two_recordings_without_a_done(tmp_path):
  """The authors' Pong shard: no done anywhere; the reset between its two recordings (next_obs
  differs from the next obs) ends the first, as a truncation, and the shard's end the second."""
  root = _real_root(tmp_path, 'atari', 'PongNoFrameskip-v4', 'atari-PongNoFrameskip-v4-demos.tar.zst')
  eps, report = _episodes(tmp_path / 'data', root, 'demos-atari-PongNoFrameskip-v4')
  report.raise_if_invalid()
  _, native = il_representations.read_shard(root / 'data/processed/demos/atari/PongNoFrameskip-v4/demos.tar.zst')
  assert [len(e[fields.STEPS][fields.ACTION]) for e in eps] == [500, 500]
  for i, episode in enumerate(eps):
    steps, rows = episode[fields.STEPS], slice(499 * i, 499 * (i + 1))
    assert not steps[fields.IS_TERMINAL].any() and steps[fields.IS_LAST][-1]
    np.testing.assert_array_equal(steps[fields.OBSERVATION][:-1], native['obs'][rows])
    np.testing.assert_array_equal(steps[fields.OBSERVATION][-1], native['next_obs'][rows][-1])
    np.testing.assert_array_equal(steps[fields.ACTION][:-1], native['acts'][rows])
    assert not steps[fields.REWARD].any() and episode['has_rewards'] == False  # pylint: disable=g-explicit-bool-comparison
    assert json.loads(episode['env_cfg'])['task_name'] == 'PongNoFrameskip-v4'
    assert episode['episode_in_shard'] == i


def test_real_reacher_shard_keeps_physics_state_and_float64_rewards(tmp_path):
  root = _real_root(tmp_path, 'dm_control', 'reacher-easy', 'dm_control-reacher-easy-demos.tar.zst')
  eps, report = _episodes(tmp_path / 'data', root, 'demos-dm_control-reacher-easy')
  report.raise_if_invalid()
  _, native = il_representations.read_shard(root / 'data/processed/demos/dm_control/reacher-easy/demos.tar.zst')
  assert [len(e[fields.STEPS][fields.ACTION]) for e in eps] == [126, 126]
  steps = eps[1][fields.STEPS]
  rows = slice(125, 250)
  np.testing.assert_array_equal(steps[fields.REWARD][:-1], native['rews'][rows])  # float64, exact.
  assert steps[fields.REWARD].dtype == np.float64
  np.testing.assert_array_equal(steps['internal_state'][:-1],
                                [info['internal_state'] for info in native['infos'][rows]])
  np.testing.assert_array_equal(steps[fields.DISCOUNT], np.ones(126))  # Truncated: discounts 1.
  assert not steps[fields.IS_TERMINAL].any()
  assert eps[0]['has_rewards']


def test_procgen_next_episode_frames_and_crossing_stacks(tmp_path):
  """procgen shards: the final observation was not kept (next_obs at a done is the next episode's
  first frame), so each episode ends on a copy of its last observation; episodes that end before
  procgen's 1000-step limit are terminations; frame stacks are kept as recorded, crossing episode
  starts."""
  eps, _ = _episodes(tmp_path / 'data', DUMMY, 'demos-procgen-coinrun')
  _, native = il_representations.read_shard(DUMMY / 'processed/demos/procgen/coinrun/demos.tar.zst')
  first, second = (e[fields.STEPS] for e in eps)
  np.testing.assert_array_equal(first[fields.ACTION][:-1], [0, 1, 2])
  np.testing.assert_array_equal(second[fields.ACTION][:-1], [3, 4])
  for steps, rows in ((first, slice(0, 3)), (second, slice(3, 5))):
    np.testing.assert_array_equal(steps[fields.OBSERVATION][:-1], native['obs'][rows])
    np.testing.assert_array_equal(steps[fields.OBSERVATION][-1], steps[fields.OBSERVATION][-2])
    np.testing.assert_array_equal(steps[fields.OBSERVATION_IS_COPY], [False] * (rows.stop - rows.start) + [True])
    assert steps[fields.IS_TERMINAL][-1]
    np.testing.assert_array_equal(steps[fields.REWARD][:-1], native['rews'][rows])
  # The second episode's first stack still holds the first episode's last three frames.
  np.testing.assert_array_equal(second[fields.OBSERVATION][0][:9], first[fields.OBSERVATION][2][3:])


def test_magical_demos_end_truncated_on_their_final_observation(tmp_path):
  """MAGICAL shards (il-representations' magical_envs.load_data): a done on each demo's last
  transition, next_obs the following stack, so the final observation is kept; demos end by
  MAGICAL's step budget, a truncation, as magical_demos builds them."""
  eps, report = _episodes(tmp_path / 'data', DUMMY, 'demos-magical-MoveToRegion')
  report.raise_if_invalid()
  _, native = il_representations.read_shard(DUMMY / 'processed/demos/magical/MoveToRegion/demos.tar.zst')
  assert [len(e[fields.STEPS][fields.ACTION]) for e in eps] == [4, 3]
  for episode, rows in zip(eps, (slice(0, 3), slice(3, 5))):
    steps = episode[fields.STEPS]
    assert steps[fields.OBSERVATION].shape[1:] == (12, 96, 96)
    np.testing.assert_array_equal(steps[fields.OBSERVATION][:-1], native['obs'][rows])
    np.testing.assert_array_equal(steps[fields.OBSERVATION][-1], native['next_obs'][rows][-1])
    np.testing.assert_array_equal(steps[fields.ACTION][:-1], native['acts'][rows])
    assert not steps[fields.IS_TERMINAL].any() and steps[fields.IS_LAST][-1]
    np.testing.assert_array_equal(steps[fields.DISCOUNT], 1)
    assert json.loads(episode['env_cfg'])['magical_preproc'] == 'LoResCHW4E'


def test_configs_found_skips_an_unsupported_task_and_names_it(tmp_path, caplog):
  from rlds_suite.exports import il_representations as export  # pylint: disable=g-import-not-at-top
  root = tmp_path / 'root'
  shutil.copytree(DUMMY / 'processed', root / 'processed')
  meta = {'env_cfg': {'benchmark_name': 'minecraft', 'task_name': 'Treechop'},
          'action_space': export.discrete_space(3),
          'observation_space': export.box_space(np.zeros((3, 8, 8), np.uint8),
                                                np.full((3, 8, 8), 255, np.uint8)),
          'color_space': export.color_space('RGB')}
  frames = [{'obs': np.zeros((3, 8, 8), np.uint8), 'next_obs': np.zeros((3, 8, 8), np.uint8),
             'acts': np.int64(0), 'dones': np.bool_(True)}]
  export.write_frames(root / 'processed/demos/minecraft/Treechop/a.tar.zst', meta, frames)
  with caplog.at_level('WARNING'):
    names = [c.name for c in ilr_shards_dataset_builder.configs_found(root)]
  assert 'demos-magical-MoveToRegion' in names and not any('minecraft' in n for n in names)
  assert 'minecraft/Treechop' in caplog.text and "'minecraft'" in caplog.text


def test_bad_input_is_named_and_leaves_no_dataset(tmp_path):
  with pytest.raises(errors.EmptyInputError, match='no \\*.tar.zst shards'):
    datasets.build('ilr_shards/demos-procgen-ninja', manual_dir=str(DUMMY),
                   data_dir=str(tmp_path / 'data'))
  # A shard of another task in this config's directory.
  wrong = tmp_path / 'root' / 'processed' / 'demos' / 'procgen' / 'ninja' / 'demos.tar.zst'
  wrong.parent.mkdir(parents=True)
  shutil.copy(DUMMY / 'processed/demos/procgen/coinrun/demos.tar.zst', wrong)
  with pytest.raises(errors.SchemaError, match='ninja/demos.tar.zst: env_cfg: shard is for procgen/coinrun'):
    datasets.build('ilr_shards/demos-procgen-ninja', manual_dir=str(tmp_path / 'root'),
                   data_dir=str(tmp_path / 'data'))
  # A truncated shard.
  broken = tmp_path / 'broken' / 'processed' / 'demos' / 'procgen' / 'coinrun' / 'demos.tar.zst'
  broken.parent.mkdir(parents=True)
  data = (DUMMY / 'processed/demos/procgen/coinrun/demos.tar.zst').read_bytes()
  broken.write_bytes(data[:len(data) // 2])
  with pytest.raises(errors.CorruptFileError, match='coinrun/demos.tar.zst'):
    datasets.build('ilr_shards/demos-procgen-coinrun', manual_dir=str(tmp_path / 'broken'),
                   data_dir=str(tmp_path / 'data'))
  assert not list((tmp_path / 'data').rglob('dataset_info.json'))


if __name__ == '__main__':
  tfds.testing.test_main()


def test_configs_found_for_undeclared_tasks(tmp_path):
  """A task il_representations_tasks does not declare gets its layout from its shard's metadata."""
  from rlds_suite.exports import il_representations as export  # pylint: disable=g-import-not-at-top
  root = tmp_path / 'root'
  shutil.copytree(DUMMY / 'processed', root / 'data' / 'processed')
  env_cfg = {'benchmark_name': 'atari', 'task_name': 'SpaceInvadersNoFrameskip-v4'}
  meta = {'env_cfg': env_cfg, 'action_space': export.discrete_space(6),
          'observation_space': export.box_space(np.zeros((4, 84, 84), np.uint8),
                                                np.full((4, 84, 84), 255, np.uint8)),
          'color_space': export.color_space('GRAY')}
  frames = [{'obs': np.full((4, 84, 84), t, np.uint8), 'next_obs': np.full((4, 84, 84), t + 1, np.uint8),
             'acts': np.int64(t), 'dones': np.bool_(t == 2)} for t in range(3)]
  export.write_frames(root / 'data/processed/random/atari/SpaceInvadersNoFrameskip-v4/a.tar.zst',
                      meta, frames)
  configs = {c.name: c for c in ilr_shards_dataset_builder.configs_found(root)}
  assert sorted(configs) == ['demos-atari-PongNoFrameskip-v4', 'demos-dm_control-reacher-easy',
                             'demos-magical-MoveToRegion', 'demos-procgen-coinrun',
                             'random-atari-SpaceInvadersNoFrameskip-v4']
  found = configs['random-atari-SpaceInvadersNoFrameskip-v4'].layout
  assert (found.observation_shape, found.num_actions, found.color_space) == ((4, 84, 84), 6, 'GRAY')
  builder = datasets.build('ilr_shards', manual_dir=str(root), data_dir=str(tmp_path / 'data'),
                           config=configs['random-atari-SpaceInvadersNoFrameskip-v4'])
  (episode,) = datasets.numpy_episodes(builder.as_dataset(split='train'))
  np.testing.assert_array_equal(episode[fields.STEPS][fields.ACTION], [0, 1, 2, 0])
  assert episode[fields.STEPS][fields.IS_TERMINAL][-1]
