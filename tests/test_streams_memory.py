"""Streams stay under their memory budget on large image observations (peak RSS of a child process)."""

import json
import os
import re
import subprocess
import sys

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.tfds import datasets
from rlds_suite.tfds import features
from rlds_suite.tfds import writing

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def stream_peak_mib(directory, budget_mib: int, unit: str, batch: int, batches: int) -> dict:
  out = subprocess.run(
      [sys.executable, '-m', 'tests.streams_memory_child', str(directory), str(budget_mib * MIB),
       unit, str(batch), str(batches)], cwd=REPO, capture_output=True, text=True, check=True,
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_magical_image_demos_stream_under_the_budget(real_data, tmp_path):
  """Two 384x384x3 images a step (~0.9 MB): the default 10,240-unit block would be ~9 GB."""
  manual_dir = tmp_path / 'manual'
  manual_dir.mkdir()
  for source in (real_data / 'magical').glob('demo-*.pkl.gz'):
    (manual_dir / source.name).symlink_to(source)
  builder = datasets.build('magical_demos/move_to_region', manual_dir=str(manual_dir),
                           data_dir=str(tmp_path / 'data'))
  budget = 600
  result = stream_peak_mib(builder.data_dir, budget, 'steps', 8, 40)
  assert result['units'] == 320
  assert 'memory budget 600 MiB' in result['description']
  # The budget's block half holds a few dozen 0.9 MB units, a multiple of the batch: not 10,240.
  block_units = int(re.search(r'blocks of (\d+) units', result['description']).group(1))
  assert 8 <= block_units <= 64 and block_units % 8 == 0
  assert result['stream'] < budget, result


def test_frame_stack_dataset_streams_under_the_budget(tmp_path):
  rng = np.random.default_rng(0)

  def make(e):
    frames = rng.integers(0, 255, size=(121, 84, 84, 4), dtype=np.uint8)
    return episodes.to_episode(episodes.Trajectory(
        observations=frames[:-1], actions=rng.integers(0, 6, size=120),
        rewards=rng.normal(size=120).astype(np.float32),
        ending=episodes.Ending.TERMINATED if e % 2 else episodes.Ending.TRUNCATED,
        final_observation=frames[-1]))

  feature_dict = features.rlds_features(observation=features.tensor((84, 84, 4), np.uint8),
                                        action=features.scalar(np.int64))
  directory = writing.write_episodes((make(e) for e in range(24)), features=feature_dict,
                                     data_dir=tmp_path, name='frame_stacks')
  budget = 200
  result = stream_peak_mib(directory, budget, 'transitions', 32, 300)
  assert result['units'] == 9600  # Over three passes of the 24 x 120 transitions.
  assert result['stream'] < budget, result
