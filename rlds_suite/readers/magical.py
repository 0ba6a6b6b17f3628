"""MAGICAL reference demos: `demo-<Task>-Demo-v0-*.pkl.gz`.

Each file is gzip(pickle({'trajectory', 'score', 'env_name'})); the trajectory is a
milbench.baselines.saved_trajectories.MILBenchTrajectory (acts, obs, rews, infos) with T+1
observation dicts of 'allo'/'ego' uint8 images and T infos carrying 'eval_score'.

MAGICAL's environments end an episode only when the step budget runs out
(magical/base_env.py: `done = episode_steps >= max_episode_steps`), reward is always 0 and the
score is computed at that point: there is no absorbing state, so every demo ends by truncation.
"""

from __future__ import annotations

import pathlib
from typing import Any, Mapping

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import nested
from rlds_suite.core.episodes import BoundaryPolicy, EndingRule, FinalObservation, Trajectory
from rlds_suite.readers import files

TASKS = ('MoveToCorner', 'MoveToRegion', 'MatchRegions', 'MakeLine', 'FixColour', 'FindDupe',
         'ClusterColour', 'ClusterShape')
VIEWS = ('allo', 'ego')
IMAGE_SHAPE = (384, 384, 3)

POLICY = BoundaryPolicy(final_observation=FinalObservation.EXTRA_ROW,
                        ending_rule=EndingRule.ALWAYS_TRUNCATED)


def demo_paths(directory: errors.PathLike, task: str) -> list[pathlib.Path]:
  return files.find_files(directory, f'demo-{task}-Demo-v0-*.pkl.gz')


def read_demo(path: errors.PathLike) -> Trajectory:
  """One demo file -> Trajectory with per-step eval_score and episode score/env_name/demo file."""
  demo = files.load_gzip_pickle(path)
  with errors.located(path):
    if not isinstance(demo, Mapping) or not {'trajectory', 'score', 'env_name'} <= set(demo):
      raise errors.SchemaError('expected a dict with trajectory, score and env_name, got '
                               f'{type(demo).__name__} {sorted(demo) if isinstance(demo, Mapping) else ""}')
    trajectory = demo['trajectory']
    for name in ('acts', 'obs', 'rews', 'infos'):
      if not hasattr(trajectory, name):
        raise errors.SchemaError(f'trajectory has no {name!r}', field='trajectory')
    observations = _stack_observations(trajectory.obs)
    infos = list(trajectory.infos or [])
    if len(infos) != len(trajectory.acts):
      raise errors.EpisodeBoundaryError(
          f'expected {len(trajectory.acts)} infos (one per action), got {len(infos)}', field='infos')
    eval_score = np.asarray([float(info.get('eval_score', 0.0)) for info in infos], np.float32)
    return POLICY.trajectory(
        observations,
        np.asarray(trajectory.acts, dtype=np.int64),
        np.asarray(trajectory.rews, dtype=np.float32),
        step_metadata={'eval_score': eval_score},
        metadata={
            'score': np.float32(demo['score']),
            'env_name': str(demo['env_name']),
            'demo_file': pathlib.Path(path).name,
        })


def _stack_observations(observations: Any) -> dict[str, np.ndarray]:
  if not observations or not all(isinstance(o, Mapping) for o in observations):
    raise errors.SchemaError('expected a list of observation dicts', field='obs')
  for view in VIEWS:
    for step, o in enumerate(observations):
      image = o.get(view)
      if image is None or np.shape(image) != IMAGE_SHAPE or np.asarray(image).dtype != np.uint8:
        raise errors.SchemaError(
            f'step {step}: expected {view!r} uint8 image of shape {IMAGE_SHAPE}, got '
            f'{None if image is None else (np.shape(image), np.asarray(image).dtype)}', field='obs')
  return nested.stack_rows([{view: o[view] for view in VIEWS} for o in observations])
