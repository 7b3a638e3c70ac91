"""A new run's warm start (training/algorithms/warm_start.py): behaviour cloning from heuristic games made
in the run's own budget."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from training.run import compact
from training.config import ConfigError
from training.config_load import load_config
from training.run.learner import Learner
from training.launch import new_loop
from training.algorithms.warm_start import HeuristicEngine, clone_heuristic, games_config

pytestmark = pytest.mark.slow  # the heuristic's games cloned

SMALL = ["model.hidden=32", "model.layers=1", "warm_start.envs=64", "warm_start.minibatch=256"]


def agreement(learner: Learner, data: dict[str, torch.Tensor]) -> float:
    """How often the network's move is the heuristic's, where there were at least three legal moves."""
    with torch.no_grad():
        logits, _ = learner.net(data["obs"], data["mask"])
    choice = (data["mask"] > 0).sum(-1) >= 3
    return float((logits.argmax(-1) == data["act"])[choice].float().mean())


def test_every_seat_is_the_heuristic_and_the_clone_learns_its_moves() -> None:
    cfg = load_config("quick", [*SMALL, "warm_start.decisions=40000", "warm_start.lr=3e-3"])
    eng = HeuristicEngine(games_config(cfg), 0, 123)
    batches = [eng.rollout()["batch"] for _ in range(3)]  # the first holds only the games that ended soon
    held_out = compact.expand({k: torch.from_numpy(v) for k, v in compact.concat(batches).items()})
    assert games_config(cfg).rollout.opponent_fraction == 0.0 and len(held_out["act"]) > 200
    learner = Learner(cfg.model, cfg.learner, cfg.section("ppo").lr)
    before = agreement(learner, held_out)
    lines: list[str] = []
    figures = clone_heuristic(learner, cfg, lines.append)
    after = agreement(learner, held_out)
    # where there is a choice, it has learnt to make the heuristic's
    assert after > before + 0.2, (before, after)
    assert figures["decisions"] >= 40000 and lines[0].startswith("warm start: ")
    # the algorithm's optimizer, untouched
    assert learner.lr == cfg.section("ppo").lr and not learner.opt.state


def test_the_same_seed_clones_the_same_network() -> None:
    cfg = load_config("quick", [*SMALL, "warm_start.decisions=3000"])
    a, b = (Learner(cfg.model, cfg.learner, cfg.section("ppo").lr),
            Learner(cfg.model, cfg.learner, cfg.section("ppo").lr))
    b.net.load_state_dict(a.net.state_dict())
    clone_heuristic(a, cfg, lambda m: None)
    clone_heuristic(b, cfg, lambda m: None)
    wa, wb = a.weights(), b.weights()
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_a_run_with_a_warm_start_counts_its_time(tmp_path: Path) -> None:
    cfg = load_config("quick", [*SMALL, "warm_start.decisions=3000", "rollout.num_workers=1",
                                "rollout.envs_per_worker=16", "rollout.steps_per_rollout=8",
                                "ppo.batch_decisions=100",
                                "eval.every_updates=0", "eval.final_deals=0", "display=none", "max_minutes=0",
                                "total_decisions=200"])
    lines: list[str] = []
    summary = new_loop(cfg, tmp_path / "run", log=lines.append).run()
    said = [ln for ln in lines if ln.startswith("warm start: ")]
    assert len(said) == 1
    seconds = float(said[0].split(" in ")[1].split(" s ")[0])
    assert summary["wall_s"] >= seconds and summary["updates"] >= 1


def test_a_warm_start_and_init_from_are_refused_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="choose one"):
        load_config("quick", ["warm_start.decisions=100", f"init_from={tmp_path}"])
