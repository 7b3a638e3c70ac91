"""What a newcomer meets first: a missing extra named with the pip command that installs it, `samloc serve`
without checkpoints saying where they are, the spec in the repository and the README's links working in a
clone, help texts that match what the commands do, and a curve whose heuristic line can be read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from samloc import cli
from samloc.commands import bench, seeds
from samloc.commands import train as train_cmd

REPO = Path(__file__).resolve().parent.parent
SHARED_SPEC = REPO.parent / "shared" / "spec"


@pytest.mark.parametrize("command, module, extra",
                         [("serve", "fastapi", "serve"), ("train", "omegaconf", "train")])
def test_a_missing_extra_is_named_with_the_pip_command(command: str, module: str, extra: str) -> None:
    code = (f"import sys; sys.modules[{module!r}] = None; from samloc.cli import main; "
            f"sys.exit(main([{command!r}, '--help']))")
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2
    assert p.stderr == (f"samloc {command}: needs {module}, which is not installed: "
                        f"pip install 'samloc[{extra}]'\n")


def test_each_optional_module_is_in_the_extra_named_for_it() -> None:
    """EXTRA_OF against pyproject.toml's extras (a module renamed there must be renamed here)."""
    import tomllib
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in cli.EXTRA_OF.items():
        names = {re.split(r"[<>=\[]", req)[0].replace("-", "_").lower() for req in extras[extra]}
        assert module in names, (module, extra)
    err = ModuleNotFoundError("No module named 'safetensors'", name="safetensors")
    assert cli.missing_extra("export", err).endswith("pip install 'samloc[train]'")
    assert cli.missing_extra("serve", err).endswith("pip install 'samloc[serve]'")
    own = ModuleNotFoundError("No module named 'agents.nowhere'", name="agents.nowhere")
    assert cli.missing_extra("eval", own) == "samloc eval: not available (No module named 'agents.nowhere')"


def test_serve_without_checkpoints_says_where_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from agents.serving import shipped
    monkeypatch.setattr(shipped, "_CHECKOUT", tmp_path / "site-packages")  # as from a wheel
    monkeypatch.delenv(shipped.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["serve", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("samloc serve: no shipped checkpoints here (a wheel holds "
                                                   "none)")
    for words in ("checkpoints/ folder of the samloc repository", "clone it", "set SAMLOC_CHECKPOINTS",
                  "--agent (heuristic"):
        assert words in err, words
    assert cli.main(["serve", "--help"]) == 0
    assert "A wheel holds no checkpoints" in " ".join(capsys.readouterr().out.split())


def test_the_spec_is_in_the_repository_and_the_readme_links_work() -> None:
    for name in ("RULES.md", "PROTOCOL.md"):
        assert (REPO / "docs" / "spec" / name).stat().st_size > 1000
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (REPO / "README.md").read_text(encoding="utf-8"))
    local = [link for link in links if "://" not in link]
    assert "docs/spec/RULES.md" in local and "docs/spec/PROTOCOL.md" in local
    missing = [link for link in local
               if not (REPO / link).resolve().is_relative_to(REPO) or not (REPO / link).exists()]
    assert not missing, missing


@pytest.mark.skipif(not SHARED_SPEC.is_dir(), reason="no shared spec beside this checkout")
@pytest.mark.parametrize("name", ["RULES.md", "PROTOCOL.md"])
def test_the_spec_copy_is_the_shared_spec(name: str) -> None:
    assert (REPO / "docs" / "spec" / name).read_bytes() == (SHARED_SPEC / name).read_bytes()


def test_bench_help_names_every_other_bench(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--help"]) == 0
    out = capsys.readouterr().out
    for option in bench.BENCH_BY_OPTION:
        assert re.search(rf"^  {re.escape(option)}\b", out, re.M) or f"| {option}" in out, option


def test_bench_agent_counts_deals_under_either_name(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from samloc.commands import bench_agent
    got = []
    monkeypatch.setattr(bench_agent, "bench_agent",
                        lambda agent, rules, players, deals, seed: got.append(deals)
                        or {"deals": deals})
    assert bench.main(["--agent", "random", "--deals", "7"]) == 0
    assert bench.main(["--agent", "random", "--games", "9"]) == 0
    assert got == [7, 9]
    assert bench.main(["--agent", "random", "--help"]) == 0
    assert "duplicate deals played, each once per seat" in capsys.readouterr().out


def test_seeds_help_names_the_folders_train_seeds_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert seeds.main(["--help"]) == 0
    text = capsys.readouterr().out
    run_dir = re.search(r"samloc train .*--seeds 0,1,2 --run-dir (\S+)", text).group(1)
    named = re.search(r"^ +samloc seeds (\S+) (\S+) (\S+)", text, re.M).groups()
    monkeypatch.chdir(tmp_path)
    wrote = []
    monkeypatch.setattr(train_cmd, "_train",
                        lambda args, launch, command, where: wrote.append(where) or (1, None))
    assert train_cmd.main(["--config", "quick", "--seeds", "0,1,2", "--run-dir", run_dir,
                           "display=none"]) == 1
    assert wrote == list(named)


def test_the_curve_gives_each_opponent_its_own_axis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Against random +15, against the heuristic about 0: the heuristic's panel spans its own values, not
    0..15."""
    import matplotlib.pyplot as plt

    from training.tools.curve import plot_curve
    figures = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: figures.append(fig) or real_close(fig))
    r = lambda m: {"mean_score": m, "ci95": [m - 0.3, m + 0.3]}  # noqa: E731
    history = [{"decisions_trained": d,
                "results": {"random": r(15 + d / 1e6), "heuristic": r(-0.5 + d / 4e6)}}
               for d in (1_000_000, 2_000_000, 3_000_000)]
    final = {"decisions_trained": 3_000_000, "deals": 1000,
             "results": {"random": r(15.5), "heuristic": r(0.3)}}
    path = plot_curve(history, final, tmp_path / "curve.png", "t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (fig,) = figures
    rand, heur = fig.axes
    assert "random" in rand.get_ylabel() and "heuristic" in heur.get_ylabel()
    low, high = heur.get_ylim()
    assert low <= -0.55 and high >= 0.6 and high - low < 1.5  # its own band (-0.55 .. +0.6), not up to +15
    assert rand.get_ylim()[1] > 15.8
