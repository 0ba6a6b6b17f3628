"""rlds_suite.readers.rl_unplugged: the declared alignment of parsed RL Unplugged episodes."""

import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.readers import rl_unplugged


def _atari(rows: int, last_discount: float) -> dict:
  discounts = np.ones(rows, np.float32)
  discounts[-1] = last_discount
  unclipped = np.arange(rows, dtype=np.float32) * 2 - 3
  return {'observations': np.arange(rows, dtype=np.uint8)[:, None, None, None] * np.ones(
              (1, 84, 84, 1), np.uint8),
          'actions': np.arange(rows) % 4, 'unclipped_rewards': unclipped,
          'clipped_rewards': np.clip(unclipped, -1, 1), 'discounts': discounts,
          'episode_idx': 3, 'checkpoint_idx': 1, 'episode_return': unclipped.sum(),
          'clipped_episode_return': np.clip(unclipped, -1, 1).sum()}


def test_atari_terminated_last_row_is_the_terminal_frame():
  trajectory = rl_unplugged.atari_trajectory(_atari(5, 0.0))
  assert trajectory.ending is episodes.Ending.TERMINATED
  np.testing.assert_array_equal(trajectory.actions, [0, 1, 2, 3])
  np.testing.assert_array_equal(trajectory.rewards, [-3, -1, 1, 3])
  np.testing.assert_array_equal(trajectory.step_metadata['clipped_reward'], [-1, -1, 1, 1])
  assert trajectory.final_observation[0, 0, 0] == 4
  steps = episodes.to_episode(trajectory).steps
  np.testing.assert_array_equal(steps['discount'], [1, 1, 1, 0, 0])
  np.testing.assert_array_equal(steps['is_terminal'], [0, 0, 0, 0, 1])


def test_atari_truncated_rows_are_all_actions():
  trajectory = rl_unplugged.atari_trajectory(_atari(4, 1.0))
  assert trajectory.ending is episodes.Ending.TRUNCATED
  np.testing.assert_array_equal(trajectory.rewards, [-3, -1, 1, 3])
  assert trajectory.final_observation_is_copy
  steps = episodes.to_episode(trajectory).steps
  np.testing.assert_array_equal(steps['discount'], [1, 1, 1, 1, 1])
  np.testing.assert_array_equal(steps['observation_is_copy'], [0, 0, 0, 0, 1])


def test_atari_zero_discount_inside_an_episode_is_refused():
  example = _atari(5, 0.0)
  example['discounts'][2] = 0
  with pytest.raises(errors.EpisodeBoundaryError, match=r'discount 0 before the last row \(rows \[2\]\)'):
    rl_unplugged.atari_trajectory(example)


def _control(step_type, discount) -> dict:
  n = len(step_type)
  return {'observation/position': np.arange(n * 3, dtype=np.float32).reshape(n, 3),
          'observation/velocity': np.zeros((n, 2), np.float32),
          'action': np.arange(n, dtype=np.float32)[:, None] + 10,
          'reward': np.arange(n, dtype=np.float32) / 10, 'discount': np.asarray(discount, np.float32),
          'step_type': np.asarray(step_type, np.float32), 'episode_id': 4, 'timestamp': 5}


SIZES = rl_unplugged.CONTROL_SUITE_TASKS['cartpole_swingup'][0]


def test_control_suite_rsa_rows_to_rlds():
  trajectory = rl_unplugged.control_suite_trajectory(_control([0, 1, 1, 2], [1, 1, 1, 0]), SIZES)
  assert trajectory.ending is episodes.Ending.TERMINATED
  np.testing.assert_array_equal(trajectory.actions[:, 0], [10, 11, 12])  # The LAST one is dropped.
  np.testing.assert_allclose(trajectory.rewards, [0.1, 0.2, 0.3])  # Row t + 1's reward.
  np.testing.assert_array_equal(trajectory.discounts, [1, 1, 0])
  np.testing.assert_array_equal(trajectory.final_observation['position'], [9, 10, 11])
  truncated = rl_unplugged.control_suite_trajectory(_control([0, 1, 2], [1, 1, 1]), SIZES)
  assert truncated.ending is episodes.Ending.TRUNCATED


def test_control_suite_step_types_must_frame_one_episode():
  with pytest.raises(errors.EpisodeBoundaryError, match=r'rows \[2\]'):
    rl_unplugged.control_suite_trajectory(_control([0, 1, 0, 1, 2], [1] * 5), SIZES)
