"""core/progress: episodes counted out of their total on a terminal, nothing elsewhere."""

import io
import sys
import types

import numpy as np

from rlds_suite.core import progress


class _Terminal(io.StringIO):

  def isatty(self) -> bool:
    return True


def _episode(n: int) -> dict:
  return {'steps': {'observation': np.zeros((n, 2)), 'is_first': np.zeros(n, bool)}}


def test_num_steps_of_every_episode_form():
  assert progress.num_steps(_episode(4)) == 4
  assert progress.num_steps({'steps': [{'a': 1}] * 3}) == 3  # TFDS examples: a list of steps.
  assert progress.num_steps(types.SimpleNamespace(steps={'a': np.zeros(5)})) == 5
  assert progress.num_steps({'steps': {'nested': {'a': np.zeros(2)}}}) == 0
  assert progress.num_steps(object()) == 0


def test_split_total():
  splits = {'train': types.SimpleNamespace(num_examples=3),
            'test': types.SimpleNamespace(num_examples=2)}
  assert progress.split_total(splits) == 5
  assert progress.split_total(splits, 'train+test') == 5
  assert progress.split_total(splits, 'test') == 2
  assert progress.split_total(splits, 'train[:50%]') is None


def test_bar_on_a_terminal_only(monkeypatch, capsys):
  assert [progress.num_steps(e) for e in progress.episodes([_episode(2), _episode(3)], 2, 'x')] \
      == [2, 3]
  assert capsys.readouterr().err == ''  # Not a terminal.
  terminal = _Terminal()
  monkeypatch.setattr(sys, 'stderr', terminal)
  list(progress.episodes([_episode(2), _episode(3)], 2, 'validate'))
  bar = terminal.getvalue().replace('\r', '\n').strip().splitlines()[-1]
  assert bar.startswith('validate: 100%') and '2/2 [' in bar and '5 steps' in bar, bar


def test_validate_stats_and_export_count_out_of_the_episodes_stored(tmp_path, bars, capsys):
  from rlds_suite import cli  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tests import browse_data  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  directory = browse_data.write(str(tmp_path), {'train': 5, 'test': 2}, size=4, length=1)
  commands = {'validate': ['validate', directory], 'stats': ['stats', directory],
              'export d4rl': ['export', directory, '--to', 'd4rl', str(tmp_path / 'x.hdf5'),
                              '--split', 'test'],
              'show: reading episode 5': ['show', directory, '--episode', '5', '--episodes', '3',
                                          '--out', str(tmp_path / 'x.png')]}
  for description, command in commands.items():
    bars.clear()
    assert cli.main(command) == 0, capsys.readouterr()
    [bar] = bars
    expected = 2 if '--split' in command or 'show' in command else 7  # Show: episodes 5 and 6.
    assert (bar.description, bar.unit, bar.total, bar.episodes) == (
        description, 'episodes', expected, expected)
    assert bar.steps == 2 * expected  # One action and the final step each.
  # An episode that is not there is named before anything is read.
  bars.clear()
  assert cli.main(['show', directory, '--episode', '7', '--out', str(tmp_path / 'y.png')]) == 2
  assert 'has no episode 7 (7 stored)' in capsys.readouterr().err and not bars


def test_convert_counts_out_of_the_riegeli_indexes(tmp_path, bars):
  import envlogger  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_suite import envs  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_suite.compat import envlogger_compat  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_suite.recording import random_policy  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_suite.recording import riegeli_ingest  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  envlogger_compat.patch_envlogger_codec()
  env = envs.make('gymnasium:CartPole-v1', seed=0, max_episode_steps=15)
  policy = random_policy(env.action_spec(), 0)
  (tmp_path / 'logs').mkdir()
  with envlogger.EnvLogger(env, data_directory=str(tmp_path / 'logs')) as logged:
    for _ in range(3):
      timestep = logged.reset()
      while not timestep.last():
        timestep = logged.step(policy(timestep))
  done = riegeli_ingest.convert(tmp_path / 'logs', tmp_path / 'ds', name='cartpole')
  [bar] = bars
  assert bar.totals == progress.Totals(bar.episodes, bar.steps) and bar.by_steps
  assert bar.episodes == done.num_episodes_written == 3 and bar.steps > 3


def test_verify_counts_the_files_it_hashes_out_of_those_recorded(tmp_path, bars):
  import pathlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_suite.tfds import provenance  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  manual = pathlib.Path(__file__).resolve().parents[1] / 'builders' / 'd4rl' / 'dummy_data'
  builder = datasets.build('d4rl/walker2d-random-v2', manual_dir=str(manual),
                           data_dir=str(tmp_path))
  bars.clear()  # The build's own bars.
  assert provenance.verify(str(builder.data_dir)).ok
  recorded = provenance.read(str(builder.data_dir))
  [own, sources] = bars
  assert (own.description, own.unit, own.total, own.files) == (
      'verify', 'files', len(recorded['dataset_files']), len(recorded['dataset_files']))
  assert (sources.description, sources.total, sources.files) == (
      'verify sources', len(recorded['sources']), len(recorded['sources']))
