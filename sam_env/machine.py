"""What a figure was measured on: the code's commit, the CPU, and the machine's load around the measure.

The JSON line of ``samloc bench`` (the engine, ``--env``, ``--learner``, ``--rollout``) carries
:func:`measured`'s ``"machine"`` record, so that a figure can be compared with a later one (another
commit, a busier machine); runs and checkpoints record :func:`git_commit`.
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

#: The checkout this package runs from, when it runs from one (not when it is installed from a wheel).
REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                          timeout=10).stdout.strip()


def git_commit() -> str:
    """The checkout's commit (``-dirty`` when tracked files changed), else ``samloc <version>``, else
    unknown."""
    try:
        if Path(_git("rev-parse", "--show-toplevel") or "/nonexistent").resolve() == REPO:
            dirty = _git("status", "--porcelain", "--untracked-files=no")
            return _git("rev-parse", "HEAD") + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass  # no git here: the package version says what code ran
    try:
        return f"samloc {metadata.version('samloc-engine')}"  # the distribution (pyproject.toml's name)
    except metadata.PackageNotFoundError:
        return "unknown"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what :mod:`platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux
    return platform.processor() or platform.machine() or "unknown"


def _load_1min() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:  # no load average on this platform
        return None


def measured(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()``'s result with a ``"machine"`` record: the commit, the CPU model, the CPU count and the
    1-minute load average before and after the measure."""
    before = _load_1min()
    res = measure()
    return res | {"machine": {"commit": git_commit(), "cpu_model": cpu_model(), "cpus": os.cpu_count(),
                              "load_1min_before": before, "load_1min_after": _load_1min()}}
