#!/usr/bin/env bash
# The GPU figures of docs/results.md ("The learner on a GPU: one H200") in one go, in under 10 minutes:
# one worker's rollout bench, the learner benches (standard: fp32, bf16, and minibatches of 16,384 in
# a batch of 65,536; cluster's 512x4) and a 5-minute `samloc train --config configs/standard.yaml` with the learner
# on the GPU.  Installs nothing: it needs a Python with requirements.txt and a CUDA build of torch
# (PYTHON=..., default .venv/bin/python, else python3).
#
#   scripts/gpu_check.sh OUT_DIR
#   DEVICE=cpu TRAIN_MINUTES=0.2 BENCH_UPDATES=1 BENCH_BATCH=2048 BIG_MINIBATCH=1024 \
#     scripts/gpu_check.sh OUT_DIR                                   # a CPU rehearsal at a small size
#   ONLY_STRONG=1 STRONG_MINUTES=8 scripts/gpu_check.sh OUT_DIR      # issue #45: `samloc train --config strong`
#   MODEL_ARGS="model.kind=combined" scripts/gpu_check.sh OUT_DIR    # issue #59: every bench and run on a network part
#
# The strong step (STRONG_MINUTES > 0; ONLY_STRONG=1 skips the benches and the standard run, so each part
# fits in one 10-minute call) runs the one-command recipe with its stages' shares scaled to the minutes,
# auto-sized workers and the learner on DEVICE, a periodic evaluation every STRONG_EVAL_MINUTES (200 deals
# against the heuristic), and writes strong_summary.json: decisions generated and trained per second, the
# workers chosen, each stage's start, every evaluation point, and the first minute whose 95% CI against the
# heuristic lies above zero (minutes_to_beat_heuristic).  Expert's rating needs a league afterwards
# (docs/training.md, "One command to strength").
#
# The large-minibatch bench's batch is at least its minibatch (BIG_MINIBATCH, 16,384), never capped by it.
# OUT_DIR gets at most 9 files: device.txt, bench_*.json (each the bench's JSON line, with the minibatch
# and batch it used), train_summary.json (the run's summary.json plus its mean update time and policy lag,
# and "benches": each learner figure with its minibatch), log.txt, and with the strong step
# strong_summary.json.  Exit 1 when a bench did not use the minibatch it was asked for.
set -euo pipefail
out=${1:?usage: scripts/gpu_check.sh OUT_DIR}
DEVICE=${DEVICE:-cuda}
TRAIN_MINUTES=${TRAIN_MINUTES:-5}
BENCH_UPDATES=${BENCH_UPDATES:-5}
BENCH_BATCH=${BENCH_BATCH:-}          # empty: each config's ppo.batch_decisions
BIG_MINIBATCH=${BIG_MINIBATCH:-16384} # the large minibatch a GPU takes (configs/cluster.yaml)
STRONG_MINUTES=${STRONG_MINUTES:-0}   # 0: no strong step
STRONG_EVAL_MINUTES=${STRONG_EVAL_MINUTES:-1}
ONLY_STRONG=${ONLY_STRONG:-0}
STRONG_ARGS=${STRONG_ARGS:-}          # more key=value for the strong run (a rehearsal's small sizes)
read -r -a model_args <<< "${MODEL_ARGS:-}"  # key=value for every bench and run: the network (model.kind=moves)
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

if [ "$ONLY_STRONG" != "1" ]; then
bench() {  # NAME ARGS...: one bench, its JSON line to OUT_DIR/bench_NAME.json
  local name=$1; shift
  step "bench $name: $*"
  samloc bench --json "$@" "${model_args[@]}" 2>&1 | tee -a "$log" | tail -n 1 > "$out/bench_$name.json"
}
batch=()
[ -n "$BENCH_BATCH" ] && batch=(--batch-decisions "$BENCH_BATCH")
bench rollout --rollout --config standard --rollouts 3   # compiles the engine's kernels on a first run
bench learner_standard --learner --config standard --device "$DEVICE" --precision fp32 --updates "$BENCH_UPDATES" \
  "${batch[@]}"
bench learner_standard_bf16 --learner --config standard --device "$DEVICE" --precision bf16 \
  --updates "$BENCH_UPDATES" "${batch[@]}"
big_batch=$((4 * BIG_MINIBATCH))   # room for four minibatches
[ -n "$BENCH_BATCH" ] && [ "$BENCH_BATCH" -ge "$BIG_MINIBATCH" ] && big_batch=$BENCH_BATCH
bench learner_standard_mb_big --learner --config standard --device "$DEVICE" --minibatch "$BIG_MINIBATCH" \
  --updates "$BENCH_UPDATES" --batch-decisions "$big_batch"
bench learner_cluster --learner --config cluster --device "$DEVICE" --updates "$BENCH_UPDATES" "${batch[@]}"

run=$(mktemp -d)/run
step "train: standard, learner.device=$DEVICE, $TRAIN_MINUTES minutes"
samloc train --config configs/standard.yaml --run-dir "$run" learner.device="$DEVICE" max_minutes="$TRAIN_MINUTES" \
  eval.every_updates=0 eval.final_deals=0 belief.deals=0 "checkpoint.export_to=''" display=plain "${model_args[@]}" \
  >> "$log" 2>&1
"$PYTHON" - "$run" "$out" "$BIG_MINIBATCH" <<'EOF'
import json, sys
from pathlib import Path
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
run, out, big = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
dest = out / "train_summary.json"
summary = json.load(open(f"{run}/summary.json"))
benches = {}
for f in sorted(out.glob("bench_learner_*.json")):
    b = json.loads(f.read_text())
    benches[f.stem[6:]] = {k: b.get(k) for k in ("minibatch", "decisions_per_update", "decisions_per_s")}
    print(f"{f.stem[6:]}: minibatch {b.get('minibatch')}, batch {b.get('decisions_per_update')},"
          f" {b.get('decisions_per_s')} decisions/s")
summary["benches"] = benches
acc = EventAccumulator(run, size_guidance={"scalars": 0})
acc.Reload()
for tag in ("losses/update_s", "losses/policy_lag", "losses/policy_lag_max", "charts/decisions_per_s"):
    vals = [e.value for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []
    summary[tag] = {"mean": sum(vals) / len(vals), "max": max(vals), "n": len(vals)} if vals else None
json.dump(summary, open(dest, "w"), indent=2)
if benches["learner_standard_mb_big"]["minibatch"] != big:
    sys.exit(f"gpu_check: learner_standard_mb_big used minibatch {benches['learner_standard_mb_big']['minibatch']},"
             f" not {big}")
EOF
fi

if [ "$STRONG_MINUTES" != "0" ]; then
  strong_run=$(mktemp -d)/strong
  step "train: strong, learner.device=$DEVICE, $STRONG_MINUTES minutes"
  samloc train --config strong --run-dir "$strong_run" learner.device="$DEVICE" max_minutes="$STRONG_MINUTES" \
    eval.every_minutes="$STRONG_EVAL_MINUTES" eval.deals=200 'eval.opponents=[heuristic]' eval.final_deals=0 \
    belief.deals=0 display=plain $STRONG_ARGS "${model_args[@]}" >> "$log" 2>&1
  "$PYTHON" - "$strong_run" "$out/strong_summary.json" <<'EOF'
import json, sys
import yaml
run, dest = sys.argv[1], sys.argv[2]
s = json.load(open(f"{run}/summary.json"))
cfg = yaml.safe_load(open(f"{run}/config.yaml"))
points = []
for line in open(f"{run}/eval.jsonl"):
    e = json.loads(line)
    h = e["results"]["heuristic"]
    points.append({"minute": round(e["wall_s"] / 60, 2), "stage": e.get("stage"), "updates": e["updates"],
                   "decisions_trained": e["decisions_trained"], "heuristic": h["mean_score"], "ci95": h["ci95"]})
beat = next((p["minute"] for p in points if p["ci95"][0] > 0), None)
wall = max(s["wall_s"], 1e-9)
doc = {"wall_s": s["wall_s"], "updates": s["updates"], "device": s["device"], "model": cfg["model"],
       "decisions_generated_per_s": round(s["decisions"] / wall),
       "decisions_trained_per_s": round(s["decisions_trained"] / wall),
       "workers": {"rollout": cfg["rollout"]["num_workers"], "eval": cfg["eval"]["num_workers"],
                   "search": (cfg.get("distill") or {}).get("num_workers")},
       "stages": s.get("stages"), "evaluations": points, "minutes_to_beat_heuristic": beat}
json.dump(doc, open(dest, "w"), indent=2)
print(f"strong: {doc['decisions_generated_per_s']:,} decisions generated/s, {doc['decisions_trained_per_s']:,}"
      f" trained/s, workers {doc['workers']}, beats the heuristic from minute {beat}")
EOF
fi
step "done: $(ls "$out" | tr '\n' ' ')"
