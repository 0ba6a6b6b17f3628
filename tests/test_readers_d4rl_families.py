"""Each D4RL family's declared boundary rule on files written by that family's own generation logic
(tests/fixtures/write_d4rl_families.py)."""

import pathlib

import h5py
import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.readers import d4rl_families

FIXTURES = pathlib.Path(__file__).resolve().parent / 'fixtures' / 'd4rl_families'
BY_NAME = {dataset.name: dataset for dataset in d4rl_families.DATASETS}


def _read(name):
  dataset = BY_NAME[name]
  trajectories, counts = d4rl_families.read(FIXTURES / dataset.file_name, dataset)
  return list(trajectories), counts


def test_jump_ends():
  positions = np.array([[0, 0], [0.3, 0], [0.6, 0.2], [8, 8], [8.2, 8], [0, 0.1]])
  np.testing.assert_array_equal(episodes.jump_ends(positions, 1.0),
                                [False, False, True, False, True, False])
  assert not episodes.jump_ends(np.zeros((1, 2)), 1.0).any()


def test_antmaze_cut_at_resets_not_at_flags():
  trajectories, counts = _read('antmaze-umaze-diverse-v2')
  # The generator reset the ant after rows 9, 19 and 34 (timeouts: ts >= 9, so 10 rows each) and
  # after row 24, where the ant flipped (AntEnv's done) and no timeout was recorded.
  assert [len(t.rewards) for t in trajectories] == [10, 10, 5, 10, 5]
  # v2's timeouts are resets; the flip's reset is found from the jump alone.
  assert counts == d4rl_families.BoundaryCounts(episodes=5, inferred_ends=1, stored_timeouts=3,
                                                stored_timeouts_at_ends=3)
  # No episode terminated: the relabelled terminals (goal within 0.5 of row t+1) are kept per step.
  assert all(t.ending is episodes.Ending.TRUNCATED for t in trajectories)
  with h5py.File(FIXTURES / BY_NAME['antmaze-umaze-diverse-v2'].file_name) as f:
    terminals = f['terminals'][:]
    rewards = f['rewards'][:]
  goal = np.concatenate([t.step_metadata[d4rl_families.GOAL_REACHED] for t in trajectories])
  np.testing.assert_array_equal(goal, terminals.astype(bool))
  assert goal[26:34].all() and goal.sum() == 8  # Reached mid-episode; the ant went on.
  np.testing.assert_array_equal(np.concatenate([t.rewards for t in trajectories]), rewards)
  steps = episodes.to_episode(trajectories[3]).steps
  assert not steps[fields.IS_TERMINAL].any() and (steps[fields.DISCOUNT] == 1).all()


def test_antmaze_v0_without_timeouts():
  # The v0-era generator wrote no timeouts and recorded resets only in terminals, which the
  # relabelling then overwrote: the position jumps are the only record of the resets left.
  trajectories, counts = _read('antmaze-umaze-diverse-v0')
  with h5py.File(FIXTURES / BY_NAME['antmaze-umaze-diverse-v0'].file_name) as f:
    assert 'timeouts' not in f
  assert [len(t.rewards) for t in trajectories] == [10, 10, 5, 10, 5]
  assert counts == d4rl_families.BoundaryCounts(episodes=5, inferred_ends=4, stored_timeouts=-1,
                                                stored_timeouts_at_ends=0)
  assert all(t.ending is episodes.Ending.TRUNCATED for t in trajectories)


def test_antmaze_v0_timeouts_that_miss_the_resets_are_counted_not_used(tmp_path):
  v0 = BY_NAME['antmaze-umaze-diverse-v0']
  path = tmp_path / v0.file_name
  path.write_bytes((FIXTURES / BY_NAME['antmaze-umaze-diverse-v2'].file_name).read_bytes())
  with h5py.File(path, 'a') as f:  # Timeouts one row off the resets, as released v0 files have.
    f['timeouts'][...] = np.roll(f['timeouts'][:], 1)
  trajectories, counts = d4rl_families.read(path, v0)
  assert [len(t.rewards) for t in trajectories] == [10, 10, 5, 10, 5]
  assert counts == d4rl_families.BoundaryCounts(episodes=5, inferred_ends=4, stored_timeouts=3,
                                                stored_timeouts_at_ends=0)


def test_maze2d_goal_switches_are_truncations():
  trajectories, counts = _read('maze2d-umaze-v1')
  with h5py.File(FIXTURES / BY_NAME['maze2d-umaze-v1'].file_name) as f:
    terminals = f['terminals'][:]
    observations = f['observations'][:]
    qpos = f['infos/qpos'][:]
    assert 'timeouts' not in f
  ends = np.flatnonzero(terminals)
  assert ends.tolist() == [0, 6, 15, 16, 17, 22]
  assert [len(t.rewards) for t in trajectories] == [1, 6, 9, 1, 1, 5, 7]  # Last: unfinished tail.
  assert counts.episodes == 7 and counts.inferred_ends == 0 and counts.stored_timeouts == -1
  assert all(t.ending is episodes.Ending.TRUNCATED for t in trajectories)
  # The generator keeps the stale `s` after a goal switch: the next row repeats the observation,
  # while infos/qpos hold where the point mass really was.
  np.testing.assert_array_equal(observations[7], observations[6])
  assert not np.allclose(qpos[7], observations[7][:2])


def test_adroit_human_timeouts_end_demos():
  trajectories, counts = _read('door-human-v1')
  assert [len(t.rewards) for t in trajectories] == [5, 3, 6]
  assert all(t.ending is episodes.Ending.TRUNCATED for t in trajectories)
  assert counts == d4rl_families.BoundaryCounts(3, 0, 3, 3)
  assert trajectories[0].step_metadata['infos']['door_body_pos'].shape == (5, 3)


def test_adroit_expert_terminal_is_termination():
  trajectories, _ = _read('pen-expert-v1')
  # Rollouts: 6 steps (timeout), 4 (the pen dropped: env done), 6 (timeout).
  assert [len(t.rewards) for t in trajectories] == [6, 4, 6]
  assert [t.ending for t in trajectories] == [episodes.Ending.TRUNCATED, episodes.Ending.TERMINATED,
                                              episodes.Ending.TRUNCATED]
  steps = episodes.to_episode(trajectories[1]).steps
  assert steps[fields.IS_TERMINAL][-1] and steps[fields.DISCOUNT][-1] == 0
  assert set(trajectories[0].step_metadata['infos']) == {
      'qpos', 'qvel', 'desired_orien', 'action_mean', 'action_log_std'}


def test_kitchen_demo_ends_are_truncations():
  trajectories, counts = _read('kitchen-partial-v0')
  assert [len(t.rewards) for t in trajectories] == [4, 6, 3]
  assert all(t.ending is episodes.Ending.TRUNCATED for t in trajectories)
  assert counts.stored_timeouts == -1


def test_missing_declared_info_names_file_and_field(tmp_path):
  dataset = BY_NAME['door-human-v1']
  path = tmp_path / dataset.file_name
  path.write_bytes((FIXTURES / dataset.file_name).read_bytes())
  with h5py.File(path, 'a') as f:
    del f['infos/door_body_pos']
  with pytest.raises(errors.SchemaError, match='infos/door_body_pos') as e:
    d4rl_families.read(path, dataset)
  assert e.value.path == str(path)


def test_declared_urls_follow_d4rl_infos():
  # Spot checks against D4RL's d4rl/infos.py DATASET_URLS.
  root = 'http://rail.eecs.berkeley.edu/datasets/offline_rl/'
  assert BY_NAME['antmaze-medium-play-v0'].url == (
      root + 'ant_maze_new/Ant_maze_big-maze_noisy_multistart_True_multigoal_False_sparse.hdf5')
  assert BY_NAME['antmaze-large-diverse-v2'].url == (
      root + 'ant_maze_v2/Ant_maze_hardest-maze_noisy_multistart_True_multigoal_True_sparse_fixed.hdf5')
  assert BY_NAME['maze2d-open-dense-v0'].url == root + 'maze2d/maze2d-open-dense.hdf5'
  assert BY_NAME['maze2d-large-v1'].url == root + 'maze2d/maze2d-large-sparse-v1.hdf5'
  assert BY_NAME['relocate-cloned-v0'].url == root + 'hand_dapg/relocate-demos-v0-bc-combined.hdf5'
  assert BY_NAME['pen-human-v1'].url == root + 'hand_dapg_v1/pen-human-v1.hdf5'
  assert BY_NAME['kitchen-complete-v0'].url == (
      root + 'kitchen/mini_kitchen_microwave_kettle_light_slider-v0.hdf5')
  assert len(BY_NAME) == 47


def test_adroit_file_without_timeouts(tmp_path):
  dataset = BY_NAME['door-human-v1']
  path = tmp_path / dataset.file_name
  path.write_bytes((FIXTURES / dataset.file_name).read_bytes())
  with h5py.File(path, 'a') as f:
    del f['timeouts']
  with pytest.raises(errors.SchemaError, match='adroit files end every episode with timeouts') as e:
    d4rl_families.read(path, dataset)
  assert (e.value.path, e.value.field) == (str(path), 'timeouts')

