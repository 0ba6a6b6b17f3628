"""The command line answers fast, quietly, and in one line when the user makes a mistake."""

import logging
import os
import subprocess
import sys

import pytest

from rlds_suite import cli
from rlds_suite.compat import post_import
from rlds_suite.compat import quiet_tensorflow

# The user's environment, without a TF_CPP_MIN_LOG_LEVEL of their own (conftest sets one).
USER_ENV = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args: str, env=None, cwd=None) -> subprocess.CompletedProcess:
  """`python3 -m rlds_suite ARGS` in a process of its own (for what only a process shows: file
  descriptor 2, the import order, the current directory)."""
  return subprocess.run([sys.executable, '-m', 'rlds_suite', *args], capture_output=True, text=True,
                        env=env or USER_ENV, cwd=cwd, timeout=300, check=False)


def _main(argv, capsys) -> tuple[int, list[str]]:
  """cli.main in this process: (exit code, standard error's lines)."""
  try:
    code = cli.main(argv)
  except SystemExit as e:  # argparse's own mistakes.
    code = e.code
  return code, capsys.readouterr().err.strip().splitlines()


# Mistakes found before TensorFlow is imported: each answers within the interpreter's start-up.
EARLY_MISTAKES = [
    (['bogus'], "invalid choice: 'bogus'"),
    (['build'], 'the following arguments are required: name'),
    (['validate', 'magical_demo/move_to_region'],
     "no registered dataset 'magical_demo' and no such directory; did you mean "
     'magical_demos/move_to_region'),
    (['validate', 'd4rl/hoper-medium-v2'],
     "d4rl has no config 'hoper-medium-v2'; did you mean d4rl/hopper-medium-v2"),
    (['validate', 'setup.cfg'], 'is a file; expected a dataset directory'),
    (['stats', 'magical_demo/move_to_region'], "no registered dataset 'magical_demo'"),
    (['show', 'd4rl/hoper-medium-v2'], "d4rl has no config 'hoper-medium-v2'"),
    (['export', 'magical_demo/x', 'out.npz', '--to', 'npz'], "no registered dataset 'magical_demo'"),
    (['verify', 'magical_demo/x'], "no registered dataset 'magical_demo'"),
    (['validate', '/nonexistent/dataset'],
     '/nonexistent/dataset: no such directory (and not a registered dataset name)'),
    (['build', 'magical_demos/move_to_region', '--manual_dir', 'setup.cfg'],
     'is a file; expected a directory of native files'),
    (['build', 'magical_demo/move_to_region', '--manual_dir', 'builders'],
     "no registered dataset 'magical_demo'"),
    (['build', 'magical_demos', '--manual_dir', 'builders'],
     'magical_demos has 8 configs; name one: magical_demos/move_to_corner, '),
    (['build', 'magical_demos/move_to_region', '--data_dir', '/nonexistent/data'],
     'magical_demos/move_to_region: no --manual_dir given; it must hold the native files: '
     'Download https://github.com/qxcv/magical-data'),
    (['build', 'magical_demos/move_to_region', '--manual_dir', '/nonexistent/manual'],
     '--manual_dir /nonexistent/manual is missing; it must hold the native files: Download '),
    (['build', 'rlu_atari/Pong_run_1', '--manual_dir', 'builders'],
     'rlds-suite build rlds_suite_rlu_atari/Pong_run_1 --manual_dir DIR'),
    (['build', 'mnist'], "mnist is TFDS's own builder, which downloads its files: pass --download"),
    (['record', '--env', 'gymnasium:NoSuch-v0', '--episodes', '1', '--out', '/nonexistent/x'],
     "gymnasium:NoSuch-v0: Environment `NoSuch` doesn't exist"),
    (['record', '--env', 'gym:CartPole-v1', '--episodes', '1', '--out', '/nonexistent/x'],
     'expected "family:name" with family in'),
    (['record', '--env', 'gymnasium:CartPole-v1', '--policy', 'expert', '--episodes', '1',
      '--out', '/nonexistent/x'], "invalid choice: 'expert'"),
]

# Mistakes met once the command's library is imported.
LATE_MISTAKES = [
    (['convert', 'no_such_logs', '--out', '/nonexistent/out'], 'no_such_logs: not a directory'),
    (['stream', '--config', '[{]'], '--config: not JSON: Expecting property name'),
    (['stream', '--config', '[{}]', '--register', 'demos/magical=/tmp'],
     "--register: expected TYPE/BENCHMARK/TASK=PATH, got 'demos/magical=/tmp'"),
    (['record', '--env', 'gymnasium:CartPole-v1', '--option', 'foo=1', '--episodes', '1', '--out',
      '/nonexistent/never_written'], "gymnasium:CartPole-v1 takes no option 'foo'"),
    (['record', '--env', 'procgen:notagame', '--episodes', '1', '--out', '/nonexistent/x'],
     "no procgen game 'notagame'; games: bigfish"),
]


def test_help_list_and_early_mistakes_import_no_tensorflow():
  """--help, `list` and every EARLY_MISTAKES case, in one fresh process: none imports TensorFlow
  (each then answers in well under a second)."""
  code = (f'import sys\nfrom rlds_suite import cli\nARGVS = {[a for a, _ in EARLY_MISTAKES]!r}\n'
          'for argv in [["--help"], ["build", "--help"], ["show", "--help"], ["stream", "--help"], '
          '["list", "--configs"]] + ARGVS:\n'
          '  try: cli.main(argv)\n  except SystemExit: pass\n'
          'print("tensorflow" in sys.modules, "tensorflow_datasets" in sys.modules)')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True,
                          cwd=REPO)
  assert result.stdout.strip().splitlines()[-1] == 'False False'
  assert 'magical_demos  ' in result.stdout and 'rlds_suite_rlu_atari  ' in result.stdout


def test_every_option_has_help():
  parser = cli.make_parser()
  subparsers = next(a for a in parser._actions if a.dest == 'command')  # pylint: disable=protected-access
  for name, sub in subparsers.choices.items():
    for action in sub._actions:  # pylint: disable=protected-access
      assert action.help, f'{name} {action.option_strings or action.dest} has no help'


@pytest.mark.parametrize('argv, message', EARLY_MISTAKES + LATE_MISTAKES)
def test_mistakes_are_one_line_and_exit_2(argv, message, capsys, monkeypatch):
  monkeypatch.chdir(REPO)
  code, lines = _main(argv, capsys)
  assert code == 2, lines
  assert len(lines) == 1, lines
  assert message in lines[0]


@pytest.fixture(scope='module')
def start_ups(tmp_path_factory) -> dict[str, tuple[int, str, str]]:
  """Fresh processes, run side by side, that import TensorFlow and then fail on an empty directory:
  name -> (exit code, stdout, stderr). 'quiet' imports JAX first when it is installed (JAX sets
  TF_CPP_MIN_LOG_LEVEL=1 of its own), then rlds_suite, then TFDS, and prints whether TensorFlow
  was imported by rlds_suite and whether TFDS lists our builders."""
  empty = str(tmp_path_factory.mktemp('empty'))  # No dataset_info.json: an error after the import.
  quiet = ('import sys\ntry:\n  import jax\nexcept ImportError:\n  pass\nimport rlds_suite\n'
           'print("tensorflow" in sys.modules)\nimport tensorflow_datasets as tfds\n'
           'print("magical_demos" in tfds.list_builders(with_community_datasets=False))\n'
           f'from rlds_suite import cli\nsys.exit(cli.main(["validate", {empty!r}]))')
  commands = {
      'quiet': ([sys.executable, '-c', quiet], USER_ENV),
      'verbose': ([sys.executable, '-m', 'rlds_suite', '--verbose', 'validate', empty], USER_ENV),
      'chosen': ([sys.executable, '-m', 'rlds_suite', 'validate', empty],
                 {**USER_ENV, 'TF_CPP_MIN_LOG_LEVEL': '0'}),
  }
  running = {name: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=env) for name, (argv, env) in commands.items()}
  results = {}
  for name, process in running.items():
    out, err = process.communicate(timeout=300)
    results[name] = (process.returncode, out, err)
  return results


def test_import_rlds_suite_imports_no_tensorflow_but_registers_builders_with_tfds(start_ups):
  assert start_ups['quiet'][1].split() == ['False', 'True']


def test_tensorflow_start_up_logs_are_filtered_unless_verbose_or_chosen(start_ups):
  (quiet_code, _, quiet), (verbose_code, _, verbose), (chosen_code, _, chosen) = (
      start_ups['quiet'], start_ups['verbose'], start_ups['chosen'])
  assert quiet.count('\n') == 1 and 'I0000' not in quiet, quiet
  assert 'no dataset_info.json below this directory' in quiet
  # Where TensorFlow logs at start-up, --verbose and a level of the user's own let it through.
  if 'port.cc' in chosen:
    assert 'port.cc' in verbose
  assert (quiet_code, verbose_code, chosen_code) == (2, 2, 2)


@pytest.mark.parametrize('environ, modules, initial, chose', [
    ({}, set(), b'', False),
    ({'TF_CPP_MIN_LOG_LEVEL': '0'}, set(), b'', True),
    ({'TF_CPP_MIN_LOG_LEVEL': '1'}, {'jax'}, b'HOME=/root\0', False),  # JAX's own setdefault.
    ({'TF_CPP_MIN_LOG_LEVEL': '1'}, {'jax'}, b'HOME=/root\0TF_CPP_MIN_LOG_LEVEL=1\0', True),
    ({'TF_CPP_MIN_LOG_LEVEL': '1'}, {'jax'}, None, True),
    ({'TF_CPP_MIN_LOG_LEVEL': '2'}, {'jax'}, b'', True),
])
def test_user_chose_level(environ, modules, initial, chose):
  assert quiet_tensorflow.user_chose_level(environ, modules, initial) is chose


def test_checkout_shadowing_the_package_is_named(tmp_path):
  on_path = subprocess.run(
      [sys.executable, '-c', 'import importlib.machinery as m, sys\n'
       'spec = m.PathFinder.find_spec("rlds_suite", sys.path[1:])\n'
       'print(spec is not None and spec.origin is not None)'],
      capture_output=True, text=True, check=True, env=USER_ENV, cwd=tmp_path).stdout.strip()
  if on_path == 'True':
    pytest.skip('rlds_suite is a package on sys.path here (not an editable install through a '
                'finder): a folder of that name cannot shadow it')
  (tmp_path / 'rlds_suite').symlink_to(REPO, target_is_directory=True)
  result = _run('list', cwd=tmp_path)
  assert result.returncode == 2
  (line,) = result.stderr.strip().splitlines()
  assert line.startswith(f'error: rlds_suite is the folder {tmp_path / "rlds_suite"} here (the '
                         'current directory shadows the installed package)'), line


def test_apitools_warning_is_dropped_unless_verbose(caplog):
  with quiet_tensorflow.without_apitools_warning():
    logging.warning('apitools not found, and bigquery client libraries are not available')
    logging.warning('another warning')
  logging.warning('apitools not found (outside)')
  assert [r.getMessage() for r in caplog.records] == ['another warning',
                                                      'apitools not found (outside)']


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


def test_truncated_riegeli_log_is_one_line_naming_it(tmp_path, capsys):
  import envlogger  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import numpy as np  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_suite import envs  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  logs = tmp_path / 'logs'
  logs.mkdir()
  with envlogger.EnvLogger(envs.make('gymnasium:CartPole-v1', seed=0),
                           data_directory=str(logs)) as logged:
    for _ in range(3):
      step = logged.reset()
      while not step.last():
        step = logged.step(np.int64(0))
  (steps,) = logs.rglob('steps.riegeli')
  with open(steps, 'r+b') as f:
    f.truncate(steps.stat().st_size // 2)
  code, lines = _main(['convert', str(logs), '--out', str(tmp_path / 'out')], capsys)
  assert code == 2
  (line,) = lines
  assert line.startswith(f'error: CorruptFileError: {logs}: corrupt or truncated Riegeli log')
  assert not (tmp_path / 'out').exists()


@pytest.fixture(scope='module')
def imitation_dataset(tmp_path_factory) -> str:
  """imitation's CartPole sample built once for the module: its dataset directory."""
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  builder = datasets.build('imitation_rollouts/cartpole',
                           manual_dir=os.path.join(REPO, 'rlds_suite', 'sample_data', 'imitation'),
                           data_dir=str(tmp_path_factory.mktemp('data')))
  return str(builder.data_dir)


@pytest.mark.parametrize('command', ['validate', 'stats', 'show'])
def test_corrupt_shard_is_named(command, imitation_dataset, tmp_path, capsys):
  import shutil  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  directory = tmp_path / 'copy'
  shutil.copytree(imitation_dataset, directory)
  shard = sorted(directory.glob('*.tfrecord*'))[0]
  shard.write_bytes(shard.read_bytes()[:shard.stat().st_size // 2])
  # show reads only the episode asked for: one past the truncation.
  argv = [command, str(directory)] + (['--episode', '50', '--out', str(tmp_path / 'x.png')]
                                      if command == 'show' else [])
  assert cli.main(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()[-1]
  # validate reads shards without TensorFlow (tfds/shard_reader): its own wording, same file.
  assert err.startswith(f'error: CorruptFileError: {shard}: '), err
  assert 'truncated' in err, err


def test_show_refuses_an_animation_of_vectors_before_reading(imitation_dataset, tmp_path, capsys):
  """The output's kind is checked from the declared features: the corrupt shards are never read."""
  import shutil  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  directory = tmp_path / 'copy'
  shutil.copytree(imitation_dataset, directory)
  for shard in directory.glob('*.tfrecord*'):
    shard.write_bytes(b'')
  code, lines = _main(['show', str(directory), '--out', str(tmp_path / 'x.gif')], capsys)
  assert code == 2
  assert lines == [f'error: SchemaError: {tmp_path / "x.gif"}: vector observations are plotted; '
                   'use a .png output']

