"""`samloc sweep`: a 2-trial sweep end to end (Ray Tune running two tiny `samloc train` runs on one Ray,
each scored afterwards on the same duplicate deals), the trial list it draws, and its one-line usage
errors, which start nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.evaluation.evaluate import evaluate
from agents.nets.format import read_metadata
from sam_env.rules import RuleSet
from samloc.commands import sweep as command
from training.tools import sweep as sweep_lib
from training.tools.sweep import SweepPlan, trial_settings

REPO = Path(__file__).resolve().parent.parent
# One worker of half a CPU, a net of one layer, updates of about 60 decisions, no periodic evaluation.
TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "eval.every_updates=0", "rollout.num_workers=1",
        "rollout.cpus_per_worker=0.5", "model.layers=1", "rollout.envs_per_worker=8",
        "rollout.steps_per_rollout=8",
        "ppo.batch_decisions=60", "ppo.minibatch=32", "ppo.epochs=1", "learner.device=cpu", "display=none"]


def test_a_two_trial_sweep_writes_every_trial_and_its_score(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "samloc", "sweep", "--config", "quick", "--grid", "model.hidden=16,24",
           "--seeds", "3", "--decisions", "600", "--deals", "8", "--allow-few-deals", "--out",
           str(out), *TINY]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["command"].startswith("samloc sweep --config quick --grid model.hidden=16,24 --seeds 3")
    assert (doc["config"], doc["overrides"], doc["grid"],
            doc["seeds"]) == ("quick", TINY, {"model.hidden": ["16", "24"]}, [3])
    assert (doc["budget"], doc["deals"], doc["eval_seed"], doc["opponent"], doc["asha"]) == \
        ({"decisions": 600}, 8, 12345, "heuristic", None)
    trials = sorted(doc["trials"], key=lambda t: t["name"])
    assert [(t["name"], t["settings"], t["seed"]) for t in trials] == \
        [("t00", ["model.hidden=16"], 3), ("t01", ["model.hidden=24"], 3)]
    for t, hidden in zip(trials, (16, 24)):
        assert (t["status"], t["stop_reason"]) == ("done", "total_decisions reached")
        meta = read_metadata(t["checkpoint"])  # the trial trained its own settings and seed
        assert meta.model["hidden"] == hidden and meta.model["layers"] == 1
        assert t["budget_used"]["decisions_trained"] == meta.decisions_trained >= 600
        assert t["budget_used"]["updates"] == meta.updates > 0
        s = t["score"]
        assert (s["deals"], s["eval_seed"]) == (8, 12345)  # the same deals for both
        assert s["ci_low"] <= s["la"] <= s["ci_high"] and 0 <= s["win_rate"] <= 1
        again = evaluate(t["checkpoint"], "heuristic",
                         RuleSet.preset("hoi_quan_bai"), 4, 8, 12345)  # scored independently
        assert round(again["mean_score"], 4) == s["la"]
    ranked = doc["trials"]
    assert [t["rank"] for t in ranked] == [1, 2] and ranked[0]["score"]["la"] >= ranked[1]["score"]["la"]
    assert doc["best"] == ranked[0]["name"]
    md = (out / "sweep.md").read_text().splitlines()
    assert md[-2].startswith(f"| 1 | {ranked[0]['name']} | ") and md[-1].startswith(f"| 2 | "
                                                                                    f"{ranked[1]['name']} | ")
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "total_decisions reached" in proc.stdout and proc.stdout.count("): training") == 2



def test_trials_at_once_count_every_worker_group_the_algorithm_starts() -> None:
    """A trial holds its learner's CPU and each group of workers its algorithm starts (rollout workers, and
    expert iteration's search workers beside them or alone)."""
    from training.config_load import load_config

    def at_once(*over: str) -> int:
        return sweep_lib.concurrency(load_config("quick", ["rollout.num_workers=3", *over]), 16)

    assert at_once() == 4  # 3 rollout + 1 learner
    assert at_once("distill.enabled=true", "distill.num_workers=2") == 2  # 3 + 2 search + 1
    assert at_once("distill.enabled=true", "distill.num_workers=2", "distill.ppo=false") == 5  # 2 + 1
    assert at_once("rollout.num_workers=auto") == 1  # a trial sized to every CPU

def test_the_trials_are_the_grid_times_the_draws_and_the_same_each_time(tmp_path: Path) -> None:
    plan = SweepPlan("quick", [], [("model.hidden", ["16", "32"])],
                     [("model.layers", "1", "3", False), ("ppo.lr", "1e-5", "1e-3", True)], 3,
                     [0, 1], tmp_path)
    settings = trial_settings(plan)
    assert settings == trial_settings(plan) and len(settings) == 6
    assert [s[0] for s in settings] == ["model.hidden=16", "model.hidden=32"] * 3
    assert {s[1] for s in settings} <= {"model.layers=1", "model.layers=2", "model.layers=3"}
    lrs = [float(s[2].split("=")[1]) for s in settings]
    assert all(1e-5 <= v <= 1e-3 for v in lrs) and len(set(lrs)) == 6


@pytest.mark.parametrize("args, message", [
    (["--grid", "foo.bar=1,2"], "foo.bar=1: foo.bar: Key 'foo' not in 'TrainConfig'"),
    (["--grid", "model.hidden=abc,16"],
     "model.hidden=abc: model.hidden: Value 'abc' of type 'str' could not be"
                                        " converted to Integer"),
    (["--grid", "model.hidden"], "argument --grid: --grid 'model.hidden': give KEY=V1,V2,..."),
    (["--grid", "model.hidden=16", "--grid", "model.hidden=32"],
     "--grid model.hidden: model.hidden is given twice"),
    (["seed=3"], "key=value seed: the sweep sets seed itself: give --seeds"),
    (["--grid", "total_decisions=5,6"], "--grid total_decisions: the sweep sets total_decisions itself"),
    (["--random", "ppo.lr=1e-3:1e-5"], "argument --random: --random 'ppo.lr=1e-3:1e-5': give KEY=LO:HI"),
    (["--asha"], "--asha ranks trials as their minutes pass: give --minutes, not --decisions"),
    (["--samples", "3"], "--samples draws the --random keys: give --random KEY=LO:HI"),
    (["--deals", "20", "--out", "X"], "--deals 20 is under 500 (add --allow-few-deals to mean it)"),
    (["nonsense=1"], "Key 'nonsense' not in 'TrainConfig'"),
    (["--grid", "learner.device=cpu,cuda"],
     "learner.device=cuda: a sweep's trials train their learners on the CPU"),
])
def test_bad_arguments_are_one_line_and_exit_2_before_anything_trains(tmp_path: Path, capsys, args: list[str],
                                                                        message: str) -> None:
    out = tmp_path / "sweep"
    argv = ["--config", "quick", "--decisions", "1000", "--deals", "8", "--allow-few-deals", "--out",
            str(out), *args]
    if "--deals" in args:
        argv = ["--config", "quick", "--decisions", "1000", *args]
    assert command.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("samloc sweep: ") and message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_asha_hears_each_periodic_evaluation_once_in_order(monkeypatch) -> None:
    """The trial's reporter (the run loop's on_update): every evaluation recorded goes to tune.report once,
    as lá with its CI at the minutes and decisions it was measured at, the last one after the loop ends."""
    heard: list[dict] = []
    monkeypatch.setattr(sweep_lib.tune, "report", heard.append)
    history: list[dict] = []
    loop = SimpleNamespace(state=SimpleNamespace(eval_history=history))
    point = lambda u, la: {"updates": u, "wall_s": 6.0 * u, "decisions_trained": 100 * u,  # noqa: E731
                           "results": {"heuristic": {"mean_score": la, "ci95": [la - 1, la + 1]}}}
    reporter = sweep_lib._Reporter()
    reporter(loop)
    history.append(point(0, -16.0))
    reporter(loop)
    reporter(loop)  # no new evaluation: nothing said
    history += [point(10, -5.0), point(20, -3.0)]
    reporter(loop)
    history.append(point(25, -2.5))  # recorded after the last update
    reporter.flush()
    assert heard == [{"la": la, "ci_low": la - 1, "ci_high": la + 1, "minutes": u / 10,
                      "decisions_trained": 100 * u,
                      "updates": u} for u, la in ((0, -16.0), (10, -5.0), (20, -3.0), (25, -2.5))]
