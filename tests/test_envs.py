"""rlds_suite.envs: the gymnasium adapter's specs and endings, the factory, missing extras."""

import dm_env
from gymnasium import spaces
import numpy as np
import pytest

from rlds_suite import envs
from rlds_suite.core import errors
from rlds_suite.envs import gymnasium_adapter


def test_space_to_spec_covers_every_space():
  space = spaces.Dict({
      'box': spaces.Box(-1, 1, (2,), np.float32),
      'discrete': spaces.Discrete(3, start=1),
      'multi_discrete': spaces.MultiDiscrete([3, 4], start=[1, 0]),
      'multi_binary': spaces.MultiBinary(4),
      'tuple': spaces.Tuple([spaces.Discrete(2), spaces.Box(0, 1, (1,))]),
  })
  spec = gymnasium_adapter.space_to_spec(space)
  assert (spec['discrete'].minimum, spec['discrete'].maximum) == (1, 3)  # dm-env-wrappers: 0, 2.
  np.testing.assert_array_equal(spec['multi_discrete'].minimum, [1, 0])
  np.testing.assert_array_equal(spec['multi_discrete'].maximum, [3, 3])
  assert (spec['multi_binary'].minimum, spec['multi_binary'].maximum) == (0, 1)
  assert spec['box'].shape == (2,) and spec['box'].dtype == np.float32
  assert isinstance(spec['tuple'], tuple) and spec['tuple'][0].num_values == 2
  for _ in range(20):  # Spec-sampled actions are valid actions.
    spec['discrete'].validate(space['discrete'].sample())


def test_termination_and_truncation():
  env = envs.make('gymnasium:CartPole-v1', seed=0, max_episode_steps=5)
  timestep = env.reset()
  assert timestep.first()
  while not timestep.last():
    timestep = env.step(np.int64(0))  # Pushing left ends CartPole in ~10 steps: truncated at 5.
  assert timestep.discount == 1.0
  env = envs.make('gymnasium:CartPole-v1', seed=0)
  timestep = env.reset()
  while not timestep.last():
    timestep = env.step(np.int64(0))
  assert timestep.discount == 0.0 and timestep.step_type == dm_env.StepType.LAST


def test_seed_makes_runs_repeatable():
  first = [envs.make('gymnasium:CartPole-v1', seed=7).reset().observation for _ in range(2)]
  np.testing.assert_array_equal(*first)


def test_rendered_frames_are_declared_images():
  env = envs.make('gymnasium:CartPole-v1', seed=0, render_frames=True)
  env.reset()
  assert envs.records_frames(env) and envs.FRAME in envs.image_fields(env)
  frame = envs.frame_step_fn(None, None, env)[envs.FRAME]
  assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[-1] == 3


def test_atari_preprocessing_options():
  env = envs.make('atari:Pong', seed=0, grayscale=True, resize=42, frame_stack=3,
                  max_episode_steps=4)
  assert env.observation_spec().shape == (3, 42, 42, 1)
  assert envs.image_fields(env) == ()  # Frame stacks are tensors, not images.
  steps, timestep = 0, env.reset()
  while not timestep.last():
    timestep, steps = env.step(np.int64(0)), steps + 1
  assert steps == 4 and timestep.discount == 1.0  # Time limit counts agent steps.
  env = envs.make('atari:Pong', seed=0, grayscale=True)
  assert env.observation_spec().shape == (210, 160, 1) and envs.image_fields(env) == (
      'observation',)


def test_procgen_coinrun():
  pytest.importorskip('procgen', reason='procgen is installed by scripts/setup_envs.sh')
  env = envs.make('procgen:coinrun', seed=0)
  timestep = env.reset()
  assert timestep.observation['rgb'].shape == (64, 64, 3)
  timestep = env.step(0)
  assert timestep.mid()
  env.close()


def test_bad_spec_and_missing_extra(monkeypatch):
  with pytest.raises(errors.RLDSSuiteError, match='family:name'):
    envs.make('CartPole-v1')
  with pytest.raises(errors.MissingDependencyError, match=r'rlds_suite\[atari\]'):
    envs.require('surely_not_installed_module', 'atari')


def test_importing_rlds_suite_imports_no_environment_package():
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  code = ('import sys, rlds_suite, rlds_suite.envs; '
          'print([m for m in ("gymnasium", "ale_py", "dm_control", "envlogger") if m in sys.modules])')
  out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
  assert out.stdout.strip() == '[]'
