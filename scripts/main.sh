#!/usr/bin/env bash
# The main job: sets up .venv, then trains the `quick` config end to end on this machine
# in ten minutes (a warm start cloning the heuristic, then PPO on an embedded Ray mostly against
# it; an evaluation a minute, the final one with its verdict, checkpoints) and prints where the
# TensorBoard logs (runs/quick__<seed>__<time>/) and the final checkpoint are, with the commands that show
# the logs and serve the bot.  Extra arguments are config overrides or options of `samloc train`, e.g.
# max_minutes=5 (under about 3 the warm start, ~2 minutes here, leaves nothing to train: refused) or --dry-run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
exec .venv/bin/samloc train --config configs/quick.yaml "$@"
