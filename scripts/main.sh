#!/usr/bin/env bash
# The main job: sets up .venv, then runs the embedded local default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec .venv/bin/samloc demo "$@"
