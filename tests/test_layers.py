"""Layers run one way: training → agents → sam_env.  The engine never imports torch,
imports gymnasium only in its env modules, and reaches up to agents only in sam_env/upward.py."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SAM_ENV = Path(__file__).resolve().parent.parent / "sam_env"
ENV_MODULES = {"envs.py", "gym_env.py", "pettingzoo_env.py"}
LAZY_ENV_USERS = {"bench.py"}  # benchmarks SamLoc-v0, importing it at call time


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(top-level package, at module level) of every import statement in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.module.split(".")[0], id(node) in top))
    return out


def test_sam_env_sources_import_nothing_above_them():
    for path in sorted(SAM_ENV.glob("*.py")):
        for pkg, module_level in _imports(path):
            assert pkg != "torch", f"{path.name} imports torch"
            if pkg in ("agents", "training"):
                assert path.name == "upward.py" and not module_level, f"{path.name} imports {pkg}"
            if pkg in ("gymnasium", "pettingzoo"):
                assert path.name in ENV_MODULES or (path.name in LAZY_ENV_USERS and not module_level), \
                    f"{path.name} imports {pkg}"


def test_importing_the_engine_loads_no_upper_layer():
    names = [p.stem for p in sorted(SAM_ENV.glob("*.py"))
             if p.name not in ENV_MODULES and p.stem != "__init__"]
    code = (f"import sys; import {', '.join('sam_env.' + n for n in names)};"
            "bad = [m for m in ('agents', 'training', 'torch', 'gymnasium', 'pettingzoo') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=SAM_ENV.parent)
