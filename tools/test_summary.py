"""Prints one closing line for the README's test command: the tests run by pytest and by Bazel.

Bazel reports test targets (a group of files each, BUILD.bazel); the tests inside them are in each
target's JUnit report (bazel-testlogs/<target>/test.xml, written by tools/bazel/pytest_runner.py). Counting those
and pytest's own report gives `N passed, N failed, N skipped` over every test, each run once.

  python3 tools/test_summary.py PYTEST_JUNIT_XML [BAZEL_TESTLOGS_DIR]
"""

from __future__ import annotations

import collections
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

REPO = pathlib.Path(__file__).resolve().parents[1]


def outcomes(report: pathlib.Path) -> collections.Counter:
  """Counts passed/failed/skipped test cases in one JUnit XML report."""
  counts = collections.Counter()
  for case in ElementTree.parse(report).getroot().iter('testcase'):
    tags = {child.tag for child in case}
    if tags & {'failure', 'error'}:
      counts['failed'] += 1
    elif 'skipped' in tags:
      counts['skipped'] += 1
    else:
      counts['passed'] += 1
  return counts


def current_targets() -> set[str]:
  """The py_test targets BUILD.bazel declares now, as testlogs paths ("tests/group_cli")."""
  query = subprocess.run(['bazel', 'query', 'kind(py_test, //...)', '--output=label'], cwd=REPO,
                         capture_output=True, text=True, check=True)
  return {label.split(':', 1)[1] for label in query.stdout.split()}


def bazel_reports(testlogs: pathlib.Path, targets: set[str]) -> list[pathlib.Path]:
  """The JUnit reports of the current targets (old targets' logs stay in bazel-testlogs)."""
  return [report for report in sorted(testlogs.glob('**/test.xml'))
          if str(report.parent.relative_to(testlogs)) in targets]


def main(argv: list[str]) -> int:
  pytest_report = pathlib.Path(argv[1])
  testlogs = pathlib.Path(argv[2]) if len(argv) > 2 else REPO / 'bazel-testlogs'
  counts = outcomes(pytest_report) if pytest_report.is_file() else collections.Counter()
  reports = bazel_reports(testlogs, current_targets()) if testlogs.is_dir() else []
  for report in reports:
    counts += outcomes(report)
  print(f'(pytest: {pytest_report.name}; Bazel: {len(reports)} targets\' reports)')
  print(f'{counts["passed"]} passed, {counts["failed"]} failed, {counts["skipped"]} skipped')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))
