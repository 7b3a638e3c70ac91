"""The layers run one way: samloc (the command) → training → agents → sam_env.

Read from the source (every ``import``, also those inside functions), so an
upward import hidden in a function body is caught as surely as one at the top.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("sam_env", "agents", "training", "samloc")  # each may import only those before it
#: Third-party packages a layer must not import, and the modules exempt from that.
FORBIDDEN = {
    "sam_env": ({"torch", "ray", "onnxruntime", "fastapi", "gymnasium", "pettingzoo",
                 "stable_baselines3", "sb3_contrib"},
                {"sam_env/gym_env.py": {"gymnasium"},
                 "sam_env/pettingzoo_env.py": {"gymnasium", "pettingzoo"},
                 "sam_env/envs.py": {"gymnasium"},
                 "sam_env/integrations/sb3.py": {"stable_baselines3"},
                 "sam_env/integrations/rllib.py": {"ray", "gymnasium", "torch"},
                 "sam_env/bench.py": {"gymnasium"}}),  # `samloc bench --env --num-envs 1` times one SamLoc-v0
    "agents": ({"ray", "gymnasium", "pettingzoo"}, {}),
}


def _imports(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports (relative imports resolved to its package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    pkg = path.relative_to(ROOT).parts[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            out.add(pkg if node.level else (node.module or "").split(".")[0])
    return out


def _modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_one_way(path: Path) -> None:
    rel = path.relative_to(ROOT).as_posix()
    layer = rel.split("/")[0]
    above = set(LAYERS[LAYERS.index(layer) + 1:])
    found = _imports(path)
    bad = found & above
    assert not bad, f"{rel} imports {sorted(bad)}, a layer above {layer}"
    banned, exempt = FORBIDDEN.get(layer, (set(), {}))
    bad = (found & banned) - exempt.get(rel, set())
    assert not bad, f"{rel} imports {sorted(bad)}, which {layer} must not depend on"


def test_named_opponents_come_through_the_entry_point_not_an_import() -> None:
    """The engine builds "heuristic" with the factory the agents layer declares (pyproject.toml),
    and that lookup is the only thing a named opponent loads."""
    from importlib.metadata import entry_points

    from agents import make_agent
    from sam_env.named_agents import GROUP, NAME, named_agent

    (factory,) = entry_points(group=GROUP, name=NAME)
    assert factory.load() is make_agent
    assert type(named_agent("heuristic")).__name__ == "HeuristicAgent"


def test_named_opponents_without_a_provider_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import sam_env.named_agents as named

    monkeypatch.setattr(named, "entry_points", lambda **_: ())
    with pytest.raises(ValueError, match=r"opponent 'heuristic': no installed package provides named agents"
                                         r" \(entry point samloc.agents:make_agent\)"):
        named.named_agent("heuristic")


def test_a_forbidden_import_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself: a function-level upward import in an engine module is found."""
    fake = tmp_path / "sam_env"
    fake.mkdir()
    (fake / "x.py").write_text("def f():\n    from training.trainer import Trainer\n    from . import core\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _imports(fake / "x.py") == {"training", "sam_env"}


def test_importing_the_engine_loads_no_upper_layer() -> None:
    """Every engine module but the environments imports without agents, training, torch or gymnasium."""
    names = [p.stem for p in sorted((ROOT / "sam_env").glob("*.py"))
             if p.name not in ("envs.py", "gym_env.py", "pettingzoo_env.py", "__init__.py")]
    code = (f"import sys; import {', '.join('sam_env.' + n for n in names)};"
            "bad = [m for m in ('agents', 'training', 'torch', 'gymnasium', 'pettingzoo') if m in "
            "sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_serving_and_replay_load_no_torch() -> None:
    """The ONNX server and the engine's command-line tools start without PyTorch, Ray or gymnasium."""
    code = ("import sys, sam_env.game, sam_env.obs, sam_env.vector, sam_env.record, samloc.commands.replay,"
            " agents.serving.app,"
            " agents.players.onnx_agent, agents.nets.format;"
            "bad = [m for m in ('torch', 'ray', 'gymnasium', 'pettingzoo') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ---- sizes and where things live (docs/architecture.md) ---------------------------------------------------
def _metrics() -> tuple:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import code_metrics
    finally:
        sys.path.pop(0)
    return code_metrics, code_metrics.measure(ROOT)


def test_no_library_module_or_function_is_too_long() -> None:
    cm, m = _metrics()
    over = {k: v for k, v in m["modules_over_limit"].items() if k not in cm.LONG_MODULES}
    assert not over, f"modules over {cm.MAX_MODULE_LINES} lines: {over}"
    assert not m["functions_over_limit"], (
        f"functions over {cm.MAX_FUNCTION_LINES} lines: {m['functions_over_limit']}")


def test_argparse_lives_only_in_the_command_layer() -> None:
    _, m = _metrics()
    assert m["parsers_outside_commands"] == []


def test_imports_inside_functions_are_optional_dependencies_or_say_why() -> None:
    _, m = _metrics()
    assert m["function_level_imports_unexplained"] == []


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (a type only: no import when it runs)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _internal_imports(path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` imports when it runs, at the top or inside a function
    (a deferred import counts; one under ``if TYPE_CHECKING:`` does not), with the packages each import
    runs on the way (``training.algorithms`` for ``training.algorithms.ppo``) unless they hold ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    me = _module_of(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    skip, found = _type_checking_blocks(tree), set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # `from . import compact`: a module
    out = set()
    for name in found:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            mod = ".".join(parts[:i])
            if mod in known and mod != me and not (me + ".").startswith(mod + "."):
                out.add(mod)
    return out


def _a_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (module -> modules it imports) as a path, or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_training_has_no_import_cycle() -> None:
    """No module of ``training`` imports, even from a function body, one that imports it back."""
    paths = sorted((ROOT / "training").rglob("*.py"))
    known = {_module_of(p) for p in paths}
    graph = {_module_of(p): _internal_imports(p, known) for p in paths}
    assert "training.config_load" in graph["training.launch"]  # the reader sees relative imports
    assert not (cycle := _a_cycle(graph)), "import cycle: " + " -> ".join(cycle)


def _imports_of_package(package: str, target: str) -> dict[str, list[str]]:
    """Module of ``package`` -> the modules of ``target`` it imports, even for a type only (under
    ``if TYPE_CHECKING:``) or from a function body."""
    paths = sorted((ROOT / "training").rglob("*.py"))
    known = {_module_of(p) for p in paths}
    out: dict[str, list[str]] = {}
    for p in paths:
        me = _module_of(p)
        if not (me + ".").startswith(package + "."):
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"), str(p))
        pkg = me if p.name == "__init__.py" else me.rpartition(".")[0]
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names |= {base} | {f"{base}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        hits = sorted(n for n in names if (n + ".").startswith(target + ".") and any(
            k == n or k.startswith(n + ".") or n.startswith(k + ".") for k in known))
        if hits:
            out[me] = hits
    return out


def test_the_run_loop_imports_no_algorithm() -> None:
    """``training/run`` owns the contract (``training/run/algorithm.py``) and runs whatever class it is
    handed: no module of it imports ``training/algorithms``, not even for a type (launch resolves the
    classes)."""
    assert _imports_of_package("training.run", "training.algorithms") == {}
    assert "training.launch" in _imports_of_package("training", "training.algorithms")  # it resolves them


def test_the_import_finder_sees_an_import_for_a_type_only(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``from ..algorithms.ppo import PPO`` under ``TYPE_CHECKING`` in ``training/run`` is found."""
    fake = tmp_path / "training" / "run"
    fake.mkdir(parents=True)
    (tmp_path / "training" / "__init__.py").write_text("")
    (tmp_path / "training" / "algorithms.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "x.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    from ..algorithms import PPO\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert list(_imports_of_package("training.run", "training.algorithms")) == ["training.run.x"]


def test_the_cycle_finder_finds_a_deferred_one() -> None:
    """A cycle closed only by an import inside a function is found; one closed under TYPE_CHECKING is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert _a_cycle(graph) == ["a", "b", "c", "a"] and _a_cycle({"a": {"b"}, "b": set()}) == []
    tree = ast.parse("import typing\nif typing.TYPE_CHECKING:\n    from .loop import RunLoop\n"
                     "def f():\n    from .rollout import x\n")
    skip = _type_checking_blocks(tree)
    kept = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in skip]
    assert kept == ["from .rollout import x"]
