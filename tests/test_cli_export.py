"""`rlds-suite export`: a thin shell over rlds_suite.exports."""

import ast
import pathlib

import numpy as np
import pytest

from rlds_suite import cli
from rlds_suite import exports
from rlds_suite.cli import export as export_command
from rlds_suite.readers import il_representations
from rlds_suite.tfds import datasets

DUMMY = pathlib.Path(__file__).resolve().parents[1] / 'builders' / 'ilr_shards' / 'dummy_data'


@pytest.fixture(scope='module')
def reacher(tmp_path_factory):
  data_dir = tmp_path_factory.mktemp('data')
  builder = datasets.build('ilr_shards/demos-dm_control-reacher-easy', manual_dir=str(DUMMY),
                           data_dir=str(data_dir))
  return str(builder.data_dir)


def _printed(capsys) -> dict:
  """{'header': first line, name: shape} from the printed summary."""
  header, *lines = capsys.readouterr().out.strip().splitlines()
  shapes = {}
  for line in lines:
    name, shape = line.split(maxsplit=1)
    shapes[name] = list(ast.literal_eval(shape))
  return {'header': header, **shapes}


def test_formats_listed_without_importing_the_library_match_it():
  assert export_command.FORMATS == tuple(exports.FORMATS)


def test_export_npz_d4rl_and_dict(reacher, tmp_path, capsys):
  assert cli.main(['export', reacher, str(tmp_path / 'flat.npz'), '--to', 'npz']) == 0
  printed = _printed(capsys)
  # 7 transition arrays and the episode fields every episode shares, as D4RL's metadata/*.
  assert printed['header'] == f'wrote {tmp_path / "flat.npz"} (npz): 11 arrays, 5 rows'
  assert printed['metadata/task_name'] == []
  assert printed['observations'] == [5, 9, 100, 100]
  assert printed['infos/internal_state'] == [5, 4]
  flat = np.load(tmp_path / 'flat.npz')
  np.testing.assert_array_equal(flat['timeouts'], [0, 0, 1, 0, 1])
  np.testing.assert_array_equal(flat['terminals'], [0, 0, 0, 0, 0])
  assert cli.main(['export', reacher, str(tmp_path / 'd.hdf5'), '--to', 'd4rl']) == 0
  assert _printed(capsys)['next_observations'] == [5, 9, 100, 100]
  assert cli.main(['export', reacher, str(tmp_path / 'dict.npz'), '--to',
                   'il_representations_dict']) == 0
  np.testing.assert_array_equal(np.load(tmp_path / 'dict.npz')['dones'], [0, 0, 1, 0, 1])


def test_export_il_representations_shard(reacher, tmp_path, capsys):
  out = tmp_path / 'processed' / 'demos' / 'dm_control' / 'reacher-easy' / 'demos.tar.zst'
  assert cli.main(['export', reacher, str(out), '--to', 'il_representations']) == 0
  assert capsys.readouterr().out.strip() == f'wrote {out} (il_representations): 5 frames'
  _, theirs = il_representations.read_shard(
      DUMMY / 'processed/demos/dm_control/reacher-easy/demos.tar.zst')
  _, ours = il_representations.read_shard(out)
  for key in ('obs', 'next_obs', 'acts', 'dones', 'rews'):
    np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def test_mistakes_are_one_line_exit_2(reacher, tmp_path, capsys):
  assert cli.main(['export', reacher, str(tmp_path / 'x.tar.zst'), '--to', 'il_representations',
                   '--env_cfg', '{"benchmark_name": "dm_control", "task_name": "no-such"}']) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1
  assert "SchemaError" in err and "'dm_control'/'no-such'" in err
  assert not list(tmp_path.iterdir())
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['export', reacher, str(tmp_path / 'x.csv'), '--to', 'csv'])
  assert exit_info.value.code == 2
  with pytest.raises(SystemExit):
    cli.main(['export', reacher, str(tmp_path / 'x.tar.zst'), '--to', 'il_representations',
              '--env_cfg', '[1]'])
