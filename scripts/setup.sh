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
  # PyTorch's CPU build (README): requirements.txt's torch==2.13.0 from PyTorch's CPU index first, which the
  # pinned install then finds satisfied (PyPI's Linux wheel is the CUDA build, GBs).  SAMLOC_TORCH_INDEX
  # names another (https://download.pytorch.org/whl/cu128 for a GPU).
  torch_pin=$(grep -E '^torch==' requirements.txt)
  .venv/bin/python -m pip install -q --no-deps "$torch_pin" \
      --index-url "${SAMLOC_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" \
    || echo "scripts/setup.sh: PyTorch's CPU index not reached: $torch_pin from PyPI (on Linux the CUDA build)" >&2
  .venv/bin/python -m pip install -q -r requirements.txt
  # This project installs as samloc-engine (PyPI's samloc is another author's): drop an install by the old name.
  .venv/bin/python -m pip uninstall -q -y samloc 2>/dev/null || true
  rm -rf samloc.egg-info  # its metadata, which Python would still find from the checkout
  .venv/bin/python -m pip install -q --no-deps -e .
  echo "$want" > "$stamp"
fi
