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
                        f"pip install 'samloc-engine[{extra}]'\n")


def test_each_optional_module_is_in_the_extra_named_for_it() -> None:
    """EXTRA_OF against pyproject.toml's extras (a module renamed there must be renamed here)."""
    import tomllib
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in cli.EXTRA_OF.items():
        names = {re.split(r"[<>=\[]", req)[0].replace("-", "_").lower() for req in extras[extra]}
        assert module in names, (module, extra)
    err = ModuleNotFoundError("No module named 'safetensors'", name="safetensors")
    assert cli.missing_extra("export", err).endswith("pip install 'samloc-engine[train]'")
    assert cli.missing_extra("serve", err).endswith("pip install 'samloc-engine[serve]'")
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
                        lambda agent, table, deals, seed: got.append(deals)
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


# ---- issue 60, the newcomer --------------------------------------------------------------------------------
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").glob("*.py"))]


def test_the_distribution_has_a_name_of_its_own_and_every_install_line_uses_it() -> None:
    """PyPI's ``samloc`` is another author's package: this one installs as samloc-engine (its import
    packages and the samloc command keep their names)."""
    import tomllib

    from sam_env import machine
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == cli.DISTRIBUTION == "samloc-engine"
    assert project["scripts"] == {"samloc": "samloc.cli:main"}
    assert f"metadata.version('{cli.DISTRIBUTION}')" in (REPO / "sam_env" / "machine.py").read_text()
    assert machine.git_commit()  # still answers
    wrong = re.compile(r"pip install (?:-\S+ )*['\"]?samloc(?:\[|['\"`\s]|$)|'samloc\[", re.M)
    found = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in DOCS for m in wrong.finditer(p.read_text())]
    assert not found, found
    assert "pip install samloc-engine" in (REPO / "README.md").read_text()


def test_set_up_says_which_pytorch_it_fetches_and_asks_no_other_host() -> None:
    """requirements.txt pins torch; the README says which build that fetches where; set-up takes torch from
    SAMLOC_TORCH_INDEX first when it is given, and asks no index of its own otherwise."""
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "torch==2.13.0" in (REPO / "requirements.txt").read_text().splitlines()
    assert "://" not in setup  # no host of its own: pip's configured index, or the one the user names
    given = setup.index('--index-url "$SAMLOC_TORCH_INDEX"')
    assert setup.index('if [ -n "${SAMLOC_TORCH_INDEX:-}" ]') < given < setup.index("-r requirements.txt")
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "the CUDA build (several GB)" in readme and "SAMLOC_TORCH_INDEX=" in readme


def test_the_main_job_ends_with_the_commands_that_serve_its_bot_and_show_its_logs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from training.tools.pipeline import TrainResult
    ckpt = tmp_path / "runs" / "quick__0__t" / "checkpoints" / "ckpt_00000170"
    summary = {"stop_reason": "max_minutes", "updates": 170, "games": 1, "decisions_trained": 2,
               "checkpoint": str(ckpt)}
    res = TrainResult(ckpt.parent.parent, summary, {"curve": "c.png", "onnx": str(ckpt / "policy.onnx")})
    assert train_cmd._report(res) == 0
    lines = capsys.readouterr().out.splitlines()
    serve = [ln for ln in lines if "samloc serve --agent" in ln]
    assert len(serve) == 1 and f" serve --agent {ckpt} " in serve[0] + " "
    samloc = Path(sys.executable).parent / "samloc"
    shown_samloc = serve[0].split()[2]
    assert shown_samloc == "samloc" or Path(shown_samloc).resolve() == samloc.resolve(), serve[0]
    assert lines[-1].startswith("{")  # the JSON line stays the last
    tb = next(ln for ln in lines if ln.startswith("logs (TensorBoard)"))
    exe = Path(sys.executable).parent / "tensorboard"
    shown = tb.split("(")[-1].split(" --logdir")[0]
    assert shown == "tensorboard" or Path(shown).resolve() == exe.resolve(), tb  # no bare PATH lookup


def test_the_readme_says_once_what_plain_serve_serves_and_it_is_what_serve_routes() -> None:
    from agents.serving.bots import Bots
    text = " ".join((REPO / "README.md").read_text().split())
    said = re.findall(r"[^.]*\bPlain `samloc serve`[^.]*\.", text)
    assert len(said) == 1, said
    assert "`samloc serve` uses this by default" not in text and "`samloc serve` loads" not in text
    named = re.search(r"`checkpoints/(\w+)`", said[0]).group(1)
    routes = Bots.load(None).info()["routes"]
    assert routes and {r["bot"] for r in routes} == {named}


def test_fast_tests_skip_the_slow_marker_and_the_readme_gives_both_commands() -> None:
    import tomllib
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("slow:") for m in options["markers"])
    script = (REPO / "scripts" / "test.sh").read_text()
    assert 'args+=(-m "not slow")' in script and '"--fast"' in script
    readme = (REPO / "README.md").read_text()
    assert "./scripts/test.sh --fast" in readme and "go to pytest" in readme
    for path in re.findall(r"scripts/test\.sh --fast (tests/\S+\.py)", readme):
        assert (REPO / path).is_file(), path
    assert "--fast" not in (REPO / ".ci" / "run").read_text()  # CI keeps the whole suite


def test_the_engine_sweep_covers_every_preset_at_every_player_count() -> None:
    from sam_env.rules import PRESET_NAMES, RuleSet

    from conftest import CONFIGS
    swept = {(r, p) for r, p in CONFIGS if isinstance(r, str)}
    assert swept == {(n, p) for n in PRESET_NAMES for p in RuleSet.parse(n).player_counts}


@pytest.mark.slow  # the heuristic's games, compiled
def test_the_warm_start_shows_its_progress_as_the_ppo_phase_does(capsys: pytest.CaptureFixture[str]) -> None:
    from training.algorithms.warm_start import clone_heuristic
    from training.config_load import load_config
    from training.run.learner import Learner
    cfg = load_config("quick", ["model.hidden=16", "model.layers=1", "warm_start.envs=32",
                                "warm_start.minibatch=256", "warm_start.decisions=1500", "display=plain",
                                "log_every_s=1e-9"])
    lines: list[str] = []
    clone_heuristic(Learner(cfg.model, cfg.learner, 1e-4), cfg, lines.append)
    shown = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[quick] warm start: ")]
    assert len(shown) >= 2 and " of 1,500 heuristic decisions cloned (" in shown[-1] and "ETA" in shown[-1]
    assert "agreement" in shown[-1] and lines[-1].startswith("warm start: ")
    cfg.display = "none"
    clone_heuristic(Learner(cfg.model, cfg.learner, 1e-4), cfg, lines.append)
    assert "warm start" not in capsys.readouterr().out


@pytest.mark.parametrize("config", ["quick", "strong"])
def test_the_dry_run_names_the_warm_start_and_the_final_evaluation_with_their_times(
        config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert train_cmd.main(["--config", config, "--dry-run", "--run-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    warm = next(ln for ln in out.splitlines() if ln.strip().startswith("warm start:"))
    assert re.search(r"2,000,000 heuristic decisions .* about \d+\.\d minutes", warm), warm
    end = next(ln for ln in out.splitlines() if ln.strip().startswith("at the end:"))
    assert re.search(r"evaluation [\d,]+ deals vs heuristic, random \(about \d+ (s|minutes)\)", end), end


def test_a_budget_the_warm_start_would_spend_whole_is_refused_at_the_dry_run_and_the_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from training.config_load import load_config
    from training.errors import TrainError
    from training.tools.pipeline import run_pipeline
    assert train_cmd.main(["--config", "quick", "max_minutes=2", "--dry-run",
                           "--run-dir", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("samloc train: max_minutes=2 leaves nothing to train: the"
                                                   " warm start alone (warm_start.decisions=2,000,000)")
    assert "give max_minutes=3 or more" in err
    with pytest.raises(TrainError, match="leaves nothing to train"):
        run_pipeline(load_config("quick", ["max_minutes=2"]), tmp_path / "r", False, "c", print)
    assert not (tmp_path / "r").exists()
    assert train_cmd.main(["--config", "quick", "max_minutes=2", "warm_start.decisions=0", "--dry-run",
                           "--run-dir", str(tmp_path / "r")]) == 0


@pytest.mark.parametrize("argv, picture", [
    (["eval", "--deals", "1"], "scores.png"),
    (["league", "heuristic", "random", "--deals", "2"], "ratings.png")])
def test_a_report_without_matplotlib_says_which_extra_before_playing(argv: list[str], picture: str) -> None:
    code = ("import sys; sys.modules['matplotlib'] = None; from samloc.cli import main; "
            f"sys.exit(main({argv!r}))")
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (f"samloc {argv[0]}: needs matplotlib, which is not installed: pip install"
                        f" 'samloc-engine[train]' (the report's {picture})\n")


def test_the_eval_estimate_leaves_the_compilation_out(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from samloc.commands import eval as eval_cmd
    times = iter([60.0, 0.004])  # the first deal compiles; the second is what a deal costs
    monkeypatch.setattr(eval_cmd, "evaluate", lambda *a, **k: {"seconds": next(times), "games": 4})
    args = eval_cmd._parser().parse_args(["--deals", "1000"])
    plan = eval_cmd._Plan(None, [eval_cmd.Table.default()], [], Path("x"), None)
    eval_cmd._announce(args, plan)
    err = capsys.readouterr().err
    assert "4000 games; roughly 4 s" in err and "the first, compiling, 60 s" in err


@pytest.mark.parametrize("name", list(cli.SUBCOMMANDS))
def test_no_help_shows_sphinx_markup(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"``|:(mod|func|class|meth|data|attr):`", out), out


def test_seeds_help_says_each_thing_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert seeds.main(["--help"]) == 0
    out = capsys.readouterr().out
    sentences = [s.strip() for s in re.split(r"(?<=[.:])\s", " ".join(out.split())) if len(s.strip()) > 30]
    assert len(sentences) == len(set(sentences)), [s for s in sentences if sentences.count(s) > 1]


def test_train_help_lists_every_shipped_config_and_whole_section_docs(
        capsys: pytest.CaptureFixture[str]) -> None:
    from training.config import CONFIG_DIR
    assert train_cmd.main(["--help"]) == 0
    out = capsys.readouterr().out
    config_help = " ".join(out.split("\n  --config CONFIG")[1].split("--resume")[0].split())
    for name in sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")):
        assert re.search(rf"\b{name}\b", config_help), name
    keys = out.split("keys for key=value")[1]
    docs = re.split(r"^  \w+\.\*: ", keys, flags=re.M)[1:]
    assert len(docs) >= 8
    for doc in docs:  # the keys, then the section's doc as whole sentences
        assert " ".join(doc.split()).endswith((".", ")")), doc
    assert "may be (how an algorithm corrects for that age is its own setting" in " ".join(keys.split())


def test_print_config_writes_the_stages_as_block_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert train_cmd.main(["--config", "strong", "--print-config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    stages = next(i for i, ln in enumerate(lines) if ln.startswith("stages:"))
    assert lines[stages].split("#")[0].strip() == "stages:"
    assert lines[stages + 1].strip() == "- name: ppo" and max(len(ln.split("#")[0]) for ln in lines) < 120
    learner = next(ln for ln in lines if ln.startswith("learner:"))
    assert learner.endswith("ppo.correct_from_lag, ppo.is_clip).")  # the whole paragraph


def test_errors_say_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    from agents.serving import shipped
    from training.config import CONFIG_DIR
    assert train_cmd.main(["--config", "nosuch", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "config file 'nosuch' not found" in err
    assert all(p.stem in err for p in CONFIG_DIR.glob("*.yaml"))
    assert train_cmd.main(["--config", "quick", "lr=abc", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'lr'" in err and "samloc train --print-config" in err
    # a checkpoint path where a wheel install has none: a wheel holds no checkpoints, and where they are
    monkeypatch.setattr(shipped, "_CHECKOUT", tmp_path / "site-packages")
    monkeypatch.delenv(shipped.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["eval", "--agent", "checkpoints/standard", "--deals", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such checkpoint directory: checkpoints/standard" in err
    assert "a wheel holds no checkpoints" in err and "checkpoints/ folder of the samloc repository" in err
