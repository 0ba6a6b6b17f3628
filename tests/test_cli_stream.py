"""`rlds-suite stream`: one library call, spec and throughput printed."""

import json

from rlds_suite import cli

from tests import streams_data


def test_stream_command_over_a_registered_directory(tmp_path, capsys):
  directory = streams_data.write(tmp_path, 'cli_random', streams_data.id_episodes(0, 4))
  assert cli.main(['stream', '--config', '[{"type": "random"}]', '--register',
                   f'random/magical/MoveToRegion={directory}', '--unit', 'transitions',
                   '--batch', '4', '--take', '3']) == 0
  out = capsys.readouterr().out
  summary = json.loads(out.strip().splitlines()[-1])
  assert (summary['batches'], summary['units']) == (3, 12)
  # The batch's fields, one a line, readable (it printed a dict of TensorSpec reprs).
  fields = out[out.index('batch fields:\n'):].splitlines()[1:-1]
  assert fields == ['  observation: float32[4, 3]', '  action: float32[4, 2]', '  reward: float32[4]',
                    '  discount: float32[4]', '  next_observation: float32[4, 3]',
                    '  is_terminal: bool[4]', '  epoch: int64[4]', '  dataset_index: int32[4]']


def test_unresolvable_entry_fails_with_the_typed_error(capsys):
  assert cli.main(['stream', '--config', '[{"type": "random", "env_cfg": {"task_name": "x"}}]']) == 2
  assert 'UnresolvedDatasetError' in capsys.readouterr().err


def test_stream_command_reports_sizes_chosen_under_the_memory_budget(tmp_path, capsys):
  directory = streams_data.write(tmp_path, 'cli_budget', streams_data.id_episodes(0, 4))
  assert cli.main(['stream', '--config', json.dumps([directory]), '--memory_budget', '64MiB',
                   '--shuffle_episodes', '2', '--shuffle_units', '8', '--batch', '4', '--take',
                   '2', '--cache_dir', str(tmp_path / 'cache')]) == 0
  out = capsys.readouterr().out
  assert 'memory budget 64 MiB' in out and 'blocks of 8 units' in out
  assert 'episode buffer 2 episodes' in out
  assert json.loads(out.strip().splitlines()[-1])['batches'] == 2
  assert any((tmp_path / 'cache').iterdir())


def test_budget_too_small_for_one_batch_is_an_error_line(tmp_path, capsys):
  directory = streams_data.write(tmp_path, 'cli_small', streams_data.id_episodes(0, 2))
  assert cli.main(['stream', '--config', json.dumps([directory]), '--memory_budget', '18MiB',
                   '--batch', '4096']) == 2
  err = capsys.readouterr().err
  assert err.startswith('error: memory budget 18 MiB is too small for batches of 4096')
