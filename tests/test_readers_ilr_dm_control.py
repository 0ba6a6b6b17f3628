"""readers.ilr_dm_control: il-representations dm_control demos, real file, fixtures, bad input."""

import dataclasses
import pathlib
import sys

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core.episodes import Ending
from rlds_suite.readers import ilr_dm_control

sys.path.insert(0, str(pathlib.Path(__file__).parent / 'fixtures'))
import write_ilr_dm_control  # pylint: disable=g-import-not-at-top,wrong-import-position

REACHER = ilr_dm_control.TASKS['reacher-easy']


def test_real_reacher_file(real_data):
  path = real_data / 'il_representations' / 'native' / 'dm_control-reacher-easy-test.pkl.gz'
  assert [p.name for p in ilr_dm_control.demo_paths(path.parent, REACHER)] == [path.name]
  found = list(ilr_dm_control.read_trajectories(path, REACHER))
  assert [(len(t.actions), t.ending) for t in found] == [(125, Ending.TRUNCATED)] * 2
  first = found[0]
  assert first.observations.shape == (125, 3, 100, 100)
  assert first.final_observation.shape == (3, 100, 100)
  assert first.rewards.dtype == np.float64 and first.rewards.sum() == 874.0
  np.testing.assert_array_equal(first.discounts, 1)
  assert first.step_metadata['internal_state'].shape == (125, 4)


def test_fixture_endings_from_the_env_discount(fixtures):
  found = list(ilr_dm_control.read_trajectories(
      fixtures / 'ilr_dm_control' / 'reacher-easy-demos.pkl.gz', REACHER))
  assert [t.ending for t in found] == [Ending.TRUNCATED, Ending.TERMINATED]
  np.testing.assert_array_equal(found[1].discounts, [1, 0])


def _write_one(tmp_path, **changes) -> pathlib.Path:
  demo = dataclasses.replace(write_ilr_dm_control.trajectories()[0], **changes)
  path = tmp_path / 'reacher-easy-bad.pkl.gz'
  write_ilr_dm_control.write(path, [demo])
  return path


def test_bad_input_names_file_and_field(tmp_path):
  good = write_ilr_dm_control.trajectories()[0]
  cases = [
      (dict(acts=good.acts[:, :1]), errors.SchemaError, r'trajectory 0.acts: expected rows of float32\[2\]'),
      (dict(infos=good.infos[:2]), errors.EpisodeBoundaryError, r'trajectory 0.infos: .*3 infos'),
      (dict(infos=[{'discount': 1.0}] * 3), errors.SchemaError, r"'internal_state' missing"),
      (dict(obs=good.obs[:3]), errors.EpisodeBoundaryError, 'observation'),
  ]
  for changes, error, message in cases:
    path = _write_one(tmp_path, **changes)
    with pytest.raises(error, match='reacher-easy-bad.pkl.gz.*' + message):
      list(ilr_dm_control.read_trajectories(path, REACHER))


def test_truncated_gzip(tmp_path):
  path = _write_one(tmp_path)
  path.write_bytes(path.read_bytes()[:-100])
  with pytest.raises(errors.CorruptFileError, match='reacher-easy-bad.pkl.gz'):
    list(ilr_dm_control.read_trajectories(path, REACHER))


def test_declared_sizes_match_dm_control():
  suite = pytest.importorskip('dm_control.suite')
  for task in ilr_dm_control.TASKS.values():
    domain, name = task.name.rsplit('-', 1)
    env = suite.load(domain.replace('-', '_'), name)
    assert env.action_spec().shape == (task.action_size,), task.name
    assert env.physics.get_state().shape == (task.state_size,), task.name
