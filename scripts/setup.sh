#!/usr/bin/env bash
# Sets rlds_suite up on a fresh Debian 12 / Python 3.11 machine, idempotently: the package (editable)
# with every environment extra and the test tools, then what pip extras cannot express
# (scripts/setup_envs.sh: system libraries for headless MuJoCo, procgen; scripts/setup_bazel.sh: Bazel).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install --quiet -e ".[all,test]"
if [ -f scripts/setup_envs.sh ]; then
  bash scripts/setup_envs.sh
fi
bash scripts/setup_bazel.sh
