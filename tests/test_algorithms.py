"""Algorithms as parts of the run loop: the registry, a user's class by import path, and the example
algorithm of docs/training.md (REINFORCE with a baseline) trained for a few updates through the real loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from agents.nets import checkpoint as ckpt
from training.algorithms import ALGORITHMS, Algorithm, resolve
from training.algorithms.expert import ExpertIteration
from training.algorithms.ppo import PPO
from training.algorithms.reinforce import Reinforce
from training.config import ConfigError
from training.config_load import load_config
from training.launch import new_loop
from training.run.rollout import RolloutEngine

REPO = Path(__file__).resolve().parent.parent
TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "rollout.num_workers=1", "model.hidden=16",
        "model.layers=1", "rollout.envs_per_worker=16",
        "rollout.steps_per_rollout=8", "ppo.batch_decisions=100", "eval.every_updates=0",
        "eval.final_deals=0",
        "checkpoint.every_updates=1000", "display=none", "log_every_s=1", "max_minutes=0"]


def test_algorithms_are_chosen_by_name_or_import_path() -> None:
    assert resolve(load_config("quick").algorithm) is PPO
    assert resolve(load_config("quick", ["algorithm=reinforce"]).algorithm) is Reinforce
    assert resolve(load_config("quick", ["distill.enabled=true"]).algorithm) is ExpertIteration
    assert resolve("training.algorithms.reinforce:Reinforce") is Reinforce
    assert all(issubclass(resolve(name), Algorithm) for name in ALGORITHMS)


@pytest.mark.parametrize("overrides, words", [
    (["algorithm=sarsa"], "not one of ppo"),
    (["algorithm=nowhere.module:Thing"], "cannot import it"),
    (["algorithm=training.run.loop:RunLoop"], "is not a training.algorithms.Algorithm"),
    (["algorithm=reinforce", "distill.enabled=true"], "is expert iteration"),
])
def test_a_bad_algorithm_is_refused_in_one_line(overrides: list[str], words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("quick", overrides)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("ask", [["algorithm=expert_iteration"], ["distill.enabled=true"],
                                 ["algorithm=ppo", "distill.enabled=true"]])
def test_expert_iteration_is_an_algorithm_and_distill_enabled_its_alias(ask: list[str]) -> None:
    """``algorithm: expert_iteration`` and the older ``distill.enabled: true`` load the same config, in which
    the two agree; a later word for another algorithm, or ``distill.enabled=false``, turns it off again."""
    cfg = load_config("quick", ask)
    assert (cfg.algorithm, cfg.section("distill").enabled) == ("expert_iteration", True)
    assert resolve(cfg.algorithm) is ExpertIteration
    off = load_config("quick", [*ask, "distill.enabled=false"])
    assert (off.algorithm, off.section("distill").enabled) == ("ppo", False)
    dmc = load_config("quick", [*ask, "algorithm=dmc"])
    assert (dmc.algorithm, dmc.section("distill").enabled) == ("dmc", False)
    shipped = load_config("expert", [])
    assert (shipped.algorithm, shipped.section("distill").enabled) == ("expert_iteration", True)


HELPERS = """
from training.algorithms.reinforce import Reinforce
from training.run.workers import WorkerGroup


class Helpers(Reinforce):
    name = "helpers"

    @classmethod
    def learns_from_rollouts(cls, cfg):
        return False

    @classmethod
    def own_workers(cls, cfg):
        return [WorkerGroup("helpers", 3, cfg.section("helpers").gamma * 2, "helper")]

    @classmethod
    def dry_run_lines(cls, cfg):
        return ["  helpers:     3 of them"]
"""


def test_the_centre_asks_the_algorithm_for_its_worker_groups(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizing, the CPU check and the dry run ask the algorithm which workers it starts (no name of an
    algorithm in the centre): an outside one without rollout workers and with a group of its own."""
    from training.launch import dry_run, resolve_launch
    from training.run.sizing import size_workers
    from training.run.workers import WorkerGroup, cpu_shortfall

    (tmp_path / "helpers_algo.py").write_text(HELPERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    over = ["algorithm=helpers_algo:Helpers", "rollout.num_workers=auto", f"out_dir={tmp_path}"]
    cfg = load_config("quick", over)
    cls = resolve(cfg.algorithm)
    assert cls.worker_groups(cfg) == [WorkerGroup("helpers", 3, 2.0, "helper")]
    assert PPO.worker_groups(cfg) == [WorkerGroup("rollout", "auto", 1.0, "rollout worker")]
    sized = size_workers(cfg, 16, "cpu", resolve(cfg.algorithm))
    assert sized.rollout_workers == 8 and sized.line.endswith("- 1 evaluation - 6 helpers)")
    assert cpu_shortfall(cls.worker_groups(cfg), 4, embedded=True) == (
        "helpers.num_workers=3 x helpers.cpus_per_worker=2 need 6 CPUs, Ray has 4"
        " (use helpers.num_workers=2 or helpers.cpus_per_worker=1.33)")
    small = load_config("quick", [*over, "helpers.gamma=0.1"])  # 3 x 0.2 CPU: fits any machine
    lines = dry_run(resolve_launch("quick", None, [*over, "helpers.gamma=0.1"], None, None), None, None)
    assert resolve(small.algorithm) is not PPO and "  helpers:     3 of them" in lines
    assert any(line.startswith("  workers:     no rollout workers") for line in lines)

@pytest.mark.slow
def test_the_example_algorithm_trains_through_the_real_loop(tmp_path: Path) -> None:
    """REINFORCE (docs/training.md's example) on the PPO workers' rollouts: a few updates, its losses in
    TensorBoard's usual tags, a checkpoint that resumes like any other."""
    cfg = load_config("quick",
                      [*TINY, "algorithm=reinforce", "reinforce.batch_decisions=100", "total_decisions=500"])
    loop = new_loop(cfg, tmp_path / "run", log=lambda m: None)
    before = {k: v.copy() for k, v in loop.algo.learner.weights().items()}
    summary = loop.run()
    assert isinstance(loop.algo, Reinforce) and summary["updates"] >= 3 \
        and summary["decisions_trained"] >= 500
    assert set(loop.algo.losses) >= {"policy", "value", "entropy"}
    net, meta = ckpt.load_checkpoint(summary["checkpoint"])
    assert meta.updates == summary["updates"] and meta.raw["config"]["algorithm"] == "reinforce"
    after = loop.algo.learner.weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    resumed = new_loop(load_config(tmp_path / "run" / "config.yaml"), tmp_path / "run", resume=True,
                      log=lambda m: None)
    assert isinstance(resumed.algo, Reinforce) and resumed.counters.updates == summary["updates"]


@pytest.mark.slow
def test_reinforce_trains_its_critic_and_its_policy(tmp_path: Path) -> None:
    """The rollout workers bootstrap unfinished games from the critic, so REINFORCE must train it: after
    one update every tensor of the critic has moved, as have the policy's (the critic reads only its
    own input beside the trunk, so nothing but its loss term can move it)."""
    from training.run.runstate import RunState

    torch.manual_seed(0)
    cfg = load_config("quick", [*TINY, "algorithm=reinforce", "model.critic=full"])
    algo = Reinforce(cfg, RunState(cfg, tmp_path / "run", "test", print), print)
    batch = RolloutEngine(cfg, 0, 1, Reinforce.targets(cfg)).rollout()["batch"]
    net = algo.learner.net
    before = {k: v.detach().clone() for k, v in net.named_parameters()}
    assert any(k.startswith("critic.") for k in before)
    losses = algo.learn(None, [{"batch": batch}])  # type: ignore[arg-type]  # REINFORCE reads nothing of the loop
    moved = {k for k, v in net.named_parameters() if not torch.equal(v, before[k])}
    critic = {k for k in before if k.startswith("critic.")}
    assert critic <= moved and len(moved) == len(before) and np.isfinite(losses["value"])


@pytest.mark.parametrize("anneal_by, where, at, want", [
    # decisions: lr x the share of total_decisions still to train (1,000 here)
    ("decisions", [], {"decisions_trained": 250}, 0.75),
    ("decisions", [], {"decisions_trained": 5_000}, 0.0),
    # minutes, no stages: from the run's start to the end of max_minutes (10 minutes: 600 s)
    ("minutes", [], {"wall_s": 150.0}, 0.75),
    ("minutes", [], {"wall_s": 700.0}, 0.0),
    # minutes, in a stage that began at 300 s: its own 300 s to the end, whatever came before
    ("minutes", [0.0, 300.0], {"wall_s": 300.0}, 1.0),
    ("minutes", [0.0, 300.0], {"wall_s": 450.0}, 0.5),
    ("minutes", [0.0, 300.0], {"wall_s": 540.0}, 0.2),
])
def test_ppo_anneals_its_learning_rate_over_the_budget_it_names(
        tmp_path: Path, anneal_by: str, where: list[float], at: dict[str, float], want: float) -> None:
    """``ppo.anneal_lr`` with ``anneal_by``: the rate is lr x the share still to go of the decisions, or of
    the stage's minutes (from the wall time its stage began to the end of ``max_minutes``); without
    ``anneal_lr`` it is ``lr`` whatever the counters say."""
    from training.run.runstate import RunState

    over = [*TINY, "ppo.lr=1e-3", "total_decisions=1000", "max_minutes=10", "ppo.anneal_lr=true",
            f"ppo.anneal_by={anneal_by}"]
    for anneal in (True, False):
        cfg = load_config("quick", [*over, f"ppo.anneal_lr={str(anneal).lower()}"])
        state = RunState(cfg, tmp_path / "run", "test", print)
        state.stage_starts = [{"stage": i, "wall_s": w} for i, w in enumerate(where)]
        algo = PPO(cfg, state, print)
        for k, v in at.items():
            setattr(state.counters, k, v)
        assert algo.learner.schedule(_progress(state)) == pytest.approx(1e-3 * (want if anneal else 1.0))


def test_a_resume_that_adds_minutes_raises_the_annealed_rate_again(tmp_path: Path) -> None:
    """A sitting that raises max_minutes (``--more-minutes``) re-spreads what is left of the stage: at 600 s
    of a stage begun at 300 s, 20 minutes leave 600 of its 900 s, so two thirds of the rate."""
    from training.run.runstate import RunState

    cfg = load_config("quick", [*TINY, "ppo.lr=1e-3", "max_minutes=20", "ppo.anneal_lr=true",
                                "ppo.anneal_by=minutes"])
    state = RunState(cfg, tmp_path / "run", "test", print)
    state.stage_starts = [{"stage": 0, "wall_s": 0.0}, {"stage": 1, "wall_s": 300.0}]
    state.counters.wall_s = 600.0
    assert PPO(cfg, state, print).learner.schedule(_progress(state)) == pytest.approx(1e-3 * 2 / 3)


def _progress(state: Any) -> Any:
    """The progress the loop hands the learner at the next update of a run in ``state``."""
    from training.run.learner import Progress

    c = state.counters
    return Progress(c.updates, c.decisions_trained, c.wall_s,
                    state.stage_starts[-1]["wall_s"] if state.stage_starts else 0.0)


@pytest.mark.parametrize("overrides, words", [
    (["ppo.anneal_by=hours"], "ppo.anneal_by must be one of decisions, minutes, not 'hours'"),
    (["ppo.anneal_lr=true", "ppo.anneal_by=minutes", "max_minutes=0"],
     "ppo.anneal_by minutes needs max_minutes"),
    (["ppo.anneal_lr=true", "ppo.anneal_by=minutes", "max_minutes=5", "rollout.deterministic=true"],
     "ppo.anneal_by minutes does not run with rollout.deterministic"),
])
def test_an_anneal_by_that_cannot_run_is_refused_in_one_line(overrides: list[str], words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("quick", [*TINY, *overrides])
    assert words in str(err.value) and "\n" not in str(err.value)


def test_print_config_and_the_dry_run_name_the_sections_the_algorithm_does_not_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """issue #60: quick's tuned ppo section was silently ignored under an outside algorithm (its ent_coef
    fell back to a2c's default).  Both outputs name the unread sections and the keys set in them."""
    from samloc.commands import train as train_cmd
    from training.config_load import unread_sections
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    cfg = load_config("quick", ["algorithm=custom_algorithm:A2C", "ppo.clip=0.3"])
    assert unread_sections(cfg) == {"ppo": ["ppo.lr", "ppo.batch_decisions", "ppo.ent_coef", "ppo.clip"],
                                    "dmc": [], "distill": [], "reinforce": []}
    assert list(unread_sections(load_config("quick"))) == ["dmc", "distill", "reinforce"]
    assert list(unread_sections(load_config("expert"))) == ["dmc", "reinforce"]  # it runs PPO's update
    assert list(unread_sections(load_config("strong"))) == ["dmc", "reinforce"]  # stages: ppo, then expert
    note = ("ppo (set here: ppo.lr, ppo.batch_decisions, ppo.ent_coef), dmc, distill, reinforce: algorithm"
            " custom_algorithm:A2C does not read them (their settings change nothing in this run)")
    args = ["--config", "quick", "algorithm=custom_algorithm:A2C", "--run-dir", str(tmp_path / "run")]
    assert train_cmd.main([*args, "--print-config"]) == 0
    text = capsys.readouterr().out
    assert f"# Sections {note}." in text.splitlines()[:4]
    heads = [ln.split("#")[0].strip() for ln in text.splitlines() if "NOT READ in this run" in ln]
    assert heads == ["ppo:", "dmc:", "distill:", "reinforce:"]
    assert train_cmd.main([*args, "--dry-run"]) == 0
    assert f"  unread:      {note}" in capsys.readouterr().out.splitlines()


def test_the_default_display_shows_the_figures_learn_returned_whatever_their_names() -> None:
    """An outside algorithm's ``learn`` returns its own figures (A2C: no approx_kl): the panel shows them in
    its order, the loop's ``update_s`` left out, PPO's ``approx_kl`` as ``kl``."""
    a2c = SimpleNamespace(losses={"policy": -0.0123456, "value": 0.25, "entropy": 1.5, "update_s": 0.2})
    assert Algorithm.display_rows(a2c) == ([("losses", "policy -0.01235  value 0.25  entropy 1.5")], [])
    ppo = SimpleNamespace(losses={"approx_kl": 0.002, "policy_lag": 1.0})
    assert Algorithm.display_rows(ppo) == ([("losses", "kl 0.002  policy_lag 1")], [])
    assert Algorithm.display_rows(SimpleNamespace(losses={})) == ([], [])


@pytest.mark.slow
def test_an_outside_algorithm_brings_its_section_through_train_resume_and_export(tmp_path: Path) -> None:
    """examples/custom_algorithm.py as a researcher runs it: ``samloc train`` with PYTHONPATH=examples and
    its ``a2c`` section on the command line trains, checkpoints (the section in the metadata), exports
    ONNX; ``--resume`` alone restores the section exactly and trains on at its learning rate.  The first
    sitting runs on the terminal's display (``display=rich``, issue #60: it raised KeyError 'approx_kl'),
    and the panel left at the end shows A2C's own losses."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(REPO / "examples"), os.environ.get("PYTHONPATH", "")]))
    run = tmp_path / "run"
    tiny = [a for a in TINY if not a.startswith("ppo.")]

    shown: list[str] = []

    def train(*args: str) -> dict:
        r = subprocess.run([sys.executable, "-m", "samloc", "train", *args], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        shown.append(r.stdout)
        return json.loads((run / "summary.json").read_text())

    first = train("--config", "quick", "--run-dir", str(run), *tiny, "algorithm=custom_algorithm:A2C",
                  "a2c.lr=0.00123", "a2c.normalize_advantage=true", "a2c.batch_decisions=100",
                  "total_decisions=300", "display=rich")
    losses = [line for line in shown[0].splitlines() if "│ losses" in line]
    assert len(losses) == 1 and all(f" {k} " in losses[0] for k in ("policy", "value", "entropy")), shown[0]
    _, meta = ckpt.load_checkpoint(first["checkpoint"])
    a2c = meta.raw["config"]["a2c"]
    assert a2c["lr"] == 0.00123 and a2c["normalize_advantage"] is True and a2c["batch_decisions"] == 100
    assert first["updates"] >= 3 and (Path(first["checkpoint"]) / "policy.onnx").is_file()
    again = train("--resume", str(run), "--more-decisions", "300")
    _, meta2 = ckpt.load_checkpoint(again["checkpoint"])
    assert meta2.raw["config"]["a2c"] == a2c and again["updates"] > first["updates"]
    assert (Path(again["checkpoint"]) / "policy.onnx").is_file()
    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    rates = [e.value for e in acc.Scalars("charts/learning_rate")]
    assert len(rates) == again["updates"] and rates == pytest.approx([0.00123] * len(rates))
