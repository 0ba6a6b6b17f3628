"""Small RLDS datasets for stream tests: every observation names its (dataset, episode, step)."""

from __future__ import annotations

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.tfds import features
from rlds_suite.tfds import writing


def id_episodes(dataset: int, num_episodes: int, obs_size: int = 3, min_len: int = 2,
                max_len: int = 9, seed: int = 0) -> list[episodes.Episode]:
  """Episodes whose observation row t starts with (dataset, episode, t); odd episodes terminate."""
  rng = np.random.default_rng(seed)
  result = []
  for e in range(num_episodes):
    num_actions = int(rng.integers(min_len, max_len + 1))
    obs = np.zeros((num_actions + 1, obs_size), np.float32)
    obs[:, 0], obs[:, 1], obs[:, 2] = dataset, e, np.arange(num_actions + 1)
    trajectory = episodes.Trajectory(
        observations=obs[:-1],
        actions=rng.normal(size=(num_actions, 2)).astype(np.float32),
        rewards=rng.normal(size=num_actions).astype(np.float32),
        ending=episodes.Ending.TERMINATED if e % 2 else episodes.Ending.TRUNCATED,
        final_observation=obs[-1])
    result.append(episodes.to_episode(trajectory))
  return result


def write(tmp_dir, name: str, eps: list[episodes.Episode], obs_size: int = 3) -> str:
  feature_dict = features.rlds_features(observation=features.tensor((obs_size,), np.float32),
                                        action=features.tensor((2,), np.float32))
  return writing.write_episodes(eps, features=feature_dict, data_dir=tmp_dir, name=name)


def ids(observations: np.ndarray) -> list[tuple[int, int, int]]:
  return [tuple(int(v) for v in row[:3]) for row in np.asarray(observations)]
