#!/usr/bin/env bash
# Environment extras that pip extras cannot express. Idempotent and non-interactive.
#  * apt: libegl1 libgl1 (headless MuJoCo rendering with MUJOCO_GL=egl, for dm_control pixels);
#    chromium chromium-driver (the creator's browser test) and postgresql (its PostgreSQL test; the
#    package's own cluster is not started here, the test runs a private server on loopback).
#  * procgen: procgen-mirror declares numpy<2 and imports the old `gym`; installed with --no-deps
#    together with gym3 and gym 0.26 (+ gym_notices), it works on numpy 2 (tests/test_envs.py).
#  * d3rlpy (tests/test_exports.py reads our D4RL exports with it): 2.8.1 pins gymnasium==1.0.0,
#    which would downgrade ours, so it and its needs go in with --no-deps, into a folder of their
#    own (.test_deps/d3rlpy, which that test alone puts on sys.path): scikit-learn among them
#    would otherwise be imported by Keras on every TensorFlow import (~0.7 s each).
set -euo pipefail

PYTHON="${PYTHON:-python3}"

if command -v dpkg >/dev/null 2>&1; then
  missing=()
  for package in libegl1 libgl1 chromium chromium-driver postgresql; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if ((${#missing[@]})); then
    if [[ "$(id -u)" == 0 ]]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
  fi
fi

if ! "$PYTHON" -c 'import procgen' >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-deps procgen-mirror gym3 'gym==0.26.2' gym_notices
fi
"$PYTHON" -c 'from procgen import ProcgenGym3Env; ProcgenGym3Env(num=1, env_name="coinrun")' \
  >/dev/null 2>&1 || { echo "setup_envs.sh: procgen does not load" >&2; exit 1; }

D3RLPY_DIR="$(cd "$(dirname "$0")/.." && pwd)/.test_deps/d3rlpy"
if ! PYTHONPATH="$D3RLPY_DIR" "$PYTHON" -c 'import d3rlpy' >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-deps --upgrade --target "$D3RLPY_DIR" d3rlpy==2.8.1 \
    structlog==26.1.0 dataclasses-json==0.6.7 'marshmallow==3.26.2' typing-inspect==0.9.0 \
    scikit-learn==1.9.1 joblib==1.6.0 threadpoolctl==3.8.0 narwhals==2.29.0
fi
