#!/usr/bin/env bash
# The batched environment against OpenSpiel's C++ Dou Dizhu, both pinned to core 0, alternated
# (scripts/bench_vs_openspiel.py says how each is measured); prints each pair and the median ratio.
# The first run makes OpenSpiel's own venv at .venv-openspiel/ (git-ignored; `pip install open_spiel`).
#
#   scripts/bench_vs_openspiel.sh [--rounds 3] [--seconds 5] [--samloc PATH]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-openspiel
if ! "$venv/bin/python" -c "import pyspiel" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "open_spiel==2.0.2"
fi
exec "$venv/bin/python" scripts/bench_vs_openspiel.py "$@"
