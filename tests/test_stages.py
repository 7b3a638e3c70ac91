"""A run in stages (``stages``): the config's checks, what ends a stage, a stage's config, the curve's
marks, and tiny runs on Ray that switch stages (PPO to PPO with other settings, PPO to expert iteration)
and resume in the stage they stopped in."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.nets import format as ckfmt
from training.config import CONFIG_DIR, ConfigError
from training.config_load import load_config, stage_config
from training.tools import curve
from training.tools.curve import plot_curve, stage_marks
from training.tools.to_strength import run_stages, snapshot_point
from training.errors import TrainError
from training.launch import new_loop, stage_plan
from training.run.loop import RunLoop
from training.run.stages import plateaued

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "rollout.num_workers=1", "model.hidden=32",
        "model.layers=1", "rollout.envs_per_worker=32", "rollout.steps_per_rollout=8",
        "ppo.batch_decisions=200",
        "ppo.minibatch=128", "ppo.epochs=1", "rollout.snapshot_every=20", "rollout.pool_size=3",
        "eval.every_updates=2", "eval.deals=8", "eval.final_deals=0", "eval.opponents=[heuristic]",
        "checkpoint.every_updates=50", "checkpoint.keep=0", "display=none", "log_every_s=1", "max_minutes=0",
        "total_decisions=10000000"]
THREE = ("stages=[{name: first, updates: 2}, {name: second, updates: 2, settings: {ppo.lr: 1e-4}},"
         " {name: third, settings: {rollout: {heuristic_share: 0.5}, ppo: {lr: 5e-5}}}]")


# ---- the config ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("stages, message", [
    ("[{name: a}, {name: b}]", "stages[0] (a): nothing ends it; give share, updates or plateau_evals"),
    ("[{name: a, share: 0.7}, {name: b, share: 0.5}]",
     "stages[1].share: the shares so far add up to 1.2, more than the whole of max_minutes (1)"),
    ("[{name: a, share: 1.5}, {name: b}]", "stages[0].share must be from 0 to 1 (of max_minutes), not 1.5"),
    ("[{name: a, updates: 2}, {name: b, settings: {model: {hidden: 8}}}]",
     "stages[1].settings.model: a stage changes algorithm, rollout, learner, eval and the algorithms' "
     "sections,"
     " not the run's model"),
    ("[{name: a, updates: 2}, {name: b, settings: {warm_start: {decisions: 5}}}]",
     "stages[1].settings.warm_start: a stage changes"),
    ("[{name: a, updates: 2}, {name: b, settings: {ppo.lr: -1}}]", "stages[1] (b): ppo.lr must be positive"),
    ("[{name: a, updates: 2}, {name: b, settings: {ppo: {lrx: 1}}}]",
     "stages[1].settings: ppo.lrx: Key 'lrx' not in 'PPOConfig'"),
    ("[{name: a, updates: 2}, {name: b, settings: {learner: {device: cuda}}}]",
     "stages[1].settings.learner.device: the learner stays on its device for the whole run"),
    ("[{name: a, updates: 2}, {name: b, settings: {distill: {enabled: true}, algorithm: dmc}}]",
     "stages[1] (b): distill.enabled=true is expert iteration (on PPO), not algorithm=dmc"),
    ("[{name: a, updates: 2}, {name: a}]", "stages[0].name: 'a' names two stages"),
    ("[{name: 'a b', updates: 2}, {name: c}]", "stages[0].name must be letters, digits"),
    ("[{name: a, updates: 2}, {name: b, updates: 3}]",
     "stages[1] (b): the last stage runs until the run stops; give it no updates or plateau_evals"),
    ("[{name: a, plateau_evals: 2, plateau_opponent: snapshot}, {name: b}]",
     "stages[0].plateau_opponent: 'snapshot' is not one of eval.opponents (heuristic, random)"),
    ("[{name: a, updates: -1}, {name: b}]", "stages[0].updates, plateau_evals and plateau_gain must be >= 0"),
    ("[{name: a, updates: 1}, {name: b, bogus: 3}]", "stages: Key 'bogus' not in 'StageConfig'"),
])
def test_a_stage_that_cannot_run_is_one_line_naming_the_key(stages: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("quick", [f"stages={stages}"])
    assert str(err.value).startswith(message), str(err.value)
    assert "\n" not in str(err.value)


def test_shares_need_max_minutes_and_a_plateau_the_periodic_evaluation() -> None:
    with pytest.raises(ConfigError,
                       match=r"^stages\[0\].share is a share of max_minutes: give max_minutes > 0$"):
        load_config("quick", ["max_minutes=0", "stages=[{name: a, share: 0.5}, {name: b}]"])
    with pytest.raises(ConfigError, match=r"^stages\[0\].plateau_evals reads the periodic evaluation"):
        load_config("quick", ["eval.every_minutes=0", "eval.every_updates=0",
                              "stages=[{name: a, plateau_evals: 3}, {name: b}]"])
    with pytest.raises(ConfigError, match=r"^stages do not run with rollout.deterministic"):
        load_config("quick", ["rollout.deterministic=true", "stages=[{name: a, updates: 1}, {name: b}]"])


def test_a_stages_config_is_the_runs_with_every_stage_so_far_and_applying_it_again_changes_nothing() -> None:
    cfg = load_config("quick", [*TINY, THREE])
    assert [stage_config(cfg, i).section("ppo").lr for i in range(3)] == [1e-4, 1e-4, 5e-5]  # quick's is 1e-4
    assert [stage_config(cfg, i).rollout.heuristic_share for i in range(3)] == [1.0, 1.0, 0.5]
    third = stage_config(cfg, 2)
    again = stage_config(third, 2)
    assert again.section("ppo").lr == 5e-5 and again.rollout == third.rollout and again.eval == third.eval
    plan = stage_plan(cfg)
    plan.apply(cfg, 2)  # in place; the base is kept apart
    assert cfg.rollout.heuristic_share == 0.5 and plan.configs[0].rollout.heuristic_share == 1.0
    plan.apply(cfg, 1)
    assert cfg.rollout.heuristic_share == 1.0 and cfg.section("ppo").lr == 1e-4
    assert cfg.total_decisions == 10_000_000  # the run's own keys are never a stage's


def test_the_shipped_strong_config_is_a_warm_start_then_ppo_then_expert_iteration() -> None:
    raw = yaml.safe_load((CONFIG_DIR / "strong.yaml").read_text())
    assert ((CONFIG_DIR.parent.parent / "configs" / "strong.yaml").read_text()
            == (CONFIG_DIR / "strong.yaml").read_text())
    cfg = load_config("strong")
    assert cfg.max_minutes == 120 and cfg.section("warm_start").decisions > 0 and not cfg.init_from
    assert cfg.model.kind == "moves"  # the winner at equal time (issue #59)
    assert (cfg.model.hidden, cfg.model.layers, cfg.model.critic) == (256, 3, "full")
    assert [s.name for s in cfg.stages] == ["ppo", "expert"] and sum(s.share for s in cfg.stages) == 1.0
    ppo, expert = stage_config(cfg, 0), stage_config(cfg, 1)
    assert not ppo.section("distill").enabled and 0 < ppo.rollout.heuristic_share < 1  # heuristic + pool
    assert expert.section("distill").enabled and expert.section("distill").belief_deals > 0  # its own belief
    assert raw["rollout"]["num_workers"] == "auto" and raw["eval"]["num_workers"] == "auto"


# ---- what ends a stage -----------------------------------------------------------------------------------
@pytest.mark.parametrize("scores, evals, gain, flat", [
    ([0.0, 0.5, 0.6, 0.62], 2, 0.05, False),     # +0.12 over the best before the last 2
    ([0.0, 0.5, 0.52, 0.54], 2, 0.05, True),     # +0.04
    ([0.0, 0.5, 0.3, 0.4], 2, 0.0, True),        # below the best before them
    ([0.0, 0.5], 2, 0.05, False),                # not enough evaluations yet
    ([0.0, 0.1, 0.2], 0, 0.05, False),           # no plateau rule
])
def test_a_plateau_is_no_gain_over_the_best_before_the_last_evaluations(scores: list[float], evals: int,
                                                                        gain: float, flat: bool) -> None:
    assert plateaued(scores, evals, gain) is flat


def _evals(stage: int, scores: list[float]) -> list[dict[str, Any]]:
    return [{"stage": stage, "results": {"heuristic": {"mean_score": s}}} for s in scores]


def test_a_stage_ends_at_its_minutes_mark_its_updates_or_a_plateau_and_the_last_never() -> None:
    cfg = load_config("quick", ["max_minutes=100", "stages=[{name: a, share: 0.25}, {name: b, share: 0.25,"
                                " updates: 10, plateau_evals: 2, plateau_gain: 0.1}, {name: c}]"])
    plan = stage_plan(cfg)
    start = {"updates": 5}
    assert plan.ends(0, start, 1000, 25 * 60 - 1, 100, []) == ""
    assert plan.ends(0, start, 6, 25 * 60, 100, []).startswith("its share of max_minutes (25 minutes")
    assert plan.ends(1, start, 14, 49 * 60, 100, []) == ""            # the mark of stage 1 is minute 50
    assert plan.ends(1, start, 14, 50 * 60, 100, []).startswith("its share of max_minutes (50 minutes")
    assert plan.ends(1, start, 15, 0, 100, []) == "its 10 updates are made"
    history = _evals(0, [3.0, 3.0, 3.0]) + _evals(1, [0.0, 0.5, 0.55, 0.6])
    assert plan.ends(1, start, 6, 0,
                     100, history).startswith("its last 2 evaluations gained no more than 0.1 lá")
    assert plan.ends(1, start, 6, 0, 100, history[:-1]) == ""         # 0.55 is +0.05, but only 1 since +0.5
    assert plan.ends(2, start, 10**6, 10**6, 100, history) == ""
    assert [plan.mark_minutes(i, 100) for i in range(3)] == [25, 50, None]  # the last runs to the run's end


def test_the_seconds_left_are_to_the_stages_mark_or_the_runs_budget_whichever_is_first() -> None:
    from types import SimpleNamespace
    cfg = load_config("quick", ["max_minutes=100", "stages=[{name: a, share: 0.25}, {name: b, updates: 10},"
                                " {name: c}]"])

    def at(stage: int, cfg: Any = cfg) -> Any:  # a run 10 minutes in, in this stage
        return SimpleNamespace(cfg=cfg, plan=stage_plan(cfg), state=SimpleNamespace(stage=stage),
                               wall=lambda: 600.0)
    assert [RunLoop.seconds_left(at(i)) for i in range(3)] == [900, 5400, 5400]
    assert RunLoop.seconds_left(at(0, load_config("quick", ["max_minutes=0"]))) == float("inf")


# ---- the curve's marks ------------------------------------------------------------------------------------
def test_the_curve_marks_where_each_stage_begins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts = [{"stage": 0, "name": "ppo", "decisions_trained": 0},
              {"stage": 1, "name": "expert", "decisions_trained": 2_500_000}]
    fig, ax = plt.subplots()
    assert stage_marks(ax, starts, label=True) == [0.0, 2.5]
    assert [line.get_xdata()[0] for line in ax.get_lines()] == [0.0, 2.5]
    assert [t.get_text() for t in ax.texts] == [" 0: ppo", " 1: expert"]
    plt.close(fig)
    history = [{"decisions_trained": x, "results": {"heuristic": {"mean_score": m, "ci95": [m - 1, m + 1]}}}
               for x, m in ((0, -3.0), (2_000_000, 0.1), (3_000_000, 0.4))]
    marked: list[tuple[list[float], bool]] = []
    real = curve.stage_marks
    monkeypatch.setattr(curve, "stage_marks",
                        lambda ax, st, label: marked.append((real(ax, st, label), label)))
    history[0]["results"]["random"] = {"mean_score": 14.0, "ci95": [13.0, 15.0]}  # a second panel
    path = plot_curve(history, None, tmp_path / "curve.png", "t", starts)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert marked == [([0.0, 2.5], True), ([0.0, 2.5], False)]  # every panel, the names on the first


# ---- runs on Ray ------------------------------------------------------------------------------------------
def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _stop_when(done: Any, seen: list[tuple[int, int, int]]) -> Any:
    """An on_update hook: notes (update, stage, the scheduler's id) and ends the sitting once ``done``."""
    def hook(tr: RunLoop) -> None:
        seen.append((tr.counters.updates, tr.state.stage, id(tr.scheduler)))
        if done(tr):
            tr.cfg.total_decisions = tr.counters.decisions_trained
    return hook


@pytest.mark.slow
def test_a_run_goes_through_its_stages_and_a_resume_continues_in_the_one_it_stopped_in(
        tmp_path: Path) -> None:
    """Three stages of 2 updates, 2 updates and the rest: the first switch changes PPO's learning rate only
    (the rollout workers go on), the second the opponent mix (they are started anew).  The sitting stops
    in the third; the resume goes on in it, with its settings."""
    run, logs, seen = tmp_path / "run", [], []
    cfg = load_config("quick", [*TINY, THREE])
    first = new_loop(cfg, run, log=logs.append,
                     on_update=_stop_when(lambda t: t.counters.updates >= 6, seen)).run()
    assert [(s["stage"], s["name"], s["updates"]) for s in first["stages"]] == [
        (0, "first", 0), (1, "second", 2), (2, "third", 4)]
    assert [why["why"] for why in first["stages"]][1:] == ["its 2 updates are made"] * 2
    assert [m for m in logs if " ends at update " in m] == [
        "stage 0 (first) ends at update 2: its 2 updates are made; stage 1 (second) begins",
        "stage 1 (second) ends at update 4: its 2 updates are made; stage 2 (third) begins"]
    stage_of = {u: s for u, s, _ in seen}
    assert [stage_of[u] for u in range(1, 7)] == [0, 0, 1, 1, 2, 2]  # the switch comes after the update
    sched = {s: {i for _, st, i in seen if st == s} for s in range(3)}
    assert len(sched[0] | sched[1]) == 1 and sched[2].isdisjoint(sched[1])  # kept, then rebuilt
    meta = ckfmt.verify(Path(first["checkpoint"]), trainer=True)
    assert meta.raw["stage"]["index"] == 2 and meta.raw["stage"]["name"] == "third"
    assert meta.raw["stage"]["starts"] == first["stages"]
    # the time-to-strength report reads the same starts, at their minutes, and each snapshot's stage
    ckpts = ckfmt.list_checkpoints(run)
    assert [(s["stage"], s["name"], s["updates"], s["minutes"]) for s in run_stages(ckpts)] == [
        (s["stage"], s["name"], s["updates"], round(s["wall_s"] / 60, 3)) for s in first["stages"]]
    assert snapshot_point(ckpts[-1])["stage"] == "third"
    assert meta.raw["config"]["rollout"]["heuristic_share"] == 0.5  # the config it trains under
    assert yaml.safe_load((run / "config.yaml").read_text())["ppo"]["lr"] == 5e-5
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    assert {e["stage"] for e in evals} <= {0, 1, 2} and evals[0]["stage"] == 0
    assert [(st, v) for st, v in _scalars(run)["charts/stage"]] == [
        (s["decisions_trained"], float(s["stage"])) for s in first["stages"]]

    logs2: list[str] = []
    again = new_loop(load_config(run / "config.yaml"), run, resume=True, log=logs2.append,
                    on_update=_stop_when(lambda t: t.counters.updates >= 8, seen))
    assert again.state.stage == 2 and again.cfg.rollout.heuristic_share == 0.5
    assert again.algo.learner.lr == 5e-5 and again.algo.settings.lr == 5e-5
    second = again.run()
    assert "stage 2 of 3: third (resumed)" in logs2 and not any(" ends at update " in m for m in logs2)
    assert second["updates"] >= 8 and second["stages"] == first["stages"]
    assert [v for _, v in _scalars(run)["charts/stage"]] == [0.0, 1.0, 2.0]  # not marked again
    fewer = load_config(run / "config.yaml", ["stages=[{name: a, updates: 1}, {name: b}]"])
    with pytest.raises(TrainError,
                       match=r"its checkpoint is in stage 2, and stages lists 2 \(a resume keeps"):
        new_loop(fewer, run, resume=True)


@pytest.mark.slow
def test_ppo_then_expert_iteration_learns_its_hand_belief_inside_the_run(tmp_path: Path) -> None:
    """The strong recipe's shape at a tiny scale: PPO, then expert iteration on the same network, whose
    search's hand belief is learned from the run's own network (no init_from, nothing read)."""
    search = ["distill.envs_per_worker=24", "distill.decisions_per_request=96", "distill.candidates=3",
              "distill.worlds=2", "distill.horizon=1", "distill.minibatch=64", "distill.round_updates=1000",
              "distill.belief_deals=12", "belief.hidden=16", "belief.epochs=1", "distill.precision=fp32",
              "rollout.cpus_per_worker=0.5", "distill.cpus_per_worker=0.5"]
    stages = "stages=[{name: ppo, updates: 2}, {name: expert, settings: {distill: {enabled: true}}}]"
    cfg = load_config("quick", [*TINY, *search, stages])
    run, logs, seen = tmp_path / "run", [], []
    tr = new_loop(cfg, run, log=logs.append,
                 on_update=_stop_when(lambda t: t.state.stage == 1 and "distill_kl" in t.algo.losses, seen))
    summary = tr.run()
    assert type(tr.algo).__name__ == "ExpertIteration" and summary["stages"][1]["updates"] == 2
    assert [s for _, s, _ in seen][:2] == [0, 0] and "distill" in summary
    belief = [m for m in logs if "hand belief" in m]
    assert len(belief) == 1 and re.match(r"round 0: hand belief learned \(12 deals", belief[0])
    assert summary["distill"]["rounds"][0]["updates"] == 2  # round 0 searches the network PPO made
    # ... and its round_updates count from there, not from update 0 (a round 1 at once, and its belief)
    assert tr.algo.stage_counters.round_start == summary["distill"]["rounds"][-1]["updates"]
    meta = ckfmt.verify(Path(summary["checkpoint"]), trainer=True)
    assert meta.raw["distill"]["belief"]["round"] == 0 and meta.raw["stage"]["index"] == 1
    assert (Path(summary["checkpoint"]) / "belief.safetensors").is_file()


def test_the_dry_run_and_print_config_show_the_stages(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from samloc.commands.train import main

    assert main(["--config", "strong", "--run-dir", str(tmp_path / "run"), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  stage 0:     ppo, until minute 60; the run's config" in out
    assert ("  stage 1:     expert, until the run stops; algorithm=expert_iteration, ppo.ent_coef=0.01,"
            " rollout.num_workers=auto") in out
    assert main(["--config", "strong", "--print-config"]) == 0
    text = capsys.readouterr().out
    assert load_config_text(text, tmp_path).stages == load_config("strong").stages  # it reads back


def test_a_resumes_dry_run_shows_the_stages_done_and_the_one_it_continues_in() -> None:
    from training.launch import stage_lines

    cfg = load_config("strong", ["max_minutes=270"])  # a resume given more minutes: the shares move on
    record = {"index": 1, "starts": [{"stage": 0, "wall_s": 0.0}, {"stage": 1, "wall_s": 3601.1}]}
    assert stage_lines(cfg.stages, cfg.max_minutes, record) == [
        "  stage 0:     ppo, done (minute 0.0 to 60.0)",
        "  stage 1:     expert, resumed in it (begun at minute 60.0), until the run stops;"
        " algorithm=expert_iteration, ppo.ent_coef=0.01, rollout.num_workers=auto"]
    three = load_config("strong", ["max_minutes=100", "stages=[{name: a, share: 0.2}, {name: b, share: 0.3},"
                                   " {name: c}]"])
    assert stage_lines(three.stages, three.max_minutes,
                       {"index": 1, "starts": [{"wall_s": 0}, {"wall_s": 1230}]}) == [
        "  stage 0:     a, done (minute 0.0 to 20.5)",
        "  stage 1:     b, resumed in it (begun at minute 20.5), until minute 50; the run's config",
        "  stage 2:     c, until the run stops; the run's config"]
    new = stage_lines(three.stages, three.max_minutes)
    assert new[0] == "  stage 0:     a, until minute 20; the run's config"
    for bad in ({"index": 5, "starts": []}, {"index": 1, "starts": [{}]}, {"index": "1"}, {},
                {"index": 1, "starts": [{"wall_s": 0}, {"wall_s": "soon"}]}, [1], "stage 1"):
        # a record these stages do not match: shown as a new run's
        assert stage_lines(three.stages, three.max_minutes, bad) == new


def load_config_text(text: str, tmp_path: Path) -> Any:
    path = tmp_path / "printed.yaml"
    path.write_text(text, encoding="utf-8")
    return load_config(path)
