#!/usr/bin/env bash
# One arm of the equal-time comparison of network parts (issue #59; docs/results.md, "Network parts"):
# the `strong` recipe with model.kind=KIND for its 120 minutes on this machine, the 1-minute load every 5 s
# beside it, then a league at minutes 30, 60 and 120 against checkpoints/expert and the heuristic on the
# 1,000 duplicate deals of seed 1 (the checkpoint nearest each minute by its training wall time).
#
#   scripts/equal_time_arm.sh KIND RUN_DIR OUT_DIR [key=value ...]     # e.g. moves runs/moves docs/to_strength/parts/moves
#   scripts/equal_time_arm.sh --leagues RUN_DIR OUT_DIR                # the leagues of a run already trained
#   scripts/equal_time_arm.sh --resume RUN_DIR OUT_DIR                 # a stopped arm, on to its 120 minutes
#
# The figures need a quiet machine: run nothing else heavy beside it, and read RUN_DIR.load.log after (beside
# the run folder, which holds only what the run writes).  OUT_DIR receives at_30/, at_60/ and at_120/.
set -euo pipefail
cd "$(dirname "$0")/.."
SAMLOC=${SAMLOC:-.venv/bin/samloc}
PY=${PYTHON:-.venv/bin/python}

leagues() {  # RUN_DIR OUT_DIR: a league at each minute mark the run reached
  local run=$1 out=$2 prev=""
  for minute in 30 60 120; do
    ckpt=$("$PY" - "$run" "$minute" <<'EOF'
import json, sys
from pathlib import Path
run, minute = Path(sys.argv[1]), float(sys.argv[2])
best = None
for meta in sorted(run.glob("checkpoints/ckpt_*/metadata.json")):
    wall = json.loads(meta.read_text()).get("wall_time_s", 0.0) / 60
    if wall <= minute + 1.0 and (best is None or wall > best[0]):  # the last one saved by the minute
        best = (wall, meta.parent)
print(best[1] if best and best[0] >= minute - 5.0 else "")
EOF
)
    if [ -z "$ckpt" ]; then
      echo "no checkpoint near minute $minute in $run: its leagues end here"
      break
    fi
    echo "minute $minute: $ckpt"
    "$SAMLOC" league "$ckpt" $prev checkpoints/expert heuristic --rules hoi_quan_bai --players 4 \
      --deals 1000 --seed 1 --out "$out/at_$minute" --json > /dev/null
    prev="$ckpt"
  done
}

train() {  # RUN_DIR ARGS...: samloc train with the load logged beside it
  local run=$1
  shift
  mkdir -p "$run"
  (while true; do echo "$(date +%s) $(cut -d' ' -f1 /proc/loadavg)"; sleep 5; done) >> "$run.load.log" &
  local logger=$!
  trap "kill $logger 2>/dev/null || true" EXIT  # expanded now: the local is gone when the trap runs
  "$SAMLOC" train "$@"
  kill $logger 2>/dev/null || true
  awk '{s += $2; n++; if ($2 > m) m = $2} END {printf "load: mean %.2f, max %.2f over %d minutes\n", s / n, m, n / 12}' \
    "$run.load.log"
}

case "${1:-}" in
  --leagues) leagues "$2" "$3" ;;
  --resume) train "$2" --resume "$2"; leagues "$2" "$3" ;;
  ""|-h|--help) sed -n 2,12p "$0" ;;
  *)
    kind=$1 run=$2 out=$3
    shift 3
    train "$run" --config strong eval.final_deals=0 "model.kind=$kind" "$@" --run-dir "$run"
    leagues "$run" "$out"
    ;;
esac
