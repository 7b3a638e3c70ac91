#!/usr/bin/env bash
# Create .venv and install the pinned requirements and this project (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.samloc-installed
want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # PyTorch (README): requirements.txt pins torch==2.13.0, and which build pip takes is its index's.  With
  # SAMLOC_TORCH_INDEX (PyTorch's CPU wheel index, say) torch comes from there first, and the pinned install
  # then finds it satisfied; without it nothing but pip's own configured index is asked.
  if [ -n "${SAMLOC_TORCH_INDEX:-}" ]; then
    torch_pin=$(grep -E '^torch==' requirements.txt)
    .venv/bin/python -m pip install -q --no-deps "$torch_pin" --index-url "$SAMLOC_TORCH_INDEX"
  fi
  .venv/bin/python -m pip install -q -r requirements.txt
  # This project installs as samloc-engine (PyPI's samloc is another author's): drop an install by the old name.
  .venv/bin/python -m pip uninstall -q -y samloc 2>/dev/null || true
  rm -rf samloc.egg-info  # its metadata, which Python would still find from the checkout
  .venv/bin/python -m pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
