"""Datasets for the browse tests: an image field and a state vector a step, episode and step
metadata, and observations that name their (split, episode, step)."""

from __future__ import annotations

from typing import Iterator

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.tfds import features
from rlds_suite.tfds import writing

SPLIT_CODES = {'test': 1, 'train': 2}


def pixels(split: str, episode: int, step: int, size: int) -> np.ndarray:
  """A frame that differs per (split, episode, step), with noise of its own seed."""
  rng = np.random.default_rng([SPLIT_CODES[split], episode, step])
  frame = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
  frame[0, 0] = (SPLIT_CODES[split], episode % 256, step % 256)
  return frame


def make_episodes(split: str, count: int, size: int = 16, length: int = 0) -> Iterator[episodes.Episode]:
  """`count` episodes of `length` actions (0: 3 + episode % 5); odd episodes terminate."""
  for e in range(count):
    n = length or 3 + e % 5
    frames = np.stack([pixels(split, e, t, size) for t in range(n + 1)])
    state = np.stack([np.array([SPLIT_CODES[split], e, t], np.float32) for t in range(n + 1)])
    yield episodes.to_episode(episodes.Trajectory(
        observations={'pixels': frames[:-1], 'state': state[:-1]},
        final_observation={'pixels': frames[-1], 'state': state[-1]},
        actions=np.arange(n, dtype=np.int64) % 3, rewards=np.full(n, 0.5 + e, np.float32),
        ending=episodes.Ending.TERMINATED if e % 2 else episodes.Ending.TRUNCATED,
        step_metadata={'note': np.array([f'e{e}t{t}' for t in range(n)], object)},
        final_step_metadata={'note': np.array(f'e{e}end', object)},
        metadata={'player': f'p{e % 3}', 'seed': np.int64(100 + e)}))


def write(data_dir: str, splits: dict[str, int], size: int = 16, length: int = 0,
          image: bool = True) -> str:
  """A dataset of `splits` {split: episodes}; frames as PNG images or (`image=False`) raw uint8
  tensors. Returns its directory."""
  frame = features.image((size, size, 3)) if image else features.tensor((size, size, 3), np.uint8)
  feature_dict = features.rlds_features(
      observation={'pixels': frame, 'state': features.tensor((3,), np.float32)},
      action=features.scalar(np.int64), step_metadata={'note': features.text()},
      episode_metadata={'player': features.text(), 'seed': features.scalar(np.int64)})
  return writing.write_episodes(
      {split: make_episodes(split, count, size, length) for split, count in splits.items()},
      features=feature_dict, data_dir=data_dir, name='browse_test')
