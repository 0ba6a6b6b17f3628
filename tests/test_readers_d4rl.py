"""rlds_suite.readers.d4rl on files written like D4RL's own writers (tests/fixtures/write_d4rl.py)."""

import pathlib
import shutil

import h5py
import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core.episodes import Ending
from rlds_suite.readers import d4rl
from rlds_suite.readers import hdf5

FIXTURES = pathlib.Path(__file__).parent / 'fixtures' / 'd4rl'
MEDIUM = FIXTURES / 'halfcheetah_medium-v2.hdf5'
REPLAY = FIXTURES / 'hopper_medium_replay-v2.hdf5'
RANDOM = FIXTURES / 'walker2d_random-v2.hdf5'
NO_TIMEOUTS = FIXTURES / 'no_timeouts.hdf5'

TASKS = {task.name: task for task in d4rl.LOCOMOTION_TASKS}
COLLECTIONS = {collection.name: collection for collection in d4rl.V2_COLLECTIONS}


def layout(task: str, collection: str) -> d4rl.Layout:
  return d4rl.locomotion_layout(TASKS[task], COLLECTIONS[collection])


def raw(path: pathlib.Path) -> dict:
  with h5py.File(path, 'r') as f:
    return {name: f[name][()] for name in hdf5.dataset_names(f)}


def test_medium_file_episodes_follow_terminals_and_timeouts():
  trajectories = list(d4rl.read_trajectories(MEDIUM, layout('halfcheetah', 'medium')))
  data = raw(MEDIUM)
  # Writer: timeout after 4, terminal after 3, terminal after 1, timeout after 4, 2-row tail.
  assert [len(t.rewards) for t in trajectories] == [4, 3, 1, 4, 2]
  assert [t.ending for t in trajectories] == [Ending.TRUNCATED, Ending.TERMINATED,
                                              Ending.TERMINATED, Ending.TRUNCATED, Ending.TRUNCATED]
  starts = np.cumsum([0, 4, 3, 1, 4])
  for start, trajectory in zip(starts, trajectories):
    rows = slice(start, start + len(trajectory.rewards))
    np.testing.assert_array_equal(trajectory.observations, data['observations'][rows])
    np.testing.assert_array_equal(trajectory.actions, data['actions'][rows])
    np.testing.assert_array_equal(trajectory.rewards, data['rewards'][rows])
    # next_observations supply the final observation; within an episode they are the next rows.
    np.testing.assert_array_equal(trajectory.final_observation,
                                  data['next_observations'][rows.stop - 1])
    np.testing.assert_array_equal(trajectory.step_metadata['infos']['qpos'],
                                  data['infos/qpos'][rows])
  assert trajectories[0].step_metadata['infos']['qpos'].dtype == np.float64
  assert trajectories[0].step_metadata['infos']['action_log_probs'].dtype == np.float64


def test_medium_file_metadata_is_declared_and_decoded():
  (first, *_) = d4rl.read_trajectories(MEDIUM, layout('halfcheetah', 'medium'))
  metadata = first.metadata
  assert metadata['algorithm'] == 'SAC'
  assert metadata['iteration'] == 1000 and metadata['iteration'].dtype == np.int32
  assert metadata['policy']['nonlinearity'] == 'relu'
  assert metadata['policy']['output_distribution'] == 'tanh_gaussian'
  assert metadata['policy']['fc1']['weight'].shape == (256, 256)
  np.testing.assert_allclose(metadata['policy']['last_fc_log_std']['bias'], np.full(6, -0.04))


def test_episode_boundaries_and_final_observation_step():
  trajectories = list(d4rl.read_trajectories(MEDIUM, layout('halfcheetah', 'medium')))
  data = raw(MEDIUM)
  terminated = episodes.to_episode(trajectories[1])  # Terminal after 3 actions, rows 4..6.
  steps = terminated.steps
  assert terminated.num_steps == 4  # 3 actions + the final observation.
  np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False, False, False, True])
  np.testing.assert_array_equal(steps[fields.IS_LAST], [False, False, False, True])
  np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 1, 0, 0])
  np.testing.assert_array_equal(steps[fields.REWARD], np.append(data['rewards'][4:7], 0))
  np.testing.assert_array_equal(steps[fields.OBSERVATION][-1], data['next_observations'][6])
  np.testing.assert_array_equal(steps[fields.ACTION][-1], np.zeros(6))
  np.testing.assert_array_equal(steps['infos']['qvel'][-1], np.zeros(9))

  length_one = episodes.to_episode(trajectories[2])
  np.testing.assert_array_equal(length_one.steps[fields.IS_TERMINAL], [False, True])
  np.testing.assert_array_equal(length_one.steps[fields.DISCOUNT], [0, 0])

  timed_out = episodes.to_episode(trajectories[0])
  assert not timed_out.steps[fields.IS_TERMINAL].any()
  np.testing.assert_array_equal(timed_out.steps[fields.DISCOUNT], np.ones(5))


def test_replay_file_column_rewards_and_terminal_at_time_limit():
  trajectories = list(d4rl.read_trajectories(REPLAY, layout('hopper', 'medium-replay')))
  data = raw(REPLAY)
  assert data['rewards'].shape == (11, 1)
  # Writer: terminal after 2, timeout after 3, terminal after 1, done at the time limit (recorded
  # as timeout by collect_data.py, so truncated), 2-row tail.
  assert [len(t.rewards) for t in trajectories] == [2, 3, 1, 3, 2]
  assert [t.ending for t in trajectories] == [Ending.TERMINATED, Ending.TRUNCATED,
                                              Ending.TERMINATED, Ending.TRUNCATED, Ending.TRUNCATED]
  np.testing.assert_array_equal(np.concatenate([t.rewards for t in trajectories]),
                                data['rewards'][:, 0])
  assert trajectories[0].rewards.dtype == np.float32
  assert set(trajectories[0].metadata) == {'algorithm', 'iteration'}
  assert trajectories[0].metadata['iteration'] == 300


def test_file_without_next_observations_repeats_the_last_observation_as_a_marked_copy():
  trajectories = list(d4rl.read_trajectories(RANDOM, layout('walker2d', 'random')))
  data = raw(RANDOM)
  assert [len(t.rewards) for t in trajectories] == [1, 3, 2, 3, 1]
  assert all(t.final_observation_is_copy for t in trajectories)
  assert all(t.metadata == {} for t in trajectories)
  length_one = episodes.to_episode(trajectories[0])
  assert length_one.num_steps == 2  # The action's step, then the placeholder copy.
  np.testing.assert_array_equal(length_one.steps[fields.OBSERVATION],
                                data['observations'][[0, 0]])
  np.testing.assert_array_equal(length_one.steps[fields.OBSERVATION_IS_COPY], [False, True])
  np.testing.assert_array_equal(length_one.steps[fields.IS_TERMINAL], [False, True])
  np.testing.assert_array_equal(length_one.steps[fields.DISCOUNT], [0, 0])
  np.testing.assert_array_equal(length_one.steps[fields.REWARD], [data['rewards'][0], 0])
  tail = episodes.to_episode(trajectories[-1])  # One cut row: truncated.
  np.testing.assert_array_equal(tail.steps[fields.IS_LAST], [False, True])
  np.testing.assert_array_equal(tail.steps[fields.IS_TERMINAL], [False, False])
  np.testing.assert_array_equal(tail.steps[fields.DISCOUNT], [1, 1])
  np.testing.assert_array_equal(tail.steps[fields.REWARD], [*data['rewards'][-1:], 0])
  with_next = list(d4rl.read_trajectories(MEDIUM, layout('halfcheetah', 'medium')))
  assert not any(t.final_observation_is_copy for t in with_next)  # Marked too, as real.


def test_without_layout_reads_everything_stored():
  table = d4rl.read_table(MEDIUM)
  assert set(table.infos) == {'action_log_probs', 'qpos', 'qvel'}
  assert table.infos['action_log_probs'].dtype == np.float32  # As stored.
  assert table.metadata['policy']['fc0']['weight'].shape == (256, 17)
  assert table.metadata['algorithm'] == 'SAC'


def test_no_timeouts_needs_a_time_limit():
  with pytest.raises(errors.SchemaError, match='timeouts') as raised:
    list(d4rl.read_trajectories(NO_TIMEOUTS))
  assert str(NO_TIMEOUTS) in str(raised.value)
  assert raised.value.field == 'timeouts'


def test_no_timeouts_cut_by_time_limit():
  trajectories = list(d4rl.read_trajectories(NO_TIMEOUTS, time_limit=3))
  # Writer: 3 steps stopped by the (unrecorded) time limit, terminal after 2, 3 steps, 2-row tail.
  assert [len(t.rewards) for t in trajectories] == [3, 2, 3, 2]
  assert [t.ending for t in trajectories] == [Ending.TRUNCATED, Ending.TERMINATED,
                                              Ending.TRUNCATED, Ending.TRUNCATED]
  np.testing.assert_array_equal(np.concatenate([t.rewards for t in trajectories]),
                                raw(NO_TIMEOUTS)['rewards'])


# Bad input: each raises a typed error naming the file and the field.


def edited_copy(tmp_path: pathlib.Path, edit, source: pathlib.Path = MEDIUM) -> pathlib.Path:
  path = tmp_path / source.name
  shutil.copyfile(source, path)
  with h5py.File(path, 'r+') as f:
    edit(f)
  return path


def read_all(path: pathlib.Path) -> list:
  return list(d4rl.read_trajectories(path, layout('halfcheetah', 'medium')))


def replace(f: h5py.File, key: str, data) -> None:
  del f[key]
  f.create_dataset(key, data=data)


def test_truncated_file(tmp_path):
  path = tmp_path / MEDIUM.name
  data = MEDIUM.read_bytes()
  path.write_bytes(data[:len(data) // 2])
  with pytest.raises(errors.CorruptFileError) as raised:
    read_all(path)
  assert str(path) in str(raised.value)


def test_not_hdf5(tmp_path):
  path = tmp_path / 'halfcheetah_medium-v2.hdf5'
  path.write_text('not hdf5')
  with pytest.raises(errors.CorruptFileError, match='HDF5') as raised:
    read_all(path)
  assert str(path) in str(raised.value)


@pytest.mark.parametrize('edit, error, field, problem', [
    (lambda f: f.__delitem__('actions'), errors.SchemaError, 'actions', 'missing'),
    (lambda f: replace(f, 'actions', np.full((14, 6), b'x')), errors.SchemaError, 'actions',
     'dtype'),
    (lambda f: replace(f, 'observations', np.zeros(14, np.float32)), errors.SchemaError,
     'observations', 'rank'),
    (lambda f: replace(f, 'observations', np.zeros((14, 11), np.float32)), errors.SchemaError,
     'observations', r'\(17,\)'),
    (lambda f: replace(f, 'rewards', np.zeros((14, 2), np.float32)), errors.SchemaError, 'rewards',
     'shape'),
    (lambda f: replace(f, 'terminals', np.full(14, 2.0)), errors.SchemaError, 'terminals', '0/1'),
    (lambda f: f.__delitem__('infos/qpos'), errors.SchemaError, 'infos/qpos', 'missing'),
    (lambda f: f.__delitem__('metadata/policy/fc1/weight'), errors.SchemaError,
     'metadata/policy/fc1/weight', 'missing'),
    (lambda f: replace(f, 'rewards', np.zeros(13, np.float32)), errors.EpisodeBoundaryError,
     'rewards', '14 rows'),
    (lambda f: replace(f, 'infos/qvel', np.zeros((15, 9))), errors.EpisodeBoundaryError,
     'infos/qvel', '14 rows'),
    (lambda f: f['rewards'].__setitem__(5, np.nan), errors.InvalidValueError, 'rewards',
     r'rows \[5\]'),
])
def test_bad_input(tmp_path, edit, error, field, problem):
  path = edited_copy(tmp_path, edit)
  with pytest.raises(error, match=problem) as raised:
    read_all(path)
  assert raised.value.path == str(path)
  assert raised.value.field == field
  assert str(path) in str(raised.value)


def test_empty_file(tmp_path):
  path = tmp_path / 'empty.hdf5'
  with h5py.File(path, 'w') as f:
    for key in ('observations', 'actions', 'next_observations'):
      f.create_dataset(key, data=np.zeros((0, 17), np.float32))
    for key in ('rewards', 'terminals', 'timeouts'):
      f.create_dataset(key, data=np.zeros(0, np.float32))
  with pytest.raises(errors.EmptyInputError) as raised:
    list(d4rl.read_trajectories(path))
  assert str(path) in str(raised.value)


def test_missing_file(tmp_path):
  with pytest.raises(errors.EmptyInputError) as raised:
    read_all(tmp_path / 'absent.hdf5')
  assert 'absent.hdf5' in str(raised.value)


def test_locomotion_catalogue():
  assert len(d4rl.LOCOMOTION_TASKS) * len(d4rl.V2_COLLECTIONS) == 24
  assert d4rl.file_name(TASKS['hopper'], COLLECTIONS['medium-replay']) == (
      'hopper_medium_replay-v2.hdf5')
  assert d4rl.url(TASKS['ant'], COLLECTIONS['full-replay']) == (
      'http://rail.eecs.berkeley.edu/datasets/offline_rl/gym_mujoco_v2/ant_full_replay-v2.hdf5')
  expert = layout('ant', 'expert')
  assert expert.observation.shape == (111,)
  assert expert.metadata['policy']['fc0']['weight'].shape == (256, 111)
  assert expert.infos['qvel'].shape == (14,)
  assert layout('ant', 'medium-expert').metadata == {}
