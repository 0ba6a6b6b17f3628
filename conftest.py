"""Shared test setup: quiet TensorFlow, paths to fixtures and to the shared real data."""

import os
import pathlib

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top

REPO = pathlib.Path(__file__).resolve().parent
FIXTURES = REPO / 'tests' / 'fixtures'
REAL_DATA = REPO.parent / 'shared' / 'real_data'


@pytest.fixture
def real_data() -> pathlib.Path:
  if not REAL_DATA.is_dir():
    pytest.skip(f'shared real data not found at {REAL_DATA}')
  return REAL_DATA


@pytest.fixture
def fixtures() -> pathlib.Path:
  return FIXTURES
