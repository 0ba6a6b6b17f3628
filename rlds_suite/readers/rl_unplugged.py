"""RL Unplugged episodes (one tf.Example per episode, already parsed to numpy) -> trajectories.

Parsing the GZIP TFRecord shards is `rlds_suite.tfds.tfrecord_episodes`' job (numpy, no TensorFlow,
with the parse specs published with TFDS's rlu_atari / rlu_control_suite builders); this module
holds the alignment of the parsed rows, declared as BoundaryPolicies.

Atari (`atari_episodes_ordered`): row t holds o_t (PNG), a_t, the rewards a_t earned (unclipped and
clipped to [-1, 1]) and the discount of arriving at o_t. A terminated episode is marked by a 0
discount on its last row, which holds only the terminal observation (TFDS's rlu_atari reads it so:
"in the last step only the observation has valid information"); otherwise every row is an action
and the observation after the last one was not kept.

Control suite (`dm_control_suite_episodes`): dm_env time steps, RSA-aligned: row t holds the reward
and discount of arriving at o_t, then a_t; the first row's reward and discount belong to no action,
the last row's action is never taken. `step_type` is 0 (FIRST), 1 (MID), 2 (LAST); an episode
terminated when its LAST row has discount 0.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import errors

ATARI_POLICY = episodes.BoundaryPolicy(
    final_observation=episodes.FinalObservation.LAST_ROW_WHEN_TERMINATED,
    reward_timing=episodes.RewardTiming.EARNED,
    discount_timing=episodes.RewardTiming.ON_ARRIVAL)
CONTROL_SUITE_POLICY = episodes.BoundaryPolicy(
    final_observation=episodes.FinalObservation.LAST_ROW,
    reward_timing=episodes.RewardTiming.ON_ARRIVAL,
    discount_timing=episodes.RewardTiming.ON_ARRIVAL)
FIRST, MID, LAST = 0, 1, 2
ATARI_FRAME_SHAPE = (84, 84, 1)  # Grayscale PNG frames, no frame stack.

# The 46 games x 5 runs of RL Unplugged Atari; three games have 49 shards instead of 50.
ATARI_GAMES = (
    'Alien', 'Amidar', 'Assault', 'Asterix', 'Atlantis', 'BankHeist', 'BattleZone', 'BeamRider',
    'Boxing', 'Breakout', 'Carnival', 'Centipede', 'ChopperCommand', 'CrazyClimber', 'DemonAttack',
    'DoubleDunk', 'Enduro', 'FishingDerby', 'Freeway', 'Frostbite', 'Gopher', 'Gravitar', 'Hero',
    'IceHockey', 'Jamesbond', 'Kangaroo', 'Krull', 'KungFuMaster', 'MsPacman', 'NameThisGame',
    'Phoenix', 'Pong', 'Pooyan', 'Qbert', 'Riverraid', 'RoadRunner', 'Robotank', 'Seaquest',
    'SpaceInvaders', 'StarGunner', 'TimePilot', 'UpNDown', 'VideoPinball', 'WizardOfWor',
    'YarsRevenge', 'Zaxxon')
ATARI_SHORT_GAMES = ('Carnival', 'Gravitar', 'StarGunner')
ATARI_URL = 'https://storage.googleapis.com/rl_unplugged/atari_episodes_ordered'
# Task -> (observation sizes, action size), as the published parse specs declare them.
CONTROL_SUITE_TASKS = {
    'cartpole_swingup': ({'position': 3, 'velocity': 2}, 1),
    'cheetah_run': ({'position': 8, 'velocity': 9}, 6),
    'finger_turn_hard': ({'position': 4, 'velocity': 3, 'target_position': 2,
                          'dist_to_target': 1}, 2),
    'fish_swim': ({'target': 3, 'velocity': 13, 'upright': 1, 'joint_angles': 7}, 5),
    'humanoid_run': ({'velocity': 27, 'com_velocity': 3, 'torso_vertical': 3, 'extremities': 12,
                      'head_height': 1, 'joint_angles': 21}, 21),
    'manipulator_insert_ball': ({'arm_pos': 16, 'arm_vel': 8, 'touch': 5, 'hand_pos': 4,
                                 'object_pos': 4, 'object_vel': 3, 'target_pos': 4}, 5),
    'manipulator_insert_peg': ({'arm_pos': 16, 'arm_vel': 8, 'touch': 5, 'hand_pos': 4,
                                'object_pos': 4, 'object_vel': 3, 'target_pos': 4}, 5),
    'walker_stand': ({'orientations': 14, 'velocity': 9, 'height': 1}, 6),
    'walker_walk': ({'orientations': 14, 'velocity': 9, 'height': 1}, 6),
}
CONTROL_SUITE_URL = 'https://storage.googleapis.com/rl_unplugged/dm_control_suite_episodes'
CONTROL_SUITE_SHARDS = 100


def atari_num_shards(game: str) -> int:
  return 49 if game in ATARI_SHORT_GAMES else 50


def atari_shard_names(game: str, run: int) -> list[str]:
  """Shard paths relative to the dataset root (`GAME/run_R-0000i-of-000NN`)."""
  n = atari_num_shards(game)
  return [f'{game}/run_{run}-{i:05d}-of-{n:05d}' for i in range(n)]


def control_suite_shard_names(task: str) -> list[str]:
  n = CONTROL_SUITE_SHARDS
  return [f'{task}/train-{i:05d}-of-{n:05d}' for i in range(n)]


def _rows(value: np.ndarray, name: str, n: int) -> np.ndarray:
  if len(value) != n:
    raise errors.EpisodeBoundaryError(f'expected {n} rows, got {len(value)}', field=name)
  return value


def atari_trajectory(example: Mapping[str, Any]) -> episodes.Trajectory:
  """One parsed Atari example (frames already decoded to (T, 84, 84, 1)) -> a Trajectory.

  `reward` is the unclipped game reward and step metadata `clipped_reward` the clipped one.
  """
  frames = np.asarray(example['observations'])
  n = len(frames)
  if n == 0:
    raise errors.EpisodeBoundaryError('an episode without rows', field='observations')
  discounts = _rows(np.asarray(example['discounts'], np.float32), 'discounts', n)
  if np.any(discounts[:-1] == 0):
    raise errors.EpisodeBoundaryError(
        f'discount 0 before the last row (rows {np.flatnonzero(discounts[:-1] == 0)[:10].tolist()})',
        field='discounts')
  return ATARI_POLICY.trajectory(
      frames,
      _rows(np.asarray(example['actions']), 'actions', n),
      _rows(np.asarray(example['unclipped_rewards'], np.float32), 'unclipped_rewards', n),
      terminal_flag=bool(discounts[-1] == 0),
      discounts=discounts,
      step_metadata={'clipped_reward': _rows(np.asarray(example['clipped_rewards'], np.float32),
                                             'clipped_rewards', n)},
      metadata={'episode_id': int(example['episode_idx']),
                'checkpoint_id': int(example['checkpoint_idx']),
                'episode_return': np.float32(example['episode_return']),
                'clipped_episode_return': np.float32(example['clipped_episode_return'])})


def control_suite_trajectory(example: Mapping[str, Any],
                             observation_sizes: Mapping[str, int]) -> episodes.Trajectory:
  """One parsed control-suite example ('observation/<k>' (T, size) rows) -> a Trajectory."""
  step_type = np.asarray(example['step_type'])
  n = len(step_type)
  if n < 2:
    raise errors.EpisodeBoundaryError(f'expected at least 2 time steps, got {n}', field='step_type')
  expected = np.full(n, MID)
  expected[0] = FIRST
  if step_type[-1] == LAST:
    expected[-1] = LAST
  if not np.array_equal(step_type, expected):
    bad = np.flatnonzero(step_type != expected)[:10].tolist()
    raise errors.EpisodeBoundaryError(
        f'expected FIRST, MID..., then MID or LAST; rows {bad} are not', field='step_type')
  discounts = _rows(np.asarray(example['discount'], np.float32), 'discount', n)
  if np.any(discounts[1:-1] == 0):
    raise errors.EpisodeBoundaryError('discount 0 before the LAST step', field='discount')
  observation = {key: _rows(np.asarray(example[f'observation/{key}'], np.float32),
                            f'observation/{key}', n) for key in observation_sizes}
  return CONTROL_SUITE_POLICY.trajectory(
      observation,
      _rows(np.asarray(example['action'], np.float32), 'action', n),
      _rows(np.asarray(example['reward'], np.float32), 'reward', n),
      terminal_flag=bool(step_type[-1] == LAST and discounts[-1] == 0),
      discounts=discounts,
      metadata={'episode_id': int(example['episode_id']),
                'timestamp': int(example['timestamp'])})
