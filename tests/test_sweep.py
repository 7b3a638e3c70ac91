"""`samloc sweep`: a 2-trial sweep end to end (Ray Tune running two tiny `samloc train` runs on one Ray,
each scored afterwards on the same duplicate deals), the trial list it draws, and its one-line usage
errors, which start nothing."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agents.evaluation.evaluate import evaluate
from agents.nets.format import read_metadata
from sam_env.rules import RuleSet
from sam_env.table import Table
from samloc.commands import sweep as command
from training.tools import sweep as sweep_lib
from training.tools.sweep import SweepPlan, trial_settings

pytestmark = pytest.mark.slow  # sweeps on Ray Tune

REPO = Path(__file__).resolve().parent.parent
# One worker of half a CPU, a net of one layer, updates of about 60 decisions, no periodic evaluation.
TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "eval.every_updates=0", "rollout.num_workers=1",
        "rollout.cpus_per_worker=0.5", "model.layers=1", "rollout.envs_per_worker=8",
        "rollout.steps_per_rollout=8",
        "ppo.batch_decisions=60", "ppo.minibatch=32", "ppo.epochs=1", "learner.device=cpu", "display=none"]


def _run_until_a_trial_starts_then_ctrl_c(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Start the sweep, send SIGINT once its first trial trains; (exit status, stderr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "): training" in line:
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err


def test_a_two_trial_sweep_interrupted_resumed_and_scored(tmp_path: Path, capsys) -> None:
    """Ctrl-C: exit 130, the unfinished trials marked, no best; a rerun into the folder points to --resume;
    ``--resume`` (Tuner.restore) trains the rest, and every trial is scored on the same deals."""
    out = tmp_path / "sweep"
    argv = ["--config", "quick", "--grid", "model.hidden=16,24", "--seeds", "3", "--decisions", "600",
            "--deals", "8", "--allow-few-deals", "--out", str(out), *TINY]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    code, err = _run_until_a_trial_starts_then_ctrl_c([sys.executable, "-m", "samloc", "sweep", *argv], env,
                                                       tmp_path)
    assert code == 130, err[-3000:]
    assert err.strip().splitlines()[-1].endswith(f"continue: samloc sweep --resume {out}"), err[-3000:]
    cut = json.loads((out / "sweep.json").read_text())
    assert cut["interrupted"] and cut["best"] is None and all(s["rank"] is None for s in cut["settings"])
    status = {t["name"]: t["status"] for t in cut["trials"]}
    assert status["t01"] == "not started" and status["t00"] in ("interrupted", "done"), status
    assert command.main(argv) == 2  # the same command again: refused, pointing to --resume
    assert f"holds a sweep that did not finish: continue it with samloc sweep --resume {out}" in \
        capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "samloc", "sweep", "--resume", str(out)],
                          capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "sweep.json").read_text())
    assert doc["command"].startswith("samloc sweep --config quick --grid model.hidden=16,24 --seeds 3")
    assert (doc["config"], doc["overrides"], doc["grid"],
            doc["seeds"]) == ("quick", TINY, {"model.hidden": ["16", "24"]}, [3])
    assert (doc["budget"], doc["deals"], doc["eval_seed"], doc["opponent"], doc["asha"],
            doc["interrupted"]) == ({"decisions": 600}, 8, 12345, "heuristic", None, False)
    trials = doc["trials"]
    assert [(t["name"], t["settings"], t["seed"], t["label"]) for t in trials] == \
        [("t00", ["model.hidden=16"], 3, "model.hidden=16 seed=3"),
         ("t01", ["model.hidden=24"], 3, "model.hidden=24 seed=3")]
    for t, hidden in zip(trials, (16, 24)):
        assert (t["status"], t["stop_reason"]) == ("done", "total_decisions reached")
        meta = read_metadata(t["checkpoint"])  # the trial trained its own settings and seed
        assert meta.model["hidden"] == hidden and meta.model["layers"] == 1
        assert meta.name == t["run_name"] == f"model.hidden-{hidden}_seed-3"  # by its setting, not "quick"
        assert t["budget_used"]["decisions_trained"] == meta.decisions_trained >= 600
        assert t["budget_used"]["updates"] == meta.updates > 0
        s = t["score"]
        assert (s["deals"], s["eval_seed"]) == (8, 12345)  # the same deals for both
        assert s["ci_low"] <= s["la"] <= s["ci_high"] and 0 <= s["win_rate"] <= 1
        again = evaluate(t["checkpoint"], "heuristic",
                         Table(RuleSet.preset("hoi_quan_bai"), 4), 8, 12345)  # scored independently
        assert round(again["mean_score"], 4) == s["la"]
    ranked = doc["settings"]  # one seed each: ranked by the trial's own CI, said so
    assert [s["rank"] for s in ranked] == [1, 2] and ranked[0]["la"] >= ranked[1]["la"]
    assert all(s["ci"].startswith("over the deals (one seed") for s in ranked)
    assert doc["best"] in (None, ranked[0]["setting"])
    md = (out / "sweep.md").read_text()
    assert f"| 1 | {ranked[0]['setting']} | 3 |" in md and f"| 2 | {ranked[1]['setting']} | 3 |" in md
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "(resumed)" in proc.stdout and "total_decisions reached" in proc.stdout


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
    (["--grid", "ppo.lr=0.01,0.010"], "--grid ppo.lr: 0.01 and 0.010 are the same value"),
    (["--grid", "ppo.lr=1e-2,3e-4,0.01"], "--grid ppo.lr: 1e-2 and 0.01 are the same value"),
    (["--grid", "model.hidden=16,16"], "--grid model.hidden: 16 and 16 are the same value"),
    (["--grid", "model.hidden=" + ",".join(map(str, range(8, 19))), "--grid", "model.layers=1,2,3,4,5",
      "--seeds", "0,1"],
     "the sweep has 110 trials (11 x 5 x 2: grid values, samples, seeds); at most 100: give fewer"),
    (["--random", "model.layers=1:2", "--samples", "5"], "--random draws model.layers="),
    (["checkpoint.export_to=bots/x"],
     "checkpoint.export_to=bots/x: every trial would replace that one folder; a trial's bot stays"),
    (["--resume", "X"], "--resume takes the sweep's own plan (DIR/sweep_plan.json): give no --config"),
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


def test_a_config_that_exports_is_refused_and_the_plan_names_trials_by_their_setting(tmp_path: Path,
                                                                                    capsys) -> None:
    """standard.yaml copies its bot to checkpoints/standard: each trial of a sweep would replace it."""
    argv = ["--config", "standard", "--decisions", "1000", "--deals", "8", "--allow-few-deals", "--out",
            str(tmp_path / "s")]
    assert command.main(argv) == 2
    assert "checkpoint.export_to=checkpoints/standard: every trial would replace" in capsys.readouterr().err
    plan = SweepPlan("quick", [], [("ppo.lr", ["3e-4", "1e-3"])], [], 1, [0, 1], tmp_path / "s2",
                     decisions=100)
    trials = sweep_lib.check_plan(plan, few_deals_ok=True)
    assert [t.label for t in trials] == ["ppo.lr=3e-4 seed=0", "ppo.lr=3e-4 seed=1", "ppo.lr=1e-3 seed=0",
                                         "ppo.lr=1e-3 seed=1"]
    assert [t.cfg.name for t in trials] == ["ppo.lr-3e-4_seed-0", "ppo.lr-3e-4_seed-1", "ppo.lr-1e-3_seed-0",
                                            "ppo.lr-1e-3_seed-1"]  # a run name's letters: resume reads it
    bare = sweep_lib.check_plan(SweepPlan("quick", [], [], [], 1, [2], tmp_path / "s3", decisions=100), True)
    assert (bare[0].label, bare[0].cfg.name) == ("quick seed=2", "quick_seed-2")
    assert sweep_lib.trial_run_name(["env.rules={preset: x}"], 0, "t07") == "env.rules-.preset..x._seed-0"
    assert sweep_lib.trial_run_name(["a.b=" + "x" * 100], 0, "t07").endswith("_t07")


def test_resume_needs_a_sweeps_folder_and_a_rerun_into_one_points_to_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "sweep"
    assert command.main(["--resume", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"samloc sweep: --resume {out}: not a sweep's folder")
    plan = SweepPlan("quick", [], [("ppo.lr", ["3e-4", "1e-3"])], [], 1, [0], out, decisions=100, deals=8)
    out.mkdir()
    sweep_lib.write_plan(plan, True)
    assert command.main(["--resume", str(out)]) == 2  # the plan, but no Tune state
    assert "Ray Tune has no state of this sweep there to restore (stopped before its trials started: run" \
        in capsys.readouterr().err
    back, few = sweep_lib.read_plan(out)
    assert (back, few) == (plan, True)
    assert len(sweep_lib.check_plan(plan, True)) == 2  # its command again: the folder holds only the plan
    sweep_lib.tune_path(out).mkdir(parents=True)
    (sweep_lib.tune_path(out) / "tuner.pkl").write_bytes(b"")  # what Tuner.can_restore looks for
    argv = ["--config", "quick", "--grid", "ppo.lr=3e-4,1e-3", "--decisions", "100", "--deals", "8",
            "--allow-few-deals", "--out", str(out)]
    assert command.main(argv) == 2
    assert f"continue it with samloc sweep --resume {out}" in capsys.readouterr().err


def _trial(name: str, setting: str, seed: int, la: float | None, status: str = "done",
           half: float = 0.5) -> dict:
    t = {"name": name, "settings": [setting], "seed": seed, "label": f"{setting} seed={seed}",
         "status": status, "stop_reason": ""}
    if la is not None:
        t["score"] = {"la": la, "ci_low": la - half, "ci_high": la + half, "win_rate": 0.3}
    return t


def test_settings_are_ranked_over_their_seeds_and_a_best_is_named_only_when_separated() -> None:
    from training.tools.sweep_report import across_seeds, rank_settings

    mean, _, hi = across_seeds([1.0, 2.0, 3.0])  # sd 1, t(2) = 4.303
    assert mean == 2.0 and math.isclose(hi - mean, 4.303 / math.sqrt(3))
    apart = [_trial("t00", "a=1", 0, 1.0), _trial("t01", "a=1", 1, 1.1), _trial("t02", "a=1", 2, 0.9),
             _trial("t03", "a=2", 0, -1.0), _trial("t04", "a=2", 1, -1.1), _trial("t05", "a=2", 2, -0.9)]
    settings, best, note = rank_settings(apart)
    assert [(s["setting"], s["rank"], s["seeds"]) for s in settings] == [("a=1", 1, [0, 1, 2]),
                                                                        ("a=2", 2, [0, 1, 2])]
    assert math.isclose(settings[0]["la"], 1.0) and settings[0]["ci"] == "across 3 seeds"
    assert best == "a=1" and "above every other" in note
    close = apart[:3] + [_trial("t03", "a=2", 0, 1.2), _trial("t04", "a=2", 1, 0.6),
                         _trial("t05", "a=2", 2, 0.9)]
    settings, best, note = rank_settings(close)  # the seeds' spread overlaps: no best
    assert best is None and note.startswith("no setting is separated") and settings[0]["rank"] == 1
    asha = apart[3:] + [_trial("t00", "a=1", 0, 3.0), _trial("t01", "a=1", 1, 2.0, "stopped by ASHA")]
    settings, best, _ = rank_settings(asha)  # a stopped seed: its setting is not ranked beside full ones
    assert [(s["setting"], s["rank"]) for s in settings] == [("a=2", 1), ("a=1", None)]
    assert settings[1]["unranked"].startswith("a seed stopped by ASHA") and best is None


def test_a_trial_is_marked_by_how_it_ended(tmp_path: Path) -> None:
    from training.tools.sweep import Trial, trial_status

    plan = SweepPlan("quick", [], [], [], 1, [0], tmp_path, minutes=1.0, asha=True)
    t = Trial("t00", [], 0, tmp_path / "t00", cfg=None)  # type: ignore[arg-type]
    assert trial_status(plan, t, "PENDING", None) == ("not started", "")
    assert trial_status(plan, t, None, None) == ("not started", "")
    assert trial_status(plan, t, "TERMINATED", None, interrupted=True) == ("not started", "")
    t.run_dir.mkdir()
    assert trial_status(plan, t, "RUNNING", None)[0] == "interrupted"
    assert trial_status(plan, t, "PENDING", None)[0] == "interrupted"  # started before, waiting again
    assert trial_status(plan, t, "TERMINATED", None, interrupted=True)[0] == "interrupted"  # Tune's stop
    assert trial_status(plan, t, "TERMINATED", None) == ("stopped by ASHA", "trailing at a rung")
    assert trial_status(plan, t, "ERROR", RuntimeError("boom\nTrainError: it broke")) == \
        ("failed", "TrainError: it broke")
    (t.run_dir / "summary.json").write_text('{"stop_reason": "max_minutes reached"}')
    assert trial_status(plan, t, "TERMINATED", None) == ("done", "max_minutes reached")


def test_the_sweep_knows_when_tune_took_a_ctrl_c() -> None:
    """Tune takes SIGINT during the fit and puts back the handler it found when a signal comes: _fit reads
    that (the trials' statuses cannot say it: Tune's stop marks them TERMINATED)."""
    import signal

    class Tuner:  # as Tune's fit treats the handlers
        def __init__(self, signalled: bool):
            self.signalled = signalled

        def fit(self) -> str:
            found = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, lambda *_: signal.signal(signal.SIGINT, found))
            if self.signalled:
                os.kill(os.getpid(), signal.SIGINT)
            return "grid"

    before = signal.getsignal(signal.SIGINT)
    assert sweep_lib._fit(Tuner(False)) == ("grid", False)
    assert sweep_lib._fit(Tuner(True)) == ("grid", True)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_resumed_sweeps_trial_continues_its_run_or_starts_again(tmp_path: Path) -> None:
    """Tuner.restore runs an interrupted trial again: with a checkpoint its run resumes from it; without
    one it starts anew, its first try's folder kept beside it."""
    from training.run.learner import Learner
    from training.run.runstate import RunState

    plan = SweepPlan("quick", ["model.layers=1"], [("model.hidden", ["16"])], [], 1, [0], tmp_path / "s",
                     decisions=100, deals=8)
    (trial,) = sweep_lib.check_plan(plan, True)
    spec = sweep_lib.trial_spec(plan, trial)
    trial.run_dir.mkdir(parents=True)
    (trial.run_dir / "config.yaml").write_text("from the first try")
    cfg, run_dir, resume = sweep_lib._trial_start(spec)
    assert (run_dir, resume, cfg.name) == (trial.run_dir, False, "model.hidden-16_seed-0")
    assert not run_dir.exists() and (run_dir.parent / "t00.interrupted-1" / "config.yaml").is_file()
    state = RunState(cfg, run_dir, "test", lambda line: None)
    state.write_run_files(False)
    state.save(Learner(cfg.model, cfg.learner, 1e-3), state.metadata(), {}, {})
    cfg, again, resume = sweep_lib._trial_start(spec)
    assert (again, resume, cfg.name, cfg.model.hidden) == (run_dir, True, "model.hidden-16_seed-0", 16)
