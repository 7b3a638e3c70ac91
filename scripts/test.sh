#!/usr/bin/env bash
# The test suite: sets up .venv, then runs pytest.  --fast skips the tests marked slow (-m "not slow": the
# training runs, wheels, servers and sweeps; pyproject.toml registers the marker); every other argument
# goes to pytest.  CI (.ci/run) runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# A crash, even at the interpreter's exit after pytest's summary (where pytest's own handler is off),
# prints every thread's Python stack.
export PYTHONFAULTHANDLER=1
# The browser test (tests/test_play_e2e.py) drives Debian's chromium; install it once.
if [ ! -x /usr/bin/chromium ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
  { $SUDO apt-get update -q && $SUDO apt-get install -y -q chromium; } >/dev/null \
    || echo "scripts/test.sh: could not install chromium; the browser test will be skipped" >&2
fi
args=()
for a in "$@"; do
  if [ "$a" = "--fast" ]; then args+=(-m "not slow"); else args+=("$a"); fi
done
exec .venv/bin/python -m pytest ${args[@]+"${args[@]}"}
