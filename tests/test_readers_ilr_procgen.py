"""readers.ilr_procgen: the fixture as il-representations' loader reads it, and bad input."""

import os
import pathlib
import pickle
import sys

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core.episodes import Ending
from rlds_suite.readers import ilr_procgen

sys.path.insert(0, str(pathlib.Path(__file__).parent / 'fixtures'))
import write_ilr_procgen  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_fixture_rows_and_endings(fixtures):
  path = fixtures / 'ilr_procgen' / 'demo_coinrun.pickle'
  assert ilr_procgen.demo_paths(fixtures, 'coinrun') == [path]
  found = list(ilr_procgen.read_trajectories(path))
  assert [(len(t.actions), t.ending) for t in found] == [
      (2, Ending.TERMINATED), (3, Ending.TRUNCATED), (3, Ending.TERMINATED)]
  loaded = write_ilr_procgen.load_like_il_representations(path)
  np.testing.assert_array_equal(np.concatenate([t.observations for t in found]), loaded['obs'])
  np.testing.assert_array_equal(np.concatenate([t.rewards for t in found]), loaded['rews'])


def test_done_at_procgens_step_limit_is_a_truncation(tmp_path):
  long = write_ilr_procgen.record(0, [0] * 1000, [0] * 1000, [False] * 999 + [True])
  short = write_ilr_procgen.record(1, [0] * 999, [0] * 999, [False] * 998 + [True])
  path = tmp_path / 'demo_maze.pickle'
  write_ilr_procgen.write(path, write_ilr_procgen.demos([long, short]))
  assert [t.ending for t in ilr_procgen.read_trajectories(path)] == [Ending.TRUNCATED,
                                                                     Ending.TERMINATED]


class _Payload:

  def __init__(self, marker: pathlib.Path):
    self.marker = marker

  def __reduce__(self):
    return os.system, (f'touch {self.marker}',)


def test_foreign_global_is_refused_and_never_runs(tmp_path):
  marker = tmp_path / 'ran'
  data = write_ilr_procgen.demos(write_ilr_procgen.trajectories())
  data['acts'][0] = _Payload(marker)
  path = tmp_path / 'demo_coinrun.pickle'
  with open(path, 'wb') as f:
    pickle.dump(data, f)
  with pytest.raises(errors.UnsafePickleError, match=r'demo_coinrun.pickle: .*(posix|os)\.system'):
    list(ilr_procgen.read_trajectories(path))
  assert not marker.exists()


def test_mismatched_list_lengths(tmp_path):
  data = write_ilr_procgen.demos(write_ilr_procgen.trajectories())
  data['rews'] = data['rews'][:1]
  path = tmp_path / 'demo_coinrun.pickle'
  write_ilr_procgen.write(path, data)
  with pytest.raises(errors.EpisodeBoundaryError,
                     match=r"demo_coinrun.pickle: rews: .*'rews': 1"):
    list(ilr_procgen.read_trajectories(path))
  data = write_ilr_procgen.demos(write_ilr_procgen.trajectories())
  data['dones'][1] = data['dones'][1][:2]  # One trajectory's rows disagree.
  write_ilr_procgen.write(path, data)
  with pytest.raises(errors.EpisodeBoundaryError, match=r"demo_coinrun.pickle: dones: .*'dones': 2"):
    list(ilr_procgen.read_trajectories(path))


def test_wrong_types(tmp_path):
  path = tmp_path / 'demo_coinrun.pickle'
  data = write_ilr_procgen.demos(write_ilr_procgen.trajectories())
  data['obs'][0] = data['obs'][0].astype(np.float32)
  write_ilr_procgen.write(path, data)
  with pytest.raises(errors.SchemaError, match=r'obs: trajectory 0: expected rows of uint8'):
    list(ilr_procgen.read_trajectories(path))
  write_ilr_procgen.write(path, {'obs': []})
  with pytest.raises(errors.SchemaError, match="expected a dict with keys"):
    list(ilr_procgen.read_trajectories(path))
