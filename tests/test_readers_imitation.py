"""imitation rollouts reader: fixture fidelity, values, endings, and bad input as typed errors."""

import dataclasses
import io
import os
import pathlib
import pickle
import zipfile

import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import safe_pickle
from rlds_suite.readers import files
from rlds_suite.readers import imitation
from tests.fixtures import write_imitation

FIXTURES = pathlib.Path(__file__).resolve().parent / 'fixtures' / 'imitation'
REAL_FILE = (pathlib.Path(__file__).resolve().parents[2] / 'shared' / 'real_data' / 'imitation' /
             'cartpole_0_rollouts_final.npz')
CARTPOLE = imitation.LAYOUTS['cartpole']




class _RecordingUnpickler(safe_pickle.RestrictedUnpickler):
  """Records every global a pickle asks for."""

  def __init__(self, file):
    super().__init__(file)
    self.asked = set()

  def find_class(self, module, name):
    self.asked.add((module, name))
    return super().find_class(module, name)


def _globals(data: bytes) -> set:
  unpickler = _RecordingUnpickler(io.BytesIO(data))
  unpickler.load()
  return unpickler.asked


def _npy_body(path: pathlib.Path, member: str) -> bytes:
  """The pickle inside an object-array member of an npz (what follows the .npy header)."""
  with zipfile.ZipFile(path) as archive, archive.open(member) as f:
    np.lib.format.read_magic(f)
    np.lib.format.read_array_header_1_0(f)
    return f.read()


def _resave(path: pathlib.Path, source: pathlib.Path, **changes) -> pathlib.Path:
  """`source`'s members with `changes` (None drops a member), written as savez_compressed does."""
  members = files.load_npz(source)
  members.update(changes)
  np.savez_compressed(path, **{k: v for k, v in members.items() if v is not None})
  return path


# Fixture fidelity.


@pytest.mark.skipif(not REAL_FILE.is_file(), reason='no real imitation rollouts')
def test_npz_fixture_has_the_real_files_members_and_pickled_globals():
  with zipfile.ZipFile(REAL_FILE) as real, zipfile.ZipFile(FIXTURES / 'cartpole_rollouts.npz') as ours:
    assert ours.namelist() == real.namelist() == [
        'obs.npy', 'acts.npy', 'infos.npy', 'terminal.npy', 'indices.npy', 'rews.npy']
  real = _globals(_npy_body(REAL_FILE, 'infos.npy'))
  ours = _globals(_npy_body(FIXTURES / 'cartpole_rollouts.npz', 'infos.npy'))
  # numpy 2 names its core module numpy._core where numpy 1 wrote numpy.core.
  assert ours == {(m.replace('numpy.core', 'numpy._core'), n) for m, n in real}


def test_pickle_fixtures_refer_to_imitations_classes():
  assert ('imitation.data.types', 'TrajectoryWithRew') in _globals(
      (FIXTURES / 'cartpole_rollouts.pkl').read_bytes())
  without_rewards = _globals((FIXTURES / 'cartpole_no_rewards.pkl').read_bytes())
  assert ('imitation.data.types', 'Trajectory') in without_rewards
  assert ('imitation.data.types', 'TrajectoryWithRew') not in without_rewards


# Values.


def _assert_matches(trajectory: episodes.Trajectory, native) -> None:
  np.testing.assert_array_equal(trajectory.observations, native.obs[:-1])
  np.testing.assert_array_equal(trajectory.final_observation, native.obs[-1])
  np.testing.assert_array_equal(trajectory.actions, native.acts)
  assert trajectory.actions.dtype == np.int64
  if hasattr(native, 'rews'):
    np.testing.assert_array_equal(trajectory.rewards, native.rews)
    assert trajectory.metadata['has_rewards']
  else:
    np.testing.assert_array_equal(trajectory.rewards, np.zeros(len(native.acts)))
    assert not trajectory.metadata['has_rewards']
  assert trajectory.metadata['native_terminal'] == native.terminal


@pytest.mark.parametrize('name, natives', [
    ('cartpole_rollouts.npz', write_imitation.CARTPOLE_NPZ),
    ('cartpole_rollouts.pkl', write_imitation.CARTPOLE_PICKLE),
    ('cartpole_single.npz', write_imitation.CARTPOLE_SINGLE_NPZ),
    ('cartpole_no_rewards.npz', write_imitation.CARTPOLE_NO_REWARDS_PICKLE),
    ('cartpole_no_rewards.pkl', write_imitation.CARTPOLE_NO_REWARDS_PICKLE),
])
def test_read_rollouts_values(name, natives):
  trajectories = imitation.read_rollouts(FIXTURES / name, CARTPOLE)
  assert len(trajectories) == len(natives)
  for index, (trajectory, native) in enumerate(zip(trajectories, natives)):
    _assert_matches(trajectory, native)
    assert trajectory.metadata['source_file'] == name
    assert trajectory.metadata['trajectory_index'] == index
    assert not trajectory.step_metadata  # The cartpole layout declares no info keys.


def test_endings_from_terminal_flag_and_time_limit_info():
  endings = [t.ending for t in imitation.read_rollouts(FIXTURES / 'cartpole_rollouts.npz', CARTPOLE)]
  terminated, truncated = episodes.Ending.TERMINATED, episodes.Ending.TRUNCATED
  # terminal, terminal (length 1, no infos), fragment (terminal=False), terminal with
  # TimeLimit.truncated on its last info.
  assert endings == [terminated, terminated, truncated, truncated]


def test_episode_steps_of_a_length_one_trajectory():
  (_, episode, *_) = imitation.read_episodes(FIXTURES / 'cartpole_rollouts.npz', CARTPOLE)
  native = write_imitation.CARTPOLE_NPZ[1]
  steps = episode.steps
  np.testing.assert_array_equal(steps[fields.OBSERVATION], native.obs)
  np.testing.assert_array_equal(steps[fields.ACTION], [native.acts[0], 0])
  np.testing.assert_array_equal(steps[fields.REWARD], [native.rews[0], 0])
  np.testing.assert_array_equal(steps[fields.IS_FIRST], [True, False])
  np.testing.assert_array_equal(steps[fields.IS_LAST], [False, True])
  np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False, True])
  np.testing.assert_array_equal(steps[fields.DISCOUNT], [0, 0])


def test_pendulum_layout_casts_float32_rewards_exactly():
  trajectories = imitation.read_rollouts(FIXTURES / 'pendulum_rollouts.npz',
                                         imitation.LAYOUTS['pendulum'])
  for trajectory, native in zip(trajectories, write_imitation.PENDULUM_NPZ):
    assert trajectory.rewards.dtype == np.float64
    np.testing.assert_array_equal(trajectory.rewards, native.rews)
    assert trajectory.actions.shape == (len(native.acts), 1)
    assert trajectory.ending is episodes.Ending.TERMINATED


@pytest.mark.parametrize('name, layout, natives', [
    ('cartpole_rollouts.pkl', 'cartpole', write_imitation.CARTPOLE_PICKLE),
    ('pendulum_rollouts.pkl', 'pendulum', write_imitation.PENDULUM_PICKLE),
    ('cartpole_rollouts.npz', 'cartpole', write_imitation.CARTPOLE_NPZ),
])
def test_older_pickles_float64_observations_are_kept_exactly(name, layout, natives):
  """The older pickles hold float64 observations (gym's own); the npz files float32: both exact."""
  trajectories = imitation.read_rollouts(FIXTURES / name, imitation.LAYOUTS[layout])
  assert len(trajectories) == len(natives)
  for trajectory, native in zip(trajectories, natives):
    assert native.obs.dtype == (np.float32 if name.endswith('.npz') else np.float64)
    assert trajectory.observations.dtype == np.float64
    observations = np.concatenate([trajectory.observations, trajectory.final_observation[None]])
    assert observations.tobytes() == native.obs.astype(np.float64).tobytes()
    assert trajectory.rewards.tobytes() == native.rews.astype(np.float64).tobytes()


def test_declared_time_limit_turns_terminal_episodes_at_the_limit_into_truncations(tmp_path):
  layout = dataclasses.replace(CARTPOLE, time_limit=3)
  path = tmp_path / 'cartpole.npz'
  write_imitation.save_npz(path, [write_imitation.cartpole_trajectory(3, terminal=True, seed=1),
                         write_imitation.cartpole_trajectory(2, terminal=True, seed=2)])
  endings = [t.ending for t in imitation.read_rollouts(path, layout)]
  assert endings == [episodes.Ending.TRUNCATED, episodes.Ending.TERMINATED]


def _with_infos(num_actions: int, infos: list, seed: int = 0):
  base = write_imitation.cartpole_trajectory(num_actions, terminal=True, seed=seed)
  return write_imitation.TrajectoryWithRew(obs=base.obs, acts=base.acts, infos=write_imitation.infos_array(infos),
                                   terminal=True, rews=base.rews)


def test_declared_info_keys_become_step_metadata_and_others_are_dropped(tmp_path):
  layout = dataclasses.replace(CARTPOLE, info_keys={'speed': ((), np.float32)})
  path = tmp_path / 'cartpole.npz'
  write_imitation.save_npz(path, [_with_infos(3, [{'speed': 0.5, 'other': 'x'}, {'speed': 1.5},
                                         {'speed': 2.5, 'episode': {'r': 3.0}}])])
  (episode,) = imitation.read_episodes(path, layout)
  np.testing.assert_array_equal(episode.steps['infos']['speed'], [0.5, 1.5, 2.5, 0.0])
  assert set(episode.steps['infos']) == {'speed'}


def test_declared_info_key_missing_at_a_step(tmp_path):
  layout = dataclasses.replace(CARTPOLE, info_keys={'speed': ((), np.float32)})
  path = tmp_path / 'cartpole.npz'
  write_imitation.save_npz(path, [_with_infos(2, [{'speed': 0.5}, {}])])
  with pytest.raises(errors.SchemaError, match=r'cartpole.npz: infos/speed: trajectory 0.*\[1\]'):
    imitation.read_rollouts(path, layout)


@pytest.mark.skipif(not REAL_FILE.is_file(), reason='no real imitation rollouts')
def test_real_rollouts_terminal_flags():
  data = np.load(REAL_FILE)  # Numeric members only: np.load refuses the pickled infos.
  lengths = np.diff(np.concatenate([[0], data['indices'], [len(data['acts'])]]))
  # With the flag alone, imitation's terminal flags map one to one onto terminations.
  flag_only = dataclasses.replace(CARTPOLE, time_limit=None)
  endings = [t.ending for t in imitation.read_rollouts(REAL_FILE, flag_only)]
  assert endings == [episodes.Ending.TERMINATED if flag else episodes.Ending.TRUNCATED
                     for flag in data['terminal']]
  # The cartpole layout also knows CartPole-v1's 500-step limit.
  endings = [t.ending for t in imitation.read_rollouts(REAL_FILE, CARTPOLE)]
  assert endings == [episodes.Ending.TERMINATED if flag and length < 500 else
                     episodes.Ending.TRUNCATED for flag, length in zip(data['terminal'], lengths)]


# Bad input.


def test_truncated_npz(tmp_path):
  data = (FIXTURES / 'cartpole_rollouts.npz').read_bytes()
  path = tmp_path / 'cartpole_cut.npz'
  path.write_bytes(data[:len(data) // 2])
  with pytest.raises(errors.CorruptFileError, match='cartpole_cut.npz'):
    imitation.read_rollouts(path, CARTPOLE)


def test_npz_member_with_damaged_data(tmp_path):
  path = tmp_path / 'cartpole_bad.npz'
  with zipfile.ZipFile(path, 'w') as archive:
    archive.writestr('obs.npy', b'\x93NUMPY\x01\x00garbage')
  with pytest.raises(errors.CorruptFileError, match='cartpole_bad.npz: obs'):
    imitation.read_rollouts(path, CARTPOLE)


def test_npz_missing_indices(tmp_path):
  path = _resave(tmp_path / 'cartpole.npz', FIXTURES / 'cartpole_rollouts.npz', indices=None)
  with pytest.raises(errors.SchemaError, match=r"cartpole.npz: indices: missing member 'indices'"):
    imitation.read_rollouts(path, CARTPOLE)


def test_npz_obs_not_equal_to_acts_plus_trajectories(tmp_path):
  members = files.load_npz(FIXTURES / 'cartpole_rollouts.npz')
  path = _resave(tmp_path / 'cartpole.npz', FIXTURES / 'cartpole_rollouts.npz',
                 obs=members['obs'][:-1])
  with pytest.raises(errors.EpisodeBoundaryError, match=r'cartpole.npz: obs: .*10 \+ 4 = 14.*13'):
    imitation.read_rollouts(path, CARTPOLE)


@pytest.mark.parametrize('field, change', [
    ('rews', lambda m: m['rews'][:-1]),
    ('infos', lambda m: m['infos'][1:]),
    ('terminal', lambda m: m['terminal'][:2]),
    ('indices', lambda m: m['indices'][::-1]),
    ('indices', lambda m: m['indices'].astype(np.float32)),
])
def test_npz_inconsistent_members(tmp_path, field, change):
  members = files.load_npz(FIXTURES / 'cartpole_rollouts.npz')
  path = _resave(tmp_path / 'cartpole.npz', FIXTURES / 'cartpole_rollouts.npz',
                 **{field: change(members)})
  with pytest.raises((errors.EpisodeBoundaryError, errors.SchemaError),
                     match=f'cartpole.npz: {field}: '):
    imitation.read_rollouts(path, CARTPOLE)


def test_nan_rewards_name_file_and_trajectory(tmp_path):
  members = files.load_npz(FIXTURES / 'cartpole_rollouts.npz')
  rews = members['rews'].copy()
  rews[5] = np.nan  # Trajectory 2 (lengths 3, 1, 4, 2), its second action.
  path = _resave(tmp_path / 'cartpole.npz', FIXTURES / 'cartpole_rollouts.npz', rews=rews)
  with pytest.raises(errors.InvalidValueError,
                     match=r'cartpole.npz: reward: trajectory 2: non-finite values at steps \[1\]'):
    imitation.read_episodes(path, CARTPOLE)


def test_file_of_another_layout(tmp_path):
  with pytest.raises(errors.SchemaError,
                     match=r'pendulum_rollouts.npz: obs: trajectory 0: expected rows of float64\[4\]'):
    imitation.read_rollouts(FIXTURES / 'pendulum_rollouts.npz', CARTPOLE)


def test_lossy_dtype_is_refused(tmp_path):
  members = files.load_npz(FIXTURES / 'cartpole_rollouts.npz')
  path = _resave(tmp_path / 'cartpole.npz', FIXTURES / 'cartpole_rollouts.npz',
                 acts=members['acts'].astype(np.float64))
  with pytest.raises(errors.SchemaError, match=r'cartpole.npz: acts: .*int64\[\], got float64\[\]'):
    imitation.read_rollouts(path, CARTPOLE)


def test_pickle_of_an_unknown_class(tmp_path):
  path = tmp_path / 'cartpole.pkl'
  # [mylab.rollouts.Episode()] in pickle protocol 0.
  path.write_bytes(b'(lp0\ncmylab.rollouts\nEpisode\np1\n(tRp2\na.')
  with pytest.raises(errors.UnsafePickleError, match=r'cartpole.pkl: .*mylab.rollouts.Episode'):
    imitation.read_rollouts(path, CARTPOLE)


class _RunsCode:

  def __init__(self, marker: pathlib.Path):
    self.marker = marker

  def __reduce__(self):
    return (os.system, (f'touch {self.marker}',))


def test_malicious_pickle_is_refused_without_running(tmp_path):
  marker = tmp_path / 'pwned'
  path = tmp_path / 'cartpole.pkl'
  path.write_bytes(pickle.dumps([_RunsCode(marker)]))
  assert b'system' in path.read_bytes()
  with pytest.raises(errors.UnsafePickleError, match=r'cartpole.pkl: .*system'):
    imitation.read_rollouts(path, CARTPOLE)
  assert not marker.exists()


def test_malicious_infos_member_is_refused_without_running(tmp_path):
  marker = tmp_path / 'pwned'
  members = files.load_npz(FIXTURES / 'cartpole_rollouts.npz')
  infos = members['infos'].copy()
  infos[0] = _RunsCode(marker)
  path = _resave(tmp_path / 'cartpole.npz', FIXTURES / 'cartpole_rollouts.npz', infos=infos)
  with pytest.raises(errors.UnsafePickleError, match=r'cartpole.npz: infos: .*system'):
    imitation.read_rollouts(path, CARTPOLE)
  assert not marker.exists()


@pytest.mark.parametrize('content, problem', [
    ({'trajectories': []}, 'expected a list of trajectories, got dict'),
    ([{'obs': [0]}], 'item 0: expected imitation.data.types.Trajectory'),
    ([], 'the file holds no trajectory'),
])
def test_pickle_of_the_wrong_shape(tmp_path, content, problem):
  path = tmp_path / 'cartpole.pkl'
  path.write_bytes(pickle.dumps(content))
  with pytest.raises((errors.SchemaError, errors.EmptyInputError), match=f'cartpole.pkl: {problem}'):
    imitation.read_rollouts(path, CARTPOLE)


def test_truncated_pickle(tmp_path):
  data = (FIXTURES / 'cartpole_rollouts.pkl').read_bytes()
  path = tmp_path / 'cartpole.pkl'
  path.write_bytes(data[:len(data) // 2])
  with pytest.raises(errors.CorruptFileError, match='cartpole.pkl'):
    imitation.read_rollouts(path, CARTPOLE)


def test_rollout_paths(tmp_path):
  (tmp_path / 'cartpole_0' / 'rollouts').mkdir(parents=True)
  for name in ('cartpole_0/rollouts/final.npz', 'cartpole_a.pkl', 'pendulum_a.npz', 'notes.txt'):
    (tmp_path / name).write_bytes(b'')
  assert imitation.rollout_paths(tmp_path, CARTPOLE) == [
      tmp_path / 'cartpole_0/rollouts/final.npz', tmp_path / 'cartpole_a.pkl']


def test_empty_manual_dir(tmp_path):
  with pytest.raises(errors.EmptyInputError, match=str(tmp_path)):
    imitation.rollout_paths(tmp_path, CARTPOLE)
  (tmp_path / 'pendulum_a.npz').write_bytes(b'')
  with pytest.raises(errors.EmptyInputError, match="starts with 'cartpole'"):
    imitation.rollout_paths(tmp_path, CARTPOLE)
