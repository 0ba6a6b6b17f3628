"""readers.ilr_atari: il-representations Atari demos, real file and fixtures, and bad input."""

import pathlib
import sys

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core.episodes import Ending
from rlds_suite.readers import ilr_atari

sys.path.insert(0, str(pathlib.Path(__file__).parent / 'fixtures'))
import write_ilr_atari  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_real_pong_file_matches_the_authors_loader(real_data):
  path = real_data / 'il_representations' / 'native' / 'atari-pong.npz'
  trajectories = list(ilr_atari.read_trajectories(path))
  native = np.load(path, allow_pickle=True)['arr_0']
  assert [len(t.actions) for t in trajectories] == [500, 500]
  for trajectory, recorded in zip(trajectories, native):
    assert trajectory.ending is Ending.TRUNCATED and trajectory.final_observation_is_copy
    # il-representations' load_dataset_atari: obs = states[:-1], next_obs = states[1:].
    states = np.stack(recorded['states'])
    np.testing.assert_array_equal(trajectory.observations[:-1], states[:-1])
    np.testing.assert_array_equal(trajectory.observations[1:], states[1:])
    np.testing.assert_array_equal(trajectory.actions, np.stack(recorded['actions']))
    assert trajectory.metadata['has_rewards'] is False


def test_fixture_splits_at_dones(fixtures):
  found = list(ilr_atari.read_trajectories(fixtures / 'ilr_atari' / 'pong.npz'))
  assert [(len(t.actions), t.ending) for t in found] == [
      (3, Ending.TERMINATED), (3, Ending.TRUNCATED), (4, Ending.TRUNCATED)]
  assert [int(t.metadata['episode_in_trajectory']) for t in found] == [0, 1, 0]
  np.testing.assert_array_equal(found[1].observations[0, 0, 0], [0, 0, 0, 4])


def test_npz_without_arr_0(tmp_path):
  path = tmp_path / 'pong.npz'
  np.savez(path, demos=np.zeros(3))
  with pytest.raises(errors.SchemaError, match=r"pong.npz: arr_0: missing member 'arr_0'"):
    list(ilr_atari.read_trajectories(path))


def test_mismatched_list_lengths(tmp_path):
  demo = write_ilr_atari.record(0, [1, 2, 3], [False] * 3)
  demo['actions'] = demo['actions'][:2]
  path = tmp_path / 'pong.npz'
  write_ilr_atari.write(path, [demo])
  with pytest.raises(errors.EpisodeBoundaryError, match=r"pong.npz: acts: .*'obs': 3, 'acts': 2"):
    list(ilr_atari.read_trajectories(path))


def test_wrong_frame_shape_and_truncated_file(tmp_path):
  demo = write_ilr_atari.record(0, [1, 2], [False] * 2)
  demo['states'] = [s[:42] for s in demo['states']]
  path = tmp_path / 'pong.npz'
  write_ilr_atari.write(path, [demo])
  with pytest.raises(errors.SchemaError, match=r'arr_0\[0\].states: expected rows of uint8\[84, 84, 4\]'):
    list(ilr_atari.read_trajectories(path))
  good = tmp_path / 'good.npz'
  write_ilr_atari.write(good, write_ilr_atari.trajectories())
  cut = tmp_path / 'cut_pong.npz'
  cut.write_bytes(good.read_bytes()[:len(good.read_bytes()) // 2])
  with pytest.raises(errors.CorruptFileError, match='cut_pong.npz'):
    list(ilr_atari.read_trajectories(cut))


def test_demo_paths_by_game(tmp_path):
  for name in ('pong.npz', 'PongNoFrameskip-v4_rollouts_500_ts_100_traj.npz', 'breakout.npz'):
    (tmp_path / name).write_bytes(b'')
  assert [p.name for p in ilr_atari.demo_paths(tmp_path, ilr_atari.GAMES['pong'])] == [
      'PongNoFrameskip-v4_rollouts_500_ts_100_traj.npz', 'pong.npz']
  with pytest.raises(errors.EmptyInputError, match='seaquest'):
    ilr_atari.demo_paths(tmp_path, ilr_atari.Game.of('SeaquestNoFrameskip-v4'))
