#!/usr/bin/env bash
# Runs every test once: the files Bazel cannot run (tools/bazel/pytest_only.bzl: a wheel build,
# the environment extras, Chromium, servers) under pytest, everything else as Bazel py_test
# targets; then one closing line counting the tests of both. Exits non-zero if either failed.
set -uo pipefail
cd "$(dirname "$0")/.."
report="${TMPDIR:-/tmp}/rlds_suite_pytest_outside_bazel.xml"
rm -f "$report"
python3 -m pytest -q --outside-bazel --junitxml="$report"
pytest_status=$?
bazel test //...
bazel_status=$?
python3 tools/test_summary.py "$report"
if ((pytest_status != 0 || bazel_status != 0)); then
  echo "test.sh: pytest exited $pytest_status, bazel test exited $bazel_status" >&2
  exit 1
fi
