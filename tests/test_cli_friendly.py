"""The command line answers fast, quietly, and in one line when the user makes a mistake."""

import os
import subprocess
import sys

import pytest

from rlds_suite import cli
from rlds_suite.compat import post_import
from rlds_suite.compat import quiet_tensorflow

# The user's environment, without a TF_CPP_MIN_LOG_LEVEL of their own (conftest sets one).
USER_ENV = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}


def _run(*args: str, env=None) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, '-m', 'rlds_suite', *args], capture_output=True, text=True,
                        env=env or USER_ENV, timeout=300, check=False)


def test_help_imports_no_tensorflow():
  code = ('import sys\nfrom rlds_suite import cli\n'
          'for argv in (["--help"], ["build", "--help"], ["show", "--help"], ["stream", "--help"]):\n'
          '  try: cli.main(argv)\n  except SystemExit: pass\n'
          'print("tensorflow" in sys.modules, "tensorflow_datasets" in sys.modules)')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
  assert result.stdout.strip().splitlines()[-1] == 'False False'


def test_import_rlds_suite_imports_no_tensorflow_but_registers_builders_with_tfds():
  code = ('import sys, rlds_suite\nprint("tensorflow" in sys.modules)\n'
          'import tensorflow_datasets as tfds\n'
          'print("magical_demos" in tfds.list_builders(with_community_datasets=False))')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
  assert result.stdout.split() == ['False', 'True']


def test_every_option_has_help():
  parser = cli.make_parser()
  subparsers = next(a for a in parser._actions if a.dest == 'command')  # pylint: disable=protected-access
  for name, sub in subparsers.choices.items():
    for action in sub._actions:  # pylint: disable=protected-access
      assert action.help, f'{name} {action.option_strings or action.dest} has no help'


@pytest.mark.parametrize('argv, message', [
    (['bogus'], "invalid choice: 'bogus'"),
    (['build'], 'the following arguments are required: name'),
    (['validate', 'magical_demo/move_to_region'],
     "no registered dataset 'magical_demo' and no such directory; did you mean "
     'magical_demos/move_to_region'),
    (['validate', 'd4rl/hoper-medium-v2'],
     "d4rl has no config 'hoper-medium-v2'; did you mean d4rl/hopper-medium-v2"),
    (['validate', 'setup.cfg'], 'is a file; expected a dataset directory'),
    (['stream', '--config', '[{]'], '--config: not JSON: Expecting property name'),
    (['stream', '--config', '[{}]', '--register', 'demos/magical=/tmp'],
     "--register: expected TYPE/BENCHMARK/TASK=PATH, got 'demos/magical=/tmp'"),
    (['validate', '/nonexistent/dataset'],
     '/nonexistent/dataset: no such directory (and not a registered dataset name)'),
    (['build', 'magical_demos/move_to_region', '--manual_dir', 'setup.cfg'],
     'is a file; expected a directory of native files'),
    (['record', '--env', 'gymnasium:CartPole-v1', '--option', 'foo=1', '--episodes', '1', '--out',
      '/nonexistent/never_written'], "gymnasium:CartPole-v1 takes no option 'foo'"),
    (['record', '--env', 'procgen:notagame', '--episodes', '1', '--out', '/nonexistent/x'],
     "no procgen game 'notagame'; games: bigfish"),
    (['record', '--env', 'gymnasium:NoSuch-v0', '--episodes', '1', '--out', '/nonexistent/x'],
     "gymnasium:NoSuch-v0: Environment `NoSuch` doesn't exist"),
])
def test_mistakes_are_one_line_and_exit_2(argv, message):
  result = _run(*argv)
  assert result.returncode == 2, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1, result.stderr
  assert message in lines[0]


def test_tensorflow_start_up_logs_are_filtered_unless_verbose_or_chosen():
  quiet = _run('validate', 'nope_not_a_dataset')
  assert quiet.stderr.count('\n') == 1 and 'I0000' not in quiet.stderr
  verbose = _run('--verbose', 'validate', 'nope_not_a_dataset')
  chosen = _run('validate', 'nope_not_a_dataset', env={**USER_ENV, 'TF_CPP_MIN_LOG_LEVEL': '0'})
  # Where TensorFlow logs at start-up, --verbose and a level of the user's own let it through.
  if 'port.cc' in chosen.stderr:
    assert 'port.cc' in verbose.stderr
  assert verbose.returncode == chosen.returncode == 2


def test_startup_noise_pattern():
  assert quiet_tensorflow.is_startup_noise(
      'I0000 00:00:1795377168.685496   18681 port.cc:153] oneDNN custom operations are on.')
  assert quiet_tensorflow.is_startup_noise(
      'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR')
  assert not quiet_tensorflow.is_startup_noise('Traceback (most recent call last):')
  assert not quiet_tensorflow.is_startup_noise('error: SchemaError: x: bad')


def test_post_import_hooks_run_once_after_import(tmp_path, monkeypatch):
  (tmp_path / 'hooked_module_for_test.py').write_text('VALUE = 41\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  seen = []
  post_import.when_imported('hooked_module_for_test', lambda m: seen.append(m.VALUE + 1))
  assert not seen
  import hooked_module_for_test  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
  assert seen == [42]
  post_import.when_imported('hooked_module_for_test', lambda m: seen.append(m.VALUE))
  assert seen == [42, 41]
  assert hooked_module_for_test.__spec__.loader.__class__.__name__ != '_LoaderThenHooks'


def test_envlogger_riegeli_backend_works_after_import(tmp_path):
  code = f'''
import numpy as np, rlds_suite, envlogger, dm_env
from rlds_suite import envs
env = envs.make('gymnasium:CartPole-v1', seed=0)
with envlogger.EnvLogger(env, data_directory={str(tmp_path)!r}) as logged:
  for _ in range(2):
    step = logged.reset()
    while not step.last():
      step = logged.step(np.int64(0))
with envlogger.Reader({str(tmp_path)!r}) as reader:
  print(len(list(reader.episodes)))
'''
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.split()[-1] == '2'


def test_truncated_riegeli_log_is_one_line_naming_it(tmp_path):
  logs = tmp_path / 'logs'
  logs.mkdir()
  code = f'''
import numpy as np, rlds_suite, envlogger
from rlds_suite import envs
env = envs.make('gymnasium:CartPole-v1', seed=0)
with envlogger.EnvLogger(env, data_directory={str(logs)!r}) as logged:
  for _ in range(3):
    step = logged.reset()
    while not step.last():
      step = logged.step(np.int64(0))
'''
  subprocess.run([sys.executable, '-c', code], capture_output=True, check=True, timeout=300)
  (steps,) = logs.rglob('steps.riegeli')
  with open(steps, 'r+b') as f:
    f.truncate(steps.stat().st_size // 2)
  result = _run('convert', str(logs), '--out', str(tmp_path / 'out'))
  assert result.returncode == 2
  (line,) = result.stderr.strip().splitlines()
  assert line.startswith(f'error: CorruptFileError: {logs}: corrupt or truncated Riegeli log')
  assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('command', ['validate', 'stats', 'show'])
def test_corrupt_shard_is_named(command, tmp_path, capsys):
  import shutil  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  builder = datasets.build('imitation_rollouts/cartpole',
                           manual_dir=os.path.join(repo, 'rlds_suite', 'sample_data', 'imitation'),
                           data_dir=str(tmp_path / 'data'))
  directory = tmp_path / 'copy'
  shutil.copytree(str(builder.data_dir), directory)
  shard = sorted(directory.glob('*.tfrecord*'))[0]
  shard.write_bytes(shard.read_bytes()[:shard.stat().st_size // 2])
  # show reads only the episode asked for: one past the truncation.
  argv = [command, str(directory)] + (['--episode', '50', '--out', str(tmp_path / 'x.png')]
                                      if command == 'show' else [])
  assert cli.main(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()[-1]
  assert err.startswith(f'error: CorruptFileError: {shard}: corrupt TFRecord shard of '
                        'imitation_rollouts/cartpole/1.0.0: truncated record at '), err
