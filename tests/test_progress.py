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
