"""Builder lookup without TensorFlow: the generated index, names, and what a build needs first."""

import os

import pytest

from rlds_suite.core import errors
from rlds_suite.tfds import registry

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAGICAL_DUMMY = os.path.join(REPO, 'builders', 'magical_demos', 'dummy_data')


def test_index_equals_what_tfds_registered():
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  assert registry.entries() == registry.entries_from_tfds(), (
      'builder_index.py is stale: run python3 -m rlds_suite.tfds.registry')
  ours = {entry.name for entry in registry.entries()}
  assert set(registry.tfds_builders()) | ours == set(tfds.list_builders(
      with_community_datasets=False))
  with open(registry.INDEX_PATH, encoding='utf-8') as f:
    assert f.read() == registry.index_text()


def test_default_data_dir_is_tfds_own(monkeypatch):
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  monkeypatch.delenv('TFDS_DATA_DIR', raising=False)
  assert registry.default_data_dir() == os.path.expanduser(tfds.core.constants.DATA_DIR)


def test_a_builder_with_configs_needs_one_named():
  with pytest.raises(errors.UsageError, match=r'magical_demos has 8 configs; name one: '
                     r'magical_demos/move_to_corner, magical_demos/move_to_region, '):
    registry.check_buildable('magical_demos', manual_dir=MAGICAL_DUMMY)
  with pytest.raises(errors.UsageError, match=r'has 230 configs; name one: .*Alien_run_1, .*'
                     r'\.\.\. \(230 in all: rlds-suite list --configs\)'):
    registry.check_buildable('rlds_suite_rlu_atari', manual_dir=MAGICAL_DUMMY)


@pytest.mark.parametrize('given, where', [(None, 'no --manual_dir given'),
                                          ('missing', '--manual_dir {} is missing'),
                                          ('empty', '--manual_dir {} is empty')])
def test_missing_or_empty_manual_dir_shows_the_expected_files(given, where, tmp_path):
  manual_dir = None if given is None else str(tmp_path / given)
  if given == 'empty':
    os.mkdir(manual_dir)
  with pytest.raises(errors.EmptyInputError) as raised:
    registry.check_buildable('magical_demos/move_to_region', manual_dir=manual_dir,
                             data_dir=str(tmp_path / 'data'))
  message = str(raised.value)
  assert message.startswith(f'magical_demos/move_to_region: {where.format(manual_dir)}; it must '
                            'hold the native files: Download https://github.com/qxcv/magical-data')
  assert 'demo-<Task>-Demo-v0-*.pkl.gz' in message and '\n' not in message


def test_default_manual_dir_of_the_data_dir_is_used(tmp_path):
  manual = tmp_path / 'downloads' / 'manual'
  manual.mkdir(parents=True)
  (manual / 'demo-MoveToRegion-Demo-v0-000.pkl.gz').write_bytes(b'')
  registry.check_buildable('magical_demos/move_to_region', data_dir=str(tmp_path))


def test_a_manual_dir_that_is_a_file_is_refused():
  with pytest.raises(errors.SchemaError, match='is a file; expected a directory of native files'):
    registry.check_buildable('magical_demos/move_to_region',
                             manual_dir=os.path.join(REPO, 'setup.cfg'))


def test_tfds_own_builder_of_the_same_name_points_to_ours():
  with pytest.raises(errors.UsageError, match=r"rlu_atari is TFDS's own builder, which downloads "
                     r'its files and reads no --manual_dir; .*rlds-suite build '
                     r'rlds_suite_rlu_atari/Pong_run_1 --manual_dir DIR'):
    registry.check_buildable('rlu_atari/Pong_run_1', manual_dir=MAGICAL_DUMMY)


def test_downloads_need_download():
  with pytest.raises(errors.UsageError, match="mnist is TFDS's own builder, which downloads its "
                     'files: pass --download'):
    registry.check_buildable('mnist')
  registry.check_buildable('mnist', download=True)
  with pytest.raises(errors.EmptyInputError, match=r'\(or pass --download to download them\)'):
    registry.check_buildable('d4rl/hopper-medium-v2', data_dir='/nonexistent')
  registry.check_buildable('d4rl/hopper-medium-v2', data_dir='/nonexistent', download=True)


def test_builders_reading_no_manual_dir_need_none():
  registry.check_buildable('minari', data_dir='/nonexistent')


def test_names_are_checked_with_suggestions():
  with pytest.raises(errors.UnresolvedDatasetError, match='did you mean magical_demos/move_to_'):
    registry.check_buildable('magical_demo/move_to_region')
  with pytest.raises(errors.UnresolvedDatasetError, match="d4rl has no config 'hoper-medium-v2'"):
    registry.check_source('d4rl/hoper-medium-v2')
  with pytest.raises(errors.SchemaError, match='is a file'):
    registry.check_source(os.path.join(REPO, 'setup.cfg'))
  registry.check_source(REPO)  # A directory: what it holds is checked when it is read.


@pytest.mark.parametrize('name, action', [
    ('dqn_replay/Pong-run1', {'discrete': {'n': 18, 'start': 0}}),
    ('rlds_suite_rlu_atari/Pong_run_1', {'discrete': {'n': 18, 'start': 0}}),
    ('imitation_rollouts/cartpole', {'discrete': {'n': 2, 'start': 0}}),
    ('d4rl/hopper-medium-v2', {'box': {'low': -1.0, 'high': 1.0}}),
])
def test_builders_declare_their_action_spaces(name, action, tmp_path):
  """What validate checks actions against (core/spaces), kept in the dataset metadata."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  assert tfds.builder(name, data_dir=str(tmp_path)).info.metadata['spaces']['action'] == action
