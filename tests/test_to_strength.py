"""`samloc bench --to-strength`: a tiny benchmark end to end (two seeds trained by the real trainer on Ray,
their unpruned snapshots scored afterwards on the same deals, the report and the plot), and its one-line
usage errors, which start nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.nets.format import list_checkpoints, read_metadata
from samloc.commands import bench
from training.tools import to_strength
from training.config import ConfigError
from training.config_load import load_config

REPO = Path(__file__).resolve().parent.parent
# One worker of half a CPU, a net of 16, updates of about 60 decisions, no periodic evaluation.
TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "rollout.num_workers=1",
        "rollout.cpus_per_worker=0.5", "model.hidden=16", "model.layers=1",
        "rollout.envs_per_worker=8", "rollout.steps_per_rollout=8", "ppo.batch_decisions=60",
        "ppo.minibatch=32", "ppo.epochs=1", "learner.device=cpu", "eval.every_updates=0", "display=none"]


@pytest.mark.slow
def test_a_tiny_benchmark_writes_its_report_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    cmd = [sys.executable, "-m", "samloc", "bench", "--to-strength", "--config", "quick", "--minutes", "0.5",
           "--every-minutes", "0.1", "--seeds", "2", "--deals", "20", "--allow-few-deals", "--workers", "1",
           "--out", str(out), *TINY]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-2].startswith("verdict: NOT every seed beats the heuristic at its last point (CI low > 0): "
                                "seed 0 ")
    doc = json.loads((out / "to_strength.json").read_text())
    assert doc["overrides"] == TINY and doc["config"] == "quick" and doc["deals"] == 20
    assert doc["command"].startswith("samloc bench --to-strength --config quick --minutes 0.5")
    assert doc["machine"]["cpus"] == os.cpu_count() and len(doc["machine"]["load_before"]) == 3
    assert isinstance(doc["machine"]["quiet"], bool)
    rates = doc["machine"]["learner_rows_per_s"]  # the host's speed, measured before training
    assert set(rates) == {"fp32", "bf16"} and all(isinstance(v, int) and v > 0 for v in rates.values())
    assert lines[-2].endswith(f"learner {rates['fp32']:,} rows/s fp32, {rates['bf16']:,} bf16)")
    assert doc["resolved_config"]["checkpoint"]["keep"] == 0
    assert [r["seed"] for r in doc["seeds"]] == [0, 1]
    for run in doc["seeds"]:
        pts = run["points"]
        assert run["stop_reason"] == "max_minutes reached"
        minutes = [p["minutes"] for p in pts]
        assert minutes == sorted(minutes) and len(pts) >= 2
        assert (minutes[0], pts[0]["games"], pts[0]["updates"]) == (0.0, 0, 0)  # the starting weights
        assert minutes[-1] >= 0.5 - 0.002  # the budget, Ray's start included, was trained in full
        assert [p["games"] for p in pts] == sorted(p["games"] for p in pts)
        assert {(p["eval_seed"], p["deals"]) for p in pts} == {(12345, 20)}  # the same deals for all
        for p in pts:
            assert p["ci_low"] <= p["la"] <= p["ci_high"] and 0 <= p["win_rate"] <= 1
        # none pruned: every checkpoint is a point, at the wall time its metadata says
        assert [str(c) for c in list_checkpoints(run["run_dir"])] == sorted({p["checkpoint"] for p in pts})
        assert [round(read_metadata(p["checkpoint"]).wall_time_s / 60, 3) for p in pts[1:]] == minutes[1:]
        load = run["load"]
        assert len(load["before"]) == 3 and len(load["after"]) == 3 and load["during"]["max"] >= 0
        assert "every_minutes: 0.1" in (Path(run["run_dir"]) / "config.yaml").read_text()
    assert (out / "to_strength.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # --score: the same runs scored again, as runs trained before, give the same figures on the same deals
    again = tmp_path / "again"
    runs = [r["run_dir"] for r in doc["seeds"]]
    proc = subprocess.run([sys.executable, "-m", "samloc", "bench", "--to-strength", "--score", *runs,
                           "--deals", "20", "--allow-few-deals", "--workers", "2", "--out", str(again)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    scored = json.loads((again / "to_strength.json").read_text())
    assert scored["config"] == "(runs trained before)" and scored["machine"]["quiet"] is None
    assert scored["machine"]["learner_rows_per_s"] is None  # this machine now is not the one they trained on
    assert [r["label"] for r in scored["seeds"]] == ["quick ppo seed 0", "quick ppo seed 1"]
    assert {r["group"] for r in scored["seeds"]} == {"quick ppo"}
    figures = ("minutes", "games", "checkpoint", "la", "ci_low", "ci_high", "win_rate", "deals", "eval_seed")
    assert [[{k: p[k] for k in figures} for p in r["points"]] for r in scored["seeds"]] == \
        [[{k: p[k] for k in figures} for p in r["points"]] for r in doc["seeds"]]
    assert proc.stdout.strip().splitlines()[-2].startswith(
        "verdict: NOT every run beats the heuristic at its last point (CI low > 0): quick ppo seed 0 ")
    assert (again / "to_strength.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_score_refuses_training_options_and_folders_that_are_not_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "b")
    assert bench.main(["--to-strength", "--score", str(tmp_path), "--minutes", "3", "--out", out]) == 2
    assert capsys.readouterr().err == ("samloc bench: --score scores runs trained before: "
                                       "--minutes is for training\n")
    assert bench.main(["--to-strength", "--score", str(tmp_path), "algorithm=dmc", "--out", out]) == 2
    assert capsys.readouterr().err == ("samloc bench: --score scores runs trained before: "
                                       "algorithm=dmc is for training\n")
    assert bench.main(["--to-strength", "--score", str(tmp_path), "--out", out]) == 2
    assert capsys.readouterr().err == f"samloc bench: {tmp_path} is not a run folder (no config.yaml)\n"
    (tmp_path / "config.yaml").write_text("name: x\n")
    assert bench.main(["--to-strength", "--score", str(tmp_path), "--out", out]) == 2
    assert capsys.readouterr().err == f"samloc bench: {tmp_path}: no checkpoints in this run folder\n"
    assert bench.main(["--to-strength", "--score", "--out", out]) == 2
    assert capsys.readouterr().err == "samloc bench: --score needs the run folders to score (RUN ...)\n"
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("argv, message", [
    (["--deals", "20"], "--deals 20 is under 500 (add --allow-few-deals to mean it)"),
    (["seed=3"], "seed= is the benchmark's own: give --seeds"),
    (["max_minutes=3"], "max_minutes= is the benchmark's own: give --minutes"),
    (["--minutes", "1", "--every-minutes", "2"], "--every-minutes 2 is more than --minutes 1"),
    (["--minutes", "0"], "argument --minutes: must be a positive number of minutes, not '0'"),
    (["--seeds", "0"], "argument --seeds: must be 1 or more, not 0"),
    (["--config", "nosuch"], None),
    (["ppo.nosuch=1"], None),
])
def test_bad_arguments_are_one_line_and_start_nothing(argv: list[str], message: str | None, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(*a: object, **kw: object) -> None:
        raise AssertionError("a bad command line must not train")

    monkeypatch.setattr(to_strength, "run_pipeline", refuse)
    assert bench.main(["--to-strength", "--out", str(tmp_path / "b"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("samloc bench: ")
    if message:
        assert err == f"samloc bench: {message}\n"
    else:
        assert "nosuch" in err
    assert not (tmp_path / "b").exists()


def test_an_out_folder_in_use_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "old.txt").write_text("x")
    assert bench.main(["--to-strength", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"samloc bench: --out: refusing to use the folder {tmp_path}: it "
                                       f"holds files"
                                       " (choose a new or empty folder); nothing was touched\n")
    assert bench.main(["--to-strength", "--out", str(tmp_path / "old.txt")]) == 2
    assert capsys.readouterr().err == (f"samloc bench: --out: refusing to write the folder "
                                       f"{tmp_path / 'old.txt'}:"
                                       " it is a file; nothing was written\n")


def test_checkpoint_every_minutes_and_keep_all_are_config_keys() -> None:
    cfg = load_config("quick", ["checkpoint.every_minutes=1.5", "checkpoint.keep=0"])
    assert (cfg.checkpoint.every_minutes, cfg.checkpoint.keep) == (1.5, 0)
    with pytest.raises(ConfigError, match="checkpoint.every_minutes must be >= 0"):
        load_config("quick", ["checkpoint.every_minutes=-1"])
    with pytest.raises(ConfigError, match="checkpoint.keep >= 0"):
        load_config("quick", ["checkpoint.keep=-1"])


def test_a_minutes_clock_is_due_past_every_multiple_once() -> None:
    from training.run.loop import MinutesClock

    clock = MinutesClock(1, 10.0)  # 10 s trained: the next at 60 s
    assert clock.next == 60 and not clock.due(59.9)
    assert clock.due(60.5) and not clock.due(61) and clock.next == 120
    assert clock.due(185.0) and clock.next == 240  # past 3 minutes at once: due once, then the 4th
    never = MinutesClock(0, 10.0)
    assert never.next == float("inf") and not never.due(1e9)


@pytest.mark.slow
def test_the_wall_clock_and_the_minute_0_checkpoint_come_before_ray_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from training.launch import new_loop

    cfg = load_config("quick",
                      ["model.hidden=16", "model.layers=1", "display=none", "checkpoint.every_minutes=1"])
    loop = new_loop(cfg, tmp_path / "run", log=lambda m: None)
    seen = {}

    def ray_starts() -> None:
        seen["t0"] = getattr(loop, "t0", None)
        seen["ckpts"] = list_checkpoints(tmp_path / "run")
        raise KeyboardInterrupt  # stop here: nothing after it is under test

    monkeypatch.setattr(loop.workers, "start", ray_starts)
    with pytest.raises(KeyboardInterrupt):
        loop.start()
    assert seen["t0"] is not None  # Ray's start counts towards max_minutes
    assert [c.name for c in seen["ckpts"]] == ["ckpt_00000000"]
    meta = read_metadata(seen["ckpts"][0])
    assert (meta.wall_time_s, meta.updates, meta.games) == (0.0, 0, 0)


def test_a_stopped_seed_ends_the_training_of_the_seeds(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from training.tools.pipeline import TrainResult

    calls = []

    def stopped(cfg, run_dir, *a: object, **kw: object) -> TrainResult:
        calls.append(cfg.seed)
        return TrainResult(run_dir, {"stop_reason": "stopped by SIGINT"})

    monkeypatch.setattr(to_strength, "run_pipeline", stopped)
    said: list[str] = []
    plan = to_strength.Plan("quick", [], 1.0, 3, tmp_path / "b")
    runs = to_strength.train_seeds(plan, said.append)
    assert calls == [0] and [r.seed for r in runs] == [0] and runs[0].stop_reason == "stopped by SIGINT"
    assert said[-1] == "seed 0: stopped by SIGINT; the seeds trained so far are scored"


def test_quiet_is_the_load_before_training() -> None:
    assert to_strength.quiet([0.2, 1.0, 1.0]) and not to_strength.quiet([0.5, 0.1, 0.1])


STAGES = ("stages=[{name: ppo, share: 0.35}, {name: expert, share: 0.65, "
          "settings: {distill: {enabled: true}, ppo: {ent_coef: 0.01}, rollout: {num_workers: auto}}}]")


@pytest.mark.parametrize("overrides, quiet", [([], True), (["distill.worlds=16", STAGES], False),
                                              (["x=" + "y" * 300, STAGES], None)])
def test_the_plot_title_stays_inside_the_figure(overrides: list[str], quiet: bool | None) -> None:
    """A 120-minute run's overrides (a stages list is ~170 characters) once ran off the figure's left edge."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    doc = {"config": "strong", "overrides": overrides, "deals": 1000, "eval_seed": 12345,
           "machine": {"cpus": 2, "load_before": [0.8, 0.3, 0.4], "quiet": quiet}}
    title = to_strength.plot_title(doc)
    lines = title.split("\n")
    assert len(lines) <= 5 and all(len(line) <= to_strength.TITLE_WIDTH for line in lines)
    assert lines[0].startswith(" ".join(["strong", *overrides])[:40])
    assert "1000 duplicate deals per point (seed 12345)" in title
    if len(" ".join(["strong", *overrides])) > 3 * to_strength.TITLE_WIDTH:
        assert lines[2].endswith("…")
    fig, ax = plt.subplots(figsize=to_strength.FIGSIZE)
    ax.set_title(title, fontsize=to_strength.TITLE_POINTS)
    fig.tight_layout()
    fig.canvas.draw()
    box, inside = ax.title.get_window_extent(), fig.bbox
    plt.close(fig)
    assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and box.y1 <= inside.y1


def test_the_machine_line_gives_the_learners_speed_where_it_was_measured() -> None:
    machine = {"cpus": 2, "load_before": [0.27, 0.8, 1.1], "quiet": True}
    doc = {"config": "strong", "machine": machine}  # a report written before the speed was measured
    assert to_strength._machine(doc) == "machine quiet (1-min load 0.27 before, 2 CPUs)"
    doc["machine"] = machine | {"learner_rows_per_s": {"fp32": 29_690, "bf16": 43_434}}
    assert to_strength._machine(doc) == ("machine quiet (1-min load 0.27 before, 2 CPUs;"
                                         " learner 29,690 rows/s fp32, 43,434 bf16)")


# ---- --combine: reports scored before, drawn as one -------------------------------------------------------
def _point(minutes: float, la: float) -> dict[str, object]:
    return {"minutes": minutes, "games": int(minutes * 1000), "decisions": int(minutes * 40_000),
            "decisions_trained": int(minutes * 10_000), "updates": int(minutes * 10), "checkpoint": "x",
            "la": la, "ci_low": la - 0.3, "ci_high": la + 0.3, "win_rate": 0.25, "deals": 1000,
            "eval_seed": 12345}


def _report(path: Path, config: str, seeds: list[dict[str, object]], deals: int = 1000) -> Path:
    doc = {"command": f"samloc bench ... {config}", "config": config, "overrides": [], "minutes": 120.0,
           "opponent": "heuristic", "rules": "hoi_quan_bai", "players": 4, "deals": deals, "eval_seed": 12345,
           "machine": {"cpus": 2, "load_before": [0.2, 0.3, 0.4], "quiet": True}, "seeds": seeds}
    path.mkdir(parents=True)
    (path / "to_strength.json").write_text(json.dumps(doc))
    return path


def test_combine_draws_reports_scored_on_the_same_deals_as_one(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    starts = [{"stage": 0, "name": "ppo", "minutes": 0.0, "updates": 0, "why": "the run starts"},
              {"stage": 1, "name": "expert", "minutes": 60.0, "updates": 900, "why": "its share"}]
    staged = _report(tmp_path / "strong", "strong",
                     [{"seed": 0, "label": "seed 0", "group": "seed 0", "stages": starts,
                       "points": [_point(0, -11.0), _point(60, 1.2), _point(120, 1.9)]}])
    scored = _report(tmp_path / "cmp", to_strength.SCORED,
                     [{"seed": 0, "label": "compare ppo seed 0", "group": "compare ppo",
                       "points": [_point(0, -8.0), _point(120, 1.6)]},
                      {"seed": 0, "label": "compare dmc seed 0", "group": "compare dmc",
                       "points": [_point(0, -8.0), _point(120, -0.1)]}])
    marked: list[list[float]] = []
    real = to_strength.stage_marks
    monkeypatch.setattr(to_strength, "stage_marks",
                        lambda ax, st, label, **kw: marked.append(real(ax, st, label, **kw)))
    out = tmp_path / "both"
    assert bench.main(["--to-strength", "--combine", str(scored / "to_strength.json"), str(staged),
                       "--out", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2] == ("verdict: NOT every run beats the heuristic at its last point (CI low > 0):"
                         " compare ppo seed 0 +1.600 [+1.300, +1.900] at 120.0 min, compare dmc seed 0 -0.100"
                         " [-0.400, +0.200] at 120.0 min, strong seed 0 +1.900 [+1.600, +2.200] at 120.0 min;"
                         " load while training not recorded here (each report's own, in sources; "
                         f"{os.cpu_count()} CPUs)")
    doc = json.loads((out / "to_strength.json").read_text())
    assert doc["config"] == to_strength.COMBINED and (doc["deals"], doc["eval_seed"]) == (1000, 12345)
    assert [(r["label"], r["group"]) for r in doc["seeds"]] == [
        ("compare ppo seed 0", "0: compare ppo"), ("compare dmc seed 0", "0: compare dmc"),
        ("strong seed 0", "1: strong")]
    assert [r["points"] for r in doc["seeds"]] == [
        [_point(0, -8.0), _point(120, 1.6)], [_point(0, -8.0), _point(120, -0.1)],
        [_point(0, -11.0), _point(60, 1.2), _point(120, 1.9)]]  # the scores as scored, none again
    assert [s["machine"]["quiet"] for s in doc["sources"]] == [True, True] and not doc["all_beat_heuristic"]
    assert marked == [[], [], [60.0]]  # the expert stage's start, at its minute, on the staged run alone
    assert (out / "to_strength.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_combine_refuses_reports_of_other_deals_and_what_is_not_a_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _report(tmp_path / "a", "quick", [])
    b = _report(tmp_path / "b", "quick", [], deals=500)
    (tmp_path / "junk.json").write_text('{"seeds": 3}')
    out = str(tmp_path / "out")
    for argv, message in [
        ([str(a), str(b)], f"{b} was scored with deals 500, {a} with 1000: reports drawn together must share"
                           " their deals"),
        ([str(a), str(tmp_path / "junk.json")],
         f"{tmp_path / 'junk.json'}: not a time-to-strength report (no seeds, config or scoring table)"),
        ([str(a), str(tmp_path / "none")],
         f"{tmp_path / 'none'}: no such report (a to_strength.json, or the folder holding one)"),
        ([str(a), "--deals", "600"], "--combine draws reports scored before: --deals is for scoring"),
        ([str(a), "--minutes", "3"], "--combine draws reports scored before: --minutes is for training"),
        ([str(a), "--score"], "--score and --combine: give one (--combine scores nothing)"),
        ([], "--combine needs the reports to draw (REPORT ...)"),
    ]:
        assert bench.main(["--to-strength", "--combine", *argv, "--out", out]) == 2
        assert capsys.readouterr().err == f"samloc bench: {message}\n"
    assert not (tmp_path / "out").exists()
