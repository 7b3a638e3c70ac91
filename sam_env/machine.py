"""What a figure was measured on: the code's commit, the CPU, and the machine's load around the measure;
and what this process may use of the machine (:func:`usable_cpus`, :func:`available_memory`).

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


#: where the cgroup file system is mounted (cgroup v2: ``cpu.max``; v1: ``cpu/cpu.cfs_quota_us``)
CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroup_cpu_quota() -> float | None:
    """The CPUs this process's cgroup may use per period (a container's ``--cpus``), None when it sets
    no quota: cgroup v2's ``cpu.max`` (of the process's own cgroup, else the root's), else v1's
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``."""
    for where in dict.fromkeys([CGROUP_ROOT / _own_cgroup(), CGROUP_ROOT]):
        try:
            quota, period = (where / "cpu.max").read_text().split()[:2]
        except (OSError, ValueError):
            continue
        return None if quota == "max" else _ratio(quota, period)
    for v1 in ("cpu", "cpu,cpuacct"):
        try:
            quota = (CGROUP_ROOT / v1 / "cpu.cfs_quota_us").read_text().strip()
            period = (CGROUP_ROOT / v1 / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            continue
        return None if quota.startswith("-") else _ratio(quota, period)
    return None


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (``taskset``, a cpuset), no more than its cgroup's
    CPU quota (rounded down, at least 1).  ``os.cpu_count()`` counts the machine's, which a process
    limited to fewer would overbook."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        n = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        n = min(n, max(1, int(quota + 1e-9)))
    return max(1, n)


def _own_cgroup() -> str:
    """This process's cgroup v2 path below :data:`CGROUP_ROOT` ('' for the root, or without v2)."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:].strip().lstrip("/")
    except OSError:
        pass  # not Linux
    return ""


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def available_memory() -> int | None:
    """The bytes this process could still have: the kernel's ``MemAvailable``, no more than what its
    cgroup's memory limit leaves (v2 ``memory.max`` − ``memory.current``, v1 ``memory.limit_in_bytes`` −
    ``memory.usage_in_bytes``); None where neither can be read."""
    have = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                have = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass  # not Linux
    for where, limit, used in [*((CGROUP_ROOT / d, "memory.max", "memory.current")
                                 for d in dict.fromkeys([_own_cgroup(), ""])),
                               (CGROUP_ROOT / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes")]:
        cap, now = _read_int(where / limit), _read_int(where / used)
        if cap is not None and now is not None and cap < 2**60:  # v1 says "no limit" with a huge number
            left = max(0, cap - now)
            have = left if have is None else min(have, left)
            break
    return have


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
