"""Hostile pickles against every reader that unpickles: a typed one-line error naming the file,
never code run, never a crash, never data from memory or another file.

Each read runs in a forked child (tests/fixtures/write_malicious_pickles.run_isolated), so a
pointer read that crashes numpy fails one case instead of killing pytest, and what one case does
to the process cannot reach the next.
"""

import pathlib

import pytest

from rlds_suite.readers import il_representations
from rlds_suite.readers import ilr_atari
from rlds_suite.readers import ilr_dm_control
from rlds_suite.readers import ilr_procgen
from rlds_suite.readers import imitation
from rlds_suite.readers import magical
from tests.fixtures import write_malicious_pickles as corpus

FIXTURES = pathlib.Path(__file__).resolve().parent / 'fixtures'

READERS = {
    'magical': magical.read_demo,
    'imitation_pkl': lambda path: imitation.read_rollouts(path, imitation.LAYOUTS['cartpole']),
    'imitation_npz': lambda path: imitation.read_rollouts(path, imitation.LAYOUTS['cartpole']),
    'ilr_procgen': lambda path: list(ilr_procgen.read_trajectories(path)),
    'ilr_dm_control': lambda path: list(ilr_dm_control.read_trajectories(
        path, ilr_dm_control.TASKS['reacher-easy'])),
    'ilr_atari': lambda path: list(ilr_atari.read_trajectories(path)),
    'ilr_shard_metadata': il_representations.read,
    'ilr_shard_member': il_representations.read,
}
assert set(READERS) == set(corpus.FORMATS)


@pytest.mark.parametrize('format_name', sorted(READERS))
def test_every_malicious_pickle_is_refused_unrun(format_name, tmp_path):
  marker = tmp_path / 'pwned'
  read = READERS[format_name]
  failures = []
  for case in corpus.cases(str(marker)):
    path = corpus.write(tmp_path / case.name, format_name, corpus.wrap(case.fragment))
    result = corpus.run_isolated(lambda: repr(read(path))[:200])  # pylint: disable=cell-var-from-loop
    if (result['outcome'] != 'error' or result['type'] != case.expected or result['lines'] != 1 or
        str(path) not in result['message']):
      failures.append(f'{case.name}: expected a one-line {case.expected} naming the file, got '
                      f'{result}')
  assert not marker.exists(), 'a pickle ran code'
  assert not failures, '\n'.join(failures)


def test_one_file_cannot_change_another_files_data(tmp_path):
  """A demo whose BUILD targets the stand-in class, then a clean demo in the same process."""
  attack = next(case for case in corpus.cases('') if case.name == 'build_on_class_attribute')
  bad = corpus.write(tmp_path / 'bad', 'magical', corpus.wrap(attack.fragment))
  clean = FIXTURES / 'magical' / 'demo-MoveToCorner-Demo-v0-001.pkl.gz'
  expected = magical.read_demo(clean).rewards.tolist()

  def both():
    try:
      magical.read_demo(bad)
      first = 'loaded'
    except Exception as e:  # pylint: disable=broad-except
      first = type(e).__name__
    return first, magical.read_demo(clean).rewards.tolist()

  result = corpus.run_isolated(both)
  assert result['outcome'] == 'ok', result
  first, rewards = result['value']
  assert rewards == expected == [0.0]
  assert first == 'UnsafePickleError'
