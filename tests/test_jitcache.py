"""Editing a constant never runs stale numba code (sam_env/jitcache.py).

Numba re-checks a cached kernel only against its own file.  These tests build
tiny packages in a temporary folder: a kernel in ``b.py`` compiles in a
constant of ``a.py``; after ``a.py`` changes, a fresh process must see the new
value (and, without the refresh, does not: the reason the module exists).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # recompiles the engine in fresh processes

REPO = Path(__file__).resolve().parent.parent

KERNEL = """from numba import njit
from {src}.a import K

@njit(cache=True)
def f():
    return K
"""


def _package(root: Path, name: str, refresh: str | None, src: str | None = None) -> None:
    pkg = root / name
    pkg.mkdir()
    head = "" if refresh is None else f"from sam_env import jitcache\njitcache.refresh(__name__{refresh})\n"
    (pkg / "__init__.py").write_text(head)
    if src is None:
        (pkg / "a.py").write_text("K = 1\n")
    (pkg / "b.py").write_text(KERNEL.format(src=src or name))


def _env(root: Path, cache_dir: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_DISABLE_JIT")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(REPO)])
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = str(cache_dir)
    return env


def _value(root: Path, name: str, cache_dir: Path | None = None) -> int:
    out = subprocess.run([sys.executable, "-c", f"from {name}.b import f; print(f())"],
                         env=_env(root, cache_dir),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


def test_a_changed_constant_reaches_kernels_in_other_files(tmp_path):
    _package(tmp_path, "plain", None)            # numba alone
    _package(tmp_path, "fresh", "")              # refreshed at import
    _package(tmp_path, "user", ", uses=('fresh',)", src="fresh")  # a package using another's constant
    for name in ("plain", "fresh", "user"):
        assert _value(tmp_path, name) == 1
    assert list((tmp_path / "fresh" / "__pycache__").glob("*.nbi"))  # cached
    for name in ("plain", "fresh"):
        (tmp_path / name / "a.py").write_text("K = 2\n")
    assert _value(tmp_path, "plain") == 1        # stale: the cached kernel of b.py still says 1
    assert _value(tmp_path, "fresh") == 2
    assert _value(tmp_path, "user") == 2         # its own files are unchanged; what it uses is not
    stamp = tmp_path / "fresh" / "__pycache__" / "numba-sources.sha256"
    assert len(stamp.read_text().strip()) == 64


def test_a_kernel_in_a_subpackage_sees_a_changed_constant(tmp_path):
    """A kernel of ``nested/sub/b.py`` (as agents/players' use sam_env's and each other's) compiles in a
    constant of ``nested/a.py``: the package's refresh covers its subpackages' caches."""
    _package(tmp_path, "nested", "")
    (tmp_path / "nested" / "b.py").unlink()
    (tmp_path / "nested" / "sub").mkdir()
    (tmp_path / "nested" / "sub" / "__init__.py").write_text("")
    (tmp_path / "nested" / "sub" / "b.py").write_text(KERNEL.format(src="nested"))
    assert _value(tmp_path, "nested.sub") == 1
    assert list((tmp_path / "nested" / "sub" / "__pycache__").glob("*.nbi"))  # cached beside sub/b.py
    (tmp_path / "nested" / "a.py").write_text("K = 4\n")
    assert _value(tmp_path, "nested.sub") == 4


def test_numba_cache_dir_is_kept_in_step_too(tmp_path):
    cache = tmp_path / "numba-cache"
    _package(tmp_path, "fresh", "")
    assert _value(tmp_path, "fresh", cache) == 1
    assert list(cache.rglob("*.nbi")) and not list((tmp_path / "fresh").glob("__pycache__/*.nbi"))
    (tmp_path / "fresh" / "a.py").write_text("K = 5\n")
    assert _value(tmp_path, "fresh", cache) == 5


def test_many_processes_starting_at_once_after_an_edit(tmp_path):
    _package(tmp_path, "fresh", "")
    assert _value(tmp_path, "fresh") == 1
    (tmp_path / "fresh" / "a.py").write_text("K = 3\n")
    code = "from fresh.b import f; print(f())"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=_env(tmp_path), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [e for _, e in outs]
    assert [int(o) for o, _ in outs] == [3] * 4
    assert _value(tmp_path, "fresh") == 3


def test_the_project_packages_refresh_themselves():
    """sam_env, agents and training each stamp their caches with their sources (and what they use)."""
    from sam_env import jitcache

    for name, uses in (("sam_env", ()), ("agents", ("sam_env",)), ("training", ("sam_env", "agents"))):
        __import__(name)
        folder = jitcache.package_dir(name)
        fp = jitcache.fingerprint([folder, *(jitcache.package_dir(u) for u in uses)])
        if os.access(folder, os.W_OK) and not os.environ.get("NUMBA_CACHE_DIR"):
            # agents/players' kernels use agents/players' and sam_env's
            for sub in jitcache.source_dirs(folder):
                assert (sub / "__pycache__" / jitcache.STAMP).read_text().strip() == fp, sub
    assert {"players",
            "evaluation", "nets"} <= {p.name for p in jitcache.source_dirs(jitcache.package_dir("agents"))}
    assert jitcache.refresh("sam_env") is False  # once per process
