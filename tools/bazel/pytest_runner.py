"""Runs pytest files as one Bazel py_test: `pytest_runner.py tests/test_x.py tests/test_y.py`.

The repository's pytest configuration (setup.cfg, conftest.py) travels in the runfiles; pytest's
temporary files go under Bazel's TEST_TMPDIR and its JUnit report where Bazel asks for one.
"""

import os
import pathlib
import sys

import pytest


def main() -> int:
  root = pathlib.Path(__file__).resolve().parents[2] if 'RUNFILES_DIR' not in os.environ else (
      pathlib.Path(os.environ['RUNFILES_DIR']) / os.environ.get('TEST_WORKSPACE', 'rlds_suite'))
  os.chdir(root)
  args = [*sys.argv[1:], '-q', '-c', 'setup.cfg', '--rootdir', str(root)]
  if 'TEST_TMPDIR' in os.environ:
    args += ['--basetemp', os.path.join(os.environ['TEST_TMPDIR'], 'pytest')]
  if 'XML_OUTPUT_FILE' in os.environ:
    args += ['--junitxml', os.environ['XML_OUTPUT_FILE']]
  return pytest.main(args)


if __name__ == '__main__':
  sys.exit(main())
