"""EnvLogger Riegeli logs -> RLDS datasets, on numpy 2 with envlogger 1.2."""

import envlogger
from envlogger.converters import codec

import rlds_suite
from rlds_suite import cli
from rlds_suite.compat import envlogger_compat
from rlds_suite import envs
from rlds_suite.recording import riegeli_ingest
from rlds_suite.recording import random_policy
from tests.recording_helpers import Tape, assert_matches_tape, read_episodes


def test_codec_workaround_is_still_needed():
  assert envlogger_compat.codec_needs_unicode_alias(codec), (
      'envlogger\'s codec now encodes on numpy 2 without np.unicode_: delete '
      'rlds_suite/compat/envlogger_compat.py and its call in riegeli_ingest.py')


def _write_riegeli(directory, episodes=3):
  envlogger_compat.patch_envlogger_codec()
  env = Tape(envs.make('gymnasium:CartPole-v1', seed=0, max_episode_steps=15))
  policy = random_policy(env.action_spec(), 0)
  with envlogger.EnvLogger(env, data_directory=str(directory),
                           step_fn=lambda timestep, action, e: {'note': 'hi'},
                           episode_fn=lambda timestep, action, e: {'tag': 'x'}) as logged:
    for _ in range(episodes):
      timestep = logged.reset()
      while not timestep.last():
        timestep = logged.step(policy(timestep))
  return env.episodes


def test_convert_round_trip(tmp_path):
  (tmp_path / 'logs').mkdir()
  taped = _write_riegeli(tmp_path / 'logs')
  writer = riegeli_ingest.convert(tmp_path / 'logs', tmp_path / 'ds', name='cartpole')
  assert writer.num_episodes_written == 3
  episodes = read_episodes(tmp_path / 'ds')
  for episode, tape in zip(episodes, taped):
    assert_matches_tape(episode, tape)
    assert episode['tag'] == b'x' and set(episode['steps']['note']) == {b'hi'}
  assert rlds_suite.validate(tmp_path / 'ds').ok


def test_cli_convert_and_record(tmp_path, capsys):
  (tmp_path / 'logs').mkdir()
  _write_riegeli(tmp_path / 'logs', episodes=2)
  assert cli.main(['convert', str(tmp_path / 'logs'), '--out', str(tmp_path / 'converted')]) == 0
  assert '"episodes_written": 2' in capsys.readouterr().out
  assert cli.main(['record', '--env', 'gymnasium:CartPole-v1', '--policy', 'random',
                   '--episodes', '3', '--out', str(tmp_path / 'recorded'), '--seed', '0',
                   '--no_progress']) == 0
  assert len(read_episodes(tmp_path / 'recorded')) == 3
  assert rlds_suite.validate(tmp_path / 'recorded').ok
