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
  assert 'next_observation' in out


def test_unresolvable_entry_fails_with_the_typed_error(capsys):
  assert cli.main(['stream', '--config', '[{"type": "random", "env_cfg": {"task_name": "x"}}]']) == 2
  assert 'UnresolvedDatasetError' in capsys.readouterr().err
