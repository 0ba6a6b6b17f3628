#!/usr/bin/env bash
# Bazel for `bazel build //...` / `bazel test //...`: Debian 12's bazel-bootstrap (4.2.3), which
# runs offline with the stand-ins in third_party/bazel_stubs. Idempotent and non-interactive.
set -euo pipefail
if command -v bazel >/dev/null 2>&1; then
  exit 0
fi
if [[ "$(id -u)" == 0 ]]; then SUDO=""; else SUDO="sudo"; fi
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q bazel-bootstrap
