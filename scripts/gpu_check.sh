#!/usr/bin/env bash
# The GPU figures of docs/training.md ("Sizing a cluster run") in one go, in under 10 minutes:
# one worker's rollout bench, the learner benches (standard: fp32, bf16, and minibatches of 16,384 in
# a batch of 65,536; cluster's 512x4) and a 5-minute `samloc train --config configs/standard.yaml` with the learner
# on the GPU.  Installs nothing: it needs a Python with requirements.txt and a CUDA build of torch
# (PYTHON=..., default .venv/bin/python, else python3).
#
#   scripts/gpu_check.sh OUT_DIR
#   DEVICE=cpu TRAIN_MINUTES=0.5 BENCH_UPDATES=1 BENCH_BATCH=4096 scripts/gpu_check.sh OUT_DIR   # dry run, no GPU
#
# OUT_DIR gets at most 8 files: device.txt, bench_*.json (each the bench's JSON line),
# train_summary.json (the run's summary.json plus its mean update time and policy lag), log.txt.
set -euo pipefail
out=${1:?usage: scripts/gpu_check.sh OUT_DIR}
DEVICE=${DEVICE:-cuda}
TRAIN_MINUTES=${TRAIN_MINUTES:-5}
BENCH_UPDATES=${BENCH_UPDATES:-5}
BENCH_BATCH=${BENCH_BATCH:-}          # empty: each config's ppo.batch_decisions
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  [ -x .venv/bin/python ] && PYTHON=.venv/bin/python
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONUNBUFFERED=1
log="$out/log.txt"
: > "$log"
samloc() { "$PYTHON" -m samloc "$@"; }
step() { echo "== $(date +%T) $*" | tee -a "$log"; }

step "device"
{ nvidia-smi || true
  "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
  echo "cpus $(getconf _NPROCESSORS_ONLN)"; } > "$out/device.txt" 2>&1

bench() {  # NAME ARGS...: one bench, its JSON line to OUT_DIR/bench_NAME.json
  local name=$1; shift
  step "bench $name: $*"
  samloc bench --json "$@" 2>&1 | tee -a "$log" | tail -n 1 > "$out/bench_$name.json"
}
batch=()
[ -n "$BENCH_BATCH" ] && batch=(--batch-decisions "$BENCH_BATCH")
bench rollout --rollout --config standard --rollouts 3   # compiles the engine's kernels on a first run
bench learner_standard --learner --config standard --device "$DEVICE" --updates "$BENCH_UPDATES" "${batch[@]}"
bench learner_standard_bf16 --learner --config standard --device "$DEVICE" --precision bf16 \
  --updates "$BENCH_UPDATES" "${batch[@]}"
big=(--batch-decisions 65536)   # room for four minibatches of 16,384
[ -n "$BENCH_BATCH" ] && big=("${batch[@]}")
bench learner_standard_mb16384 --learner --config standard --device "$DEVICE" --minibatch 16384 \
  --updates "$BENCH_UPDATES" "${big[@]}"
bench learner_cluster --learner --config cluster --device "$DEVICE" --updates "$BENCH_UPDATES" "${batch[@]}"

run=$(mktemp -d)/run
step "train: standard, learner.device=$DEVICE, $TRAIN_MINUTES minutes"
samloc train --config configs/standard.yaml --run-dir "$run" learner.device="$DEVICE" max_minutes="$TRAIN_MINUTES" \
  eval.every_updates=0 eval.final_deals=0 belief.deals=0 "checkpoint.export_to=''" display=plain >> "$log" 2>&1
"$PYTHON" - "$run" "$out/train_summary.json" <<'EOF'
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
run, dest = sys.argv[1:]
summary = json.load(open(f"{run}/summary.json"))
acc = EventAccumulator(run, size_guidance={"scalars": 0})
acc.Reload()
for tag in ("losses/update_s", "losses/policy_lag", "losses/policy_lag_max", "charts/decisions_per_s"):
    vals = [e.value for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []
    summary[tag] = {"mean": sum(vals) / len(vals), "max": max(vals), "n": len(vals)} if vals else None
json.dump(summary, open(dest, "w"), indent=2)
EOF
step "done: $(ls "$out" | tr '\n' ' ')"
