#!/usr/bin/env bash
# The test suite: sets up .venv, then runs pytest (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec .venv/bin/python -m pytest "$@"
