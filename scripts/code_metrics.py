"""Size figures of the library code: module lines, long functions, imports inside functions, parsers.

    python scripts/code_metrics.py [--root DIR] [--json]

What the architecture page (docs/architecture.md) promises and ``tests/test_layers.py``
checks: no library module over 600 lines (``sam_env/core.py``'s kernels excepted), no
function over 80 lines, an import inside a function only for an optional dependency or with a comment saying
why, and argparse only in the command layer (``samloc/``).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

LIBRARY = ("sam_env", "agents", "training", "samloc")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
#: Modules allowed past MAX_MODULE_LINES, and why.
LONG_MODULES = {"sam_env/core.py": "the compiled kernels share numba-typed constants and inline each other"}
#: What an import inside a function may load: optional dependencies, loaded only on the path that needs them.
OPTIONAL = {"torch", "ray", "onnxruntime", "onnx", "stable_baselines3", "sb3_contrib", "pettingzoo",
            "gymnasium", "matplotlib", "fastapi", "uvicorn", "h11", "httpx", "tensorboard", "safetensors",
            "playwright", "numba", "omegaconf", "scipy", "rich"}


def modules(root: Path) -> list[Path]:
    return sorted(p for pkg in LIBRARY if (root / pkg).is_dir() for p in (root / pkg).rglob("*.py"))


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _inner_imports(fn: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Imports in ``fn``'s own body (not in functions nested in it: they are counted as themselves)."""
    out, todo = [], list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _top(node: ast.Import | ast.ImportFrom, pkg: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name.split(".")[0] for a in node.names]
    return [pkg if node.level else (node.module or "").split(".")[0]]


def measure(root: Path) -> dict:
    mods, long_fns, inner, parsers = {}, [], [], []
    for path in modules(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text, rel)
        mods[rel] = len(text.splitlines())
        for fn in _functions(tree):
            length = fn.end_lineno - fn.lineno + 1
            if length > MAX_FUNCTION_LINES:
                long_fns.append({"where": f"{rel}:{fn.name}", "lines": length})
            for imp in _inner_imports(fn):
                said = lines[imp.lineno - 1] + (lines[imp.lineno - 2] if imp.lineno > 1 else "")
                inner.append({"where": f"{rel}:{fn.name}", "imports": _top(imp, rel.split("/")[0]),
                              "commented": "#" in said})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "ArgumentParser") or (
                    isinstance(node, ast.ClassDef)
                    and any(isinstance(b, ast.Attribute) and b.attr == "ArgumentParser" for b in node.bases)):
                parsers.append(rel)
    over = {m: n for m, n in mods.items() if n > MAX_MODULE_LINES}
    return {
        "modules": len(mods), "lines": sum(mods.values()),
        "largest": sorted(mods.items(), key=lambda kv: -kv[1])[:8],
        "modules_over_limit": over,
        "functions": sum(len(_functions(ast.parse(p.read_text(encoding="utf-8")))) for p in modules(root)),
        "functions_over_limit": sorted(long_fns, key=lambda f: -f["lines"]),
        "function_level_imports": len(inner),
        "function_level_imports_not_optional": [
            i for i in inner if not set(i["imports"]) <= OPTIONAL],
        # an import of this project's own inside a function says why (a cost or a cycle) in a comment
        "function_level_imports_unexplained": [
            i for i in inner if not set(i["imports"]) <= OPTIONAL and not i["commented"]],
        "parsers_outside_commands": sorted(p for p in parsers if not p.startswith("samloc/")),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    m = measure(args.root)
    if args.json:
        print(json.dumps(m, indent=1))
        return 0
    print(f"{m['modules']} modules, {m['lines']} lines, {m['functions']} functions")
    print(f"modules over {MAX_MODULE_LINES} lines: {len(m['modules_over_limit'])} {m['modules_over_limit']}")
    print(f"functions over {MAX_FUNCTION_LINES} lines: {len(m['functions_over_limit'])}")
    for f in m["functions_over_limit"]:
        print(f"  {f['lines']:4d} {f['where']}")
    print(f"imports inside functions: {m['function_level_imports']}, "
          f"of them not an optional dependency: {len(m['function_level_imports_not_optional'])}"
          f" ({len(m['function_level_imports_unexplained'])} without a comment saying why)")
    print(f"argparse parsers outside samloc/: {len(m['parsers_outside_commands'])}"
          f" {m['parsers_outside_commands']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
