"""rlds_suite.readers.d4rl_pybullet on files written like d4rl_pybullet/collect.py
(tests/fixtures/write_d4rl_pybullet.py)."""

import pathlib
import shutil

import h5py
import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core.episodes import Ending
from rlds_suite.readers import d4rl_pybullet
from tests.fixtures import write_d4rl_pybullet

FIXTURES = pathlib.Path(__file__).parent / 'fixtures'
MEDIUM = FIXTURES / 'd4rl_pybullet' / 'hopper-bullet-medium-v0.hdf5'
HOPPER = d4rl_pybullet.TASKS[0]


def raw(path: pathlib.Path) -> dict:
  with h5py.File(path, 'r') as f:
    return {key: f[key][()] for key in f}


def test_file_layout_is_the_writers():
  data = raw(MEDIUM)
  assert set(data) == {'observations', 'actions', 'rewards', 'terminals'}
  assert data['rewards'].shape == (12, 1) and data['rewards'].dtype == np.float64
  assert data['terminals'].shape == (12, 1)
  np.testing.assert_array_equal(data['terminals'][:, 0].nonzero()[0], [3, 5, 8])


def test_rewards_shift_from_arrival_to_earned_and_terminal_rows_become_final_steps():
  data = raw(MEDIUM)
  rewards, observations = data['rewards'][:, 0], data['observations']
  trajectories = list(d4rl_pybullet.read_trajectories(MEDIUM, HOPPER))
  # Rows 0-3: 3 actions + terminal row; 4-5: length 1; 6-8: 2 actions; 9-11: unfinished tail.
  assert [len(t.rewards) for t in trajectories] == [3, 1, 2, 2]
  assert [t.ending for t in trajectories] == [Ending.TERMINATED, Ending.TERMINATED,
                                              Ending.TERMINATED, Ending.TRUNCATED]
  for trajectory, (start, stop) in zip(trajectories, [(0, 4), (4, 6), (6, 9), (9, 12)]):
    np.testing.assert_array_equal(trajectory.rewards, rewards[start + 1:stop])  # float64, exact.
    assert trajectory.rewards.dtype == np.float64
    np.testing.assert_array_equal(trajectory.observations, observations[start:stop - 1])
    np.testing.assert_array_equal(trajectory.actions, data['actions'][start:stop - 1])
    np.testing.assert_array_equal(trajectory.final_observation, observations[stop - 1])
  assert all(rewards[start] == 0 for start in (0, 4, 6, 9))  # Stored on arrival: 0 at reset.

  first = episodes.to_episode(trajectories[0]).steps
  np.testing.assert_array_equal(first[fields.OBSERVATION], observations[0:4])
  np.testing.assert_array_equal(first[fields.REWARD], np.append(rewards[1:4], 0))
  np.testing.assert_array_equal(first[fields.IS_TERMINAL], [False, False, False, True])
  np.testing.assert_array_equal(first[fields.DISCOUNT], [1, 1, 0, 0])
  tail = episodes.to_episode(trajectories[-1]).steps
  np.testing.assert_array_equal(tail[fields.IS_TERMINAL], [False, False, False])
  np.testing.assert_array_equal(tail[fields.DISCOUNT], [1, 1, 1])


def test_time_limit_end_is_truncation_and_a_one_row_tail_is_skipped(tmp_path):
  path = write_d4rl_pybullet.write_time_limited(tmp_path)
  data = raw(path)
  assert len(data['rewards']) == 3 + 1001 + 1
  np.testing.assert_array_equal(data['terminals'][:, 0].nonzero()[0], [2, 1003])
  trajectories = list(d4rl_pybullet.read_trajectories(path, HOPPER))
  assert [len(t.rewards) for t in trajectories] == [2, 1000]
  assert [t.ending for t in trajectories] == [Ending.TERMINATED, Ending.TRUNCATED]
  timed_out = episodes.to_episode(trajectories[1]).steps
  assert len(timed_out[fields.REWARD]) == 1001
  assert not timed_out[fields.IS_TERMINAL].any()
  assert (timed_out[fields.DISCOUNT] == 1).all()
  np.testing.assert_array_equal(timed_out[fields.OBSERVATION][-1], data['observations'][1003])


def edited_copy(tmp_path, edit) -> pathlib.Path:
  path = tmp_path / MEDIUM.name
  shutil.copyfile(MEDIUM, path)
  with h5py.File(path, 'r+') as f:
    edit(f)
  return path


def test_reward_on_a_first_row_is_rejected(tmp_path):
  path = edited_copy(tmp_path, lambda f: f['rewards'].__setitem__(4, [1.0]))
  with pytest.raises(errors.EpisodeBoundaryError, match=r'rows \[4\]') as raised:
    list(d4rl_pybullet.read_trajectories(path, HOPPER))
  assert raised.value.path == str(path) and raised.value.field == 'rewards'


def test_terminal_row_starting_an_episode_is_rejected(tmp_path):
  path = edited_copy(tmp_path, lambda f: f['terminals'].__setitem__(4, [True]))
  with pytest.raises(errors.EpisodeBoundaryError, match='row 4') as raised:
    list(d4rl_pybullet.read_trajectories(path, HOPPER))
  assert raised.value.path == str(path) and raised.value.field == 'terminals'


def test_wrong_task_is_a_schema_error(tmp_path):
  walker = d4rl_pybullet.TASKS[3]
  with pytest.raises(errors.SchemaError, match=r'\(22,\)') as raised:
    list(d4rl_pybullet.read_trajectories(MEDIUM, walker))
  assert raised.value.path == str(MEDIUM) and raised.value.field == 'observations'


def test_catalogue():
  ids = [d4rl_pybullet.dataset_id(t, c) for t in d4rl_pybullet.TASKS
         for c in d4rl_pybullet.COLLECTIONS]
  assert sorted(ids) == sorted(d4rl_pybullet.URLS)
  assert all(url.endswith(f'/{name}.hdf5?dl=1') for name, url in d4rl_pybullet.URLS.items())
