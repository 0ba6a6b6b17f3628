"""Shared helpers for recording tests: a dm_env wrapper that tapes what the environment returned,
and starting tests/recording_child.py."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import dm_env
import numpy as np

from rlds_suite.tfds import datasets


class Tape(dm_env.Environment):
  """Forwards to `env` and keeps every episode as a list of (timestep, action) pairs."""

  def __init__(self, env: dm_env.Environment):
    self.env = env
    self.episodes: list[list[tuple[dm_env.TimeStep, Any]]] = []
    self.image_fields = getattr(env, 'image_fields', ())

  def reset(self):
    timestep = self.env.reset()
    self.episodes.append([(timestep, None)])
    return timestep

  def step(self, action):
    timestep = self.env.step(action)
    self.episodes[-1].append((timestep, action))
    return timestep

  def observation_spec(self):
    return self.env.observation_spec()

  def action_spec(self):
    return self.env.action_spec()

  def reward_spec(self):
    return self.env.reward_spec()

  def render_frame(self):
    return self.env.render_frame()

  def close(self):
    self.env.close()


def read_episodes(directory) -> list[dict]:
  return list(datasets.numpy_episodes(datasets.episodes(directory)))


def assert_matches_tape(episode: dict, taped: list, observation=lambda o: o) -> None:
  """The RLDS episode holds exactly what the environment returned, in RLDS alignment."""
  steps = episode['steps']
  num_actions = len(taped) - 1
  assert len(steps['is_first']) == num_actions + 1
  for t, (timestep, _) in enumerate(taped):
    np.testing.assert_array_equal(observation(steps['observation'])[t], timestep.observation)
  for t in range(num_actions):
    np.testing.assert_array_equal(steps['action'][t], taped[t + 1][1])
    np.testing.assert_array_equal(steps['reward'][t], taped[t + 1][0].reward)  # Exact.
  assert steps['reward'][-1] == 0
  last = taped[-1][0]
  terminated = last.last() and last.discount == 0
  assert steps['is_first'].tolist() == [True] + [False] * num_actions
  assert steps['is_last'].tolist() == [False] * num_actions + [True]
  assert steps['is_terminal'].tolist() == [False] * num_actions + [terminated]
  expected_discount = np.ones(num_actions + 1, dtype=np.float32)
  if terminated:
    expected_discount[-2:] = 0
  np.testing.assert_array_equal(steps['discount'], expected_discount)


_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_recording_child(directory, per_shard, *options) -> subprocess.Popen:
  """Starts tests/recording_child.py; `options`: flush_seconds, seconds per step."""
  env = {**os.environ, 'PYTHONPATH': _REPO, 'TF_CPP_MIN_LOG_LEVEL': '3'}
  return subprocess.Popen([sys.executable, os.path.join(_REPO, 'tests', 'recording_child.py'),
                           str(directory), str(per_shard), *options], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
