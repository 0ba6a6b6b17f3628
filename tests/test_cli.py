"""The command lines: `rlds-suite build/validate/demo` and the standard `tfds build` on our folders."""

import io
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

from rlds_suite import cli
from rlds_suite import demo
from rlds_suite.core import episodes
from rlds_suite.tfds import features
from rlds_suite.core import fields
from rlds_suite.tfds import writing

REPO = pathlib.Path(__file__).resolve().parents[1]
DUMMY = REPO / 'builders' / 'magical_demos' / 'dummy_data'
QUIET = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}


def _last_json(text: str) -> dict:
  return json.loads(text[text.index('{'):])


def test_build_then_validate_directory(tmp_path, capsys):
  assert cli.main(['build', 'magical_demos/move_to_corner', '--manual_dir', str(DUMMY),
                   '--data_dir', str(tmp_path)]) == 0
  captured = capsys.readouterr()
  # TFDS announces every preparation as a download of 'Unknown size': not a local conversion.
  assert 'Downloading and preparing' not in captured.out + captured.err
  assert 'downloaded and prepared' not in captured.out + captured.err
  built = _last_json(captured.out)
  assert (built['episodes'], built['steps'], built['valid']) == (2, 6, True)
  assert cli.main(['validate', built['data_dir']]) == 0
  assert _last_json(capsys.readouterr().out)['steps'] == 6


def test_validate_reports_violations_and_fails(tmp_path, capsys):
  good = episodes.to_episode(episodes.BoundaryPolicy(episodes.FinalObservation.EXTRA_ROW).trajectory(
      np.zeros((3, 2), np.float32), np.zeros(2, np.int64), np.zeros(2, np.float32)))
  steps = dict(good.steps)
  steps[fields.IS_LAST] = np.array([True, False, True])
  bad = episodes.Episode(steps=steps)
  rlds_features = features.rlds_features(
      observation=features.tensor((2,), np.float32),
      action=features.scalar(np.int64))
  directory = writing.write_episodes([good, bad], features=rlds_features, data_dir=str(tmp_path),
                                     name='broken')
  assert cli.main(['validate', str(directory)]) == 1
  out = capsys.readouterr().out
  assert ('error: is_last: is_last set before the final step: 1 in 1 episode(s), first at '
          'episode 1, step 0') in out


def test_typed_errors_exit_2_with_message(tmp_path, capsys):
  assert cli.main(['build', 'magical_demos/move_to_corner', '--manual_dir', str(tmp_path),
                   '--data_dir', str(tmp_path / 'out')]) == 2
  assert (f'EmptyInputError: magical_demos/move_to_corner: --manual_dir {tmp_path} is empty; it '
          'must hold the native files: Download ') in capsys.readouterr().err
  (tmp_path / 'unrelated.txt').write_text('not a demo')
  assert cli.main(['build', 'magical_demos/move_to_corner', '--manual_dir', str(tmp_path),
                   '--data_dir', str(tmp_path / 'out')]) == 2
  assert "no files matching 'demo-MoveToCorner-Demo-v0-*.pkl.gz'" in capsys.readouterr().err


def test_tfds_cli_builds_our_folder(tmp_path, monkeypatch):
  """TFDS's own `tfds build FOLDER`, run in this process (its main, as TFDS's tests call it)."""
  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from absl import logging
  from tensorflow_datasets.scripts.cli import main as tfds_main
  # pylint: enable=g-import-not-at-top,import-outside-toplevel
  monkeypatch.chdir(REPO)
  verbosity = logging.get_verbosity()
  try:
    tfds_main.main(tfds_main._parse_flags(  # pylint: disable=protected-access
        ['tfds', 'build', 'builders/magical_demos', '--config', 'move_to_corner',
         f'--manual_dir={DUMMY}', f'--data_dir={tmp_path}']))
  finally:
    logging.set_verbosity(verbosity)
  assert list(tmp_path.glob('magical_demos/move_to_corner/1.0.0/*.tfrecord-*'))


def test_console_script():
  result = subprocess.run(['rlds-suite', 'list'], capture_output=True, text=True, env=QUIET)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.startswith('d4rl  ')


def test_demo(capsys):
  assert cli.main(['demo']) == 0
  out = capsys.readouterr().out
  assert '== magical_demos/move_to_region/1.0.0: valid' in out
  assert 'episodes 1, steps 41' in out
  assert '== imitation_rollouts/cartpole/1.0.0: valid' in out
  assert 'episodes 57, steps 27021' in out
  assert out.count(': valid') == len(demo.SAMPLES) == 4


def test_build_reports_actions_outside_the_declared_space(tmp_path, capsys):
  """imitation's CartPole declares Discrete(2) actions: a 7 and a -1 in its file are errors."""
  source = REPO / 'rlds_suite' / 'sample_data' / 'imitation' / 'cartpole_0_rollouts_final.npz'
  with np.load(source, allow_pickle=True) as native:  # Our own sample: its infos are pickled.
    arrays = {key: native[key] for key in native.files}
  arrays['acts'] = arrays['acts'].copy()
  arrays['acts'][[3, 10]] = [7, -1]
  manual = tmp_path / 'manual'
  manual.mkdir()
  np.savez(manual / source.name, **arrays)
  assert cli.main(['build', 'imitation_rollouts/cartpole', '--manual_dir', str(manual),
                   '--data_dir', str(tmp_path / 'data')]) == 1
  out = capsys.readouterr().out
  assert ('error: action: outside the declared Discrete(2) space: 1 in 1 episode(s), first at '
          'episode 0, step 3 (2 step(s), e.g. 7)') in out


class _Terminal(io.StringIO):
  """A standard error that says it is a terminal (where tqdm shows its bars)."""

  def isatty(self) -> bool:
    return True


def test_progress_with_totals_on_a_terminal_only(tmp_path, capsys, monkeypatch):
  assert cli.main(['build', 'magical_demos/move_to_corner', '--manual_dir', str(DUMMY),
                   '--data_dir', str(tmp_path)]) == 0
  directory = _last_json(capsys.readouterr().out)['data_dir']
  commands = {'validate': ['validate', directory], 'stats': ['stats', directory],
              'export npz': ['export', directory, str(tmp_path / 'x.npz'), '--to', 'npz']}
  for label, argv in commands.items():
    assert cli.main(argv) == 0
    assert label not in capsys.readouterr().err  # Not a terminal: no bar.
    terminal = _Terminal()
    monkeypatch.setattr(sys, 'stderr', terminal)
    (tmp_path / 'x.npz').unlink(missing_ok=True)
    assert cli.main(argv) == 0
    monkeypatch.undo()
    bar = terminal.getvalue().replace('\r', '\n').strip().splitlines()[-1]
    assert bar.startswith(f'{label}: 100%') and '2/2 [' in bar and '6 steps' in bar, bar
  terminal = _Terminal()
  monkeypatch.setattr(sys, 'stderr', terminal)
  assert cli.main(['show', directory, '--out', str(tmp_path / 'x.gif')]) == 0
  monkeypatch.undo()
  frames = json.loads(capsys.readouterr().out.strip().splitlines()[-1])['frames']
  bar = terminal.getvalue().replace('\r', '\n').strip().splitlines()[-1]
  assert bar.startswith(f'render: 100%') and f'{frames}/{frames} [' in bar, bar
