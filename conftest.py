"""Shared test setup: quiet TensorFlow, paths to fixtures and to the shared real data, and
`--outside-bazel`, which collects only the files Bazel does not run (tools/bazel/pytest_only.bzl)."""

import ast
import os
import pathlib

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top

REPO = pathlib.Path(__file__).resolve().parent
FIXTURES = REPO / 'tests' / 'fixtures'
REAL_DATA = REPO.parent / 'shared' / 'real_data'
PYTEST_ONLY_LIST = REPO / 'tools' / 'bazel' / 'pytest_only.bzl'


def files_outside_bazel() -> frozenset:
  """The test files that run under pytest alone (the PYTEST_ONLY list of pytest_only.bzl)."""
  module = ast.parse(PYTEST_ONLY_LIST.read_text())
  (value,) = [node.value for node in module.body
              if isinstance(node, ast.Assign) and node.targets[0].id == 'PYTEST_ONLY']
  files = frozenset(REPO / name for name in ast.literal_eval(value))
  missing = sorted(str(f) for f in files if not f.is_file())
  if missing:
    raise pytest.UsageError(f'{PYTEST_ONLY_LIST}: no such test file: {", ".join(missing)}')
  return files


def pytest_addoption(parser):
  parser.addoption('--outside-bazel', action='store_true',
                   help='collect only the test files Bazel does not run (tools/bazel/pytest_only.bzl)')


def pytest_ignore_collect(collection_path: pathlib.Path, config):
  if not config.getoption('--outside-bazel') or collection_path.is_dir():
    return None
  if collection_path.suffix != '.py':
    return None
  if not hasattr(config, '_rlds_suite_pytest_only'):
    config._rlds_suite_pytest_only = files_outside_bazel()  # pylint: disable=protected-access
  return collection_path.resolve() not in config._rlds_suite_pytest_only or None  # pylint: disable=protected-access


@pytest.fixture
def real_data() -> pathlib.Path:
  if not REAL_DATA.is_dir():
    pytest.skip(f'shared real data not found at {REAL_DATA}')
  return REAL_DATA


@pytest.fixture
def fixtures() -> pathlib.Path:
  return FIXTURES


def pytest_collection_modifyitems(config, items):
  """Drops TensorFlow's `TestCase.test_session`, a context manager pytest mistakes for a test
  (it only skips itself with 'Not a test.'), so the skip summary lists real skips alone."""
  del config
  items[:] = [item for item in items
              if getattr(getattr(item, 'function', None), '__module__', '') !=
              'tensorflow.python.framework.test_util']


@pytest.fixture
def bars(monkeypatch) -> list:
  """Every rlds_suite progress bar opened while the test runs, with its totals and final counts."""
  from rlds_suite.core import progress  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  opened = []

  class Recorded(progress.Bar):

    def __init__(self, *args, **kwargs):
      super().__init__(*args, **kwargs)
      opened.append(self)

  monkeypatch.setattr(progress, 'Bar', Recorded)
  return opened
