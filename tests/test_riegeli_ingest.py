"""EnvLogger Riegeli logs -> RLDS datasets, on numpy 2 with envlogger 1.2."""

import shutil

import envlogger
from envlogger.converters import codec
import numpy as np
import pytest

import rlds_suite
from rlds_suite import cli
from rlds_suite.core import errors
from rlds_suite.compat import envlogger_compat
from rlds_suite import envs
from rlds_suite.recording import riegeli_ingest
from rlds_suite.recording import random_policy
from tests.recording_helpers import Tape, assert_matches_tape, read_episodes


def test_codec_workaround_is_still_needed():
  assert envlogger_compat.codec_needs_unicode_alias(codec), (
      'envlogger\'s codec now encodes on numpy 2 without np.unicode_: delete '
      'rlds_suite/compat/envlogger_compat.py and its call in riegeli_ingest.py')


class _NaNReward(Tape):
  """An environment whose `at`-th step of every episode returns a NaN reward."""

  def __init__(self, env, at):
    super().__init__(env)
    self._at = at

  def step(self, action):
    timestep = super().step(action)
    if len(self.episodes[-1]) == self._at + 1:
      timestep = timestep._replace(reward=np.float64('nan'))
    return timestep


def _write_riegeli(directory, episodes=3, env_id='gymnasium:CartPole-v1', reset_only=(),
                   nan_reward_at=None, keep_reset_only=False):
  """EnvLogger's own Riegeli logs; the episodes in `reset_only` get an extra reset before them."""
  envlogger_compat.patch_envlogger_codec()
  env = envs.make(env_id, seed=0, max_episode_steps=15)
  env = Tape(env) if nan_reward_at is None else _NaNReward(env, nan_reward_at)
  policy = random_policy(env.action_spec(), 0)
  with envlogger.EnvLogger(env, data_directory=str(directory),
                           step_fn=lambda timestep, action, e: {'note': 'hi'},
                           episode_fn=lambda timestep, action, e: {'tag': 'x'}) as logged:
    for index in range(episodes):
      if index in reset_only:
        logged.reset()  # A reset and no action.
      timestep = logged.reset()
      while not timestep.last():
        timestep = logged.step(policy(timestep))
  return env.episodes if keep_reset_only else [e for e in env.episodes if len(e) > 1]


def test_convert_round_trip(tmp_path):
  (tmp_path / 'logs').mkdir()
  taped = _write_riegeli(tmp_path / 'logs')
  done = riegeli_ingest.convert(tmp_path / 'logs', tmp_path / 'ds', name='cartpole')
  assert done.num_episodes_written == 3 and done.reset_only == 0
  episodes = read_episodes(tmp_path / 'ds')
  for episode, tape in zip(episodes, taped):
    assert_matches_tape(episode, tape)
    assert episode['tag'] == b'x' and set(episode['steps']['note']) == {b'hi'}
  assert rlds_suite.validate(tmp_path / 'ds').ok


def test_cli_convert_and_record(tmp_path, capsys):
  (tmp_path / 'logs').mkdir()
  _write_riegeli(tmp_path / 'logs', episodes=2)
  assert cli.main(['convert', str(tmp_path / 'logs'), '--out', str(tmp_path / 'converted')]) == 0
  assert '"episodes_written": 2, "reset_only_episodes": 0' in capsys.readouterr().out
  assert cli.main(['record', '--env', 'gymnasium:CartPole-v1', '--policy', 'random',
                   '--episodes', '3', '--out', str(tmp_path / 'recorded'), '--seed', '0',
                   '--no_progress']) == 0
  assert len(read_episodes(tmp_path / 'recorded')) == 3
  assert rlds_suite.validate(tmp_path / 'recorded').ok


def _bits(values):
  return np.asarray(values, np.float64).view(np.int64).tolist()


def test_convert_keeps_float64_rewards_exact(tmp_path):
  """Pendulum's float64 rewards, bit for bit through EnvLogger's Riegeli log and convert."""
  (tmp_path / 'logs').mkdir()
  taped = _write_riegeli(tmp_path / 'logs', episodes=2, env_id='gymnasium:Pendulum-v1')
  riegeli_ingest.convert(tmp_path / 'logs', tmp_path / 'ds', name='pendulum')
  for episode, tape in zip(read_episodes(tmp_path / 'ds'), taped):
    assert episode['steps']['reward'].dtype == np.float64
    assert _bits(episode['steps']['reward'][:-1]) == _bits([t.reward for t, _ in tape[1:]])
    assert len(set(_bits(episode['steps']['reward']))) > 10


def test_reset_only_episodes_are_kept_as_one_step_episodes(tmp_path, capsys):
  """As TFDS's own EnvLogger reader keeps them: one step, first and last, with its metadata."""
  (tmp_path / 'logs').mkdir()
  taped = _write_riegeli(tmp_path / 'logs', episodes=3, reset_only=(0, 2), keep_reset_only=True)
  assert [len(tape) for tape in taped][:2] == [1, 16]
  assert cli.main(['convert', str(tmp_path / 'logs'), '--out', str(tmp_path / 'ds')]) == 0
  assert '"episodes_written": 5, "reset_only_episodes": 2' in capsys.readouterr().out
  got = read_episodes(tmp_path / 'ds')
  assert len(got) == 5
  for episode, tape in zip(got, taped):
    assert episode['tag'] == b'x'
    if len(tape) > 1:
      assert_matches_tape(episode, tape)
      continue
    steps = episode['steps']
    np.testing.assert_array_equal(steps['observation'], [tape[0][0].observation])
    assert steps['is_first'].tolist() == steps['is_last'].tolist() == [True]
    assert steps['is_terminal'].tolist() == [False] and steps['discount'].tolist() == [1]
    assert steps['action'].tolist() == [0] and steps['reward'].tolist() == [0]
    assert steps['note'].tolist() == [b'hi']
  assert rlds_suite.validate(tmp_path / 'ds').ok


def test_a_log_of_only_resets(tmp_path):
  """No episode of the batch has an action: the declared specs give the empty columns."""
  envlogger_compat.patch_envlogger_codec()
  env = Tape(envs.make('gymnasium:Pendulum-v1', seed=0))
  (tmp_path / 'logs').mkdir()
  with envlogger.EnvLogger(env, data_directory=str(tmp_path / 'logs')) as logged:
    logged.reset()
    logged.reset()
  done = riegeli_ingest.convert(tmp_path / 'logs', tmp_path / 'ds')
  assert (done.num_episodes_written, done.reset_only) == (2, 2)
  got = read_episodes(tmp_path / 'ds')
  for episode, tape in zip(got, env.episodes):
    np.testing.assert_array_equal(episode['steps']['observation'], [tape[0][0].observation])
    assert episode['steps']['action'].shape == (1, 1) and episode['steps']['is_last'].all()
  assert rlds_suite.validate(tmp_path / 'ds').ok


def _dataset_files(directory):
  return {p.relative_to(directory): p.read_bytes() for p in directory.rglob('*') if p.is_file()}


def test_convert_is_all_or_nothing_and_names_the_offending_log(tmp_path, capsys):
  (tmp_path / 'logs' / 'a').mkdir(parents=True)
  (tmp_path / 'logs' / 'b').mkdir()
  _write_riegeli(tmp_path / 'logs' / 'a', episodes=2)
  _write_riegeli(tmp_path / 'logs' / 'b', episodes=1, env_id='gymnasium:Pendulum-v1')
  out = tmp_path / 'ds'
  with pytest.raises(errors.SpecMismatchError) as raised:
    riegeli_ingest.convert(tmp_path / 'logs', out)
  assert str(tmp_path / 'logs' / 'b') in str(raised.value)
  assert 'differs from that of the first log' in str(raised.value)
  assert not out.exists()
  assert [p.name for p in tmp_path.iterdir()] == ['logs']  # No staging directory left behind.
  assert cli.main(['convert', str(tmp_path / 'logs'), '--out', str(out)]) == 2
  assert str(tmp_path / 'logs' / 'b') in capsys.readouterr().err

  # Appending: a failure after the first log's episodes were converted changes nothing either.
  riegeli_ingest.convert(tmp_path / 'logs' / 'a', out)
  before = _dataset_files(out)
  shutil.rmtree(tmp_path / 'logs' / 'b')
  (tmp_path / 'logs' / 'b').mkdir()
  _write_riegeli(tmp_path / 'logs' / 'b', episodes=1, nan_reward_at=3)
  with pytest.raises(errors.InvalidValueError, match='non-finite'):
    riegeli_ingest.convert(tmp_path / 'logs', out)
  assert _dataset_files(out) == before
  assert len(read_episodes(out)) == 2
  assert sorted(p.name for p in tmp_path.iterdir()) == ['ds', 'logs']

  # A clean re-run appends each episode once.
  shutil.rmtree(tmp_path / 'logs' / 'b')
  done = riegeli_ingest.convert(tmp_path / 'logs', out)
  assert done.num_episodes_written == 2 and len(read_episodes(out)) == 4
  assert rlds_suite.validate(out).ok
