"""Reproducible runs (``rollout.deterministic``): a rollout is a function of its lane's games and its
seed; two runs of one config give the same weights whatever order their rollouts arrive in and though a
worker dies; a run stopped and resumed ends as one that never stopped, optimizer, RNG streams, pool,
lanes and counters included."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from agents.nets import format as ckfmt
from training.config_load import load_config
from training.algorithms.ppo import ppo_engine
from training.run.rollout import weights_to_numpy
from training.errors import TrainError
from training.launch import new_loop
from training.run.loop import RunLoop as Trainer

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]  # training runs

# Two workers on the embedded Ray's two CPUs, nets of 16, a batch of about two rollouts, a snapshot every
# two updates in a pool of two (so the pool drops one), stale rows corrected from a lag of 1.
TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "rollout.deterministic=true",
        "rollout.num_workers=2", "rollout.cpus_per_worker=0.5",
        "model.hidden=16", "model.layers=1", "rollout.envs_per_worker=8", "rollout.steps_per_rollout=8",
        "rollout.opponent_fraction=0.5", "rollout.snapshot_every=2", "rollout.pool_size=2",
        "ppo.batch_decisions=60", "ppo.minibatch=32", "ppo.epochs=1", "ppo.correct_from_lag=1",
        "learner.device=cpu", "eval.every_updates=0", "eval.final_deals=0", "checkpoint.every_updates=1",
        "checkpoint.keep=1000", "display=none", "max_minutes=0"]
HALF, FULL = 400, 800  # total_decisions of the stopped run's first sitting, and of the whole run


def _tensors(ckpt: Path, name: str) -> dict[str, np.ndarray]:
    return load_file(str(ckpt / name))


def assert_same_checkpoint(a: Path, b: Path) -> None:
    """Weights, optimizer, RNG states, pool and lanes bit for bit, and the counters but wall time (and the
    worker failures, which do not change what is learned)."""
    for name in (ckfmt.MODEL_FILE, ckfmt.TRAINER_TENSORS):
        ta, tb = _tensors(a, name), _tensors(b, name)
        assert sorted(ta) == sorted(tb), name
        for k in ta:
            assert ta[k].dtype == tb[k].dtype and np.array_equal(ta[k], tb[k]), f"{name}: {k} differs"
    ja, jb = (json.loads((p / ckfmt.TRAINER_JSON).read_text()) for p in (a, b))
    for j in (ja, jb):
        for k in ("wall_s", "worker_failures"):
            del j["counters"][k]
    assert ja["counters"] == jb["counters"]
    assert ja["param_groups"] == jb["param_groups"] and ja["lanes"] == jb["lanes"]


# ---- the rollout engine, without Ray --------------------------------------------------------------
def test_a_rollout_is_a_function_of_its_lane_state_and_seed() -> None:
    """An engine given another engine's games and a seed plays the very rollout that engine plays next,
    against the heuristic and a snapshot too; a state of another config is refused in one line."""
    cfg = load_config("quick", ["model.hidden=16", "model.layers=1", "rollout.envs_per_worker=16",
                                "rollout.steps_per_rollout=24", "rollout.opponent_fraction=0.7",
                                "rollout.heuristic_share=0.5"])
    torch.manual_seed(0)
    a = ppo_engine(cfg, 0, seed=1)
    weights = weights_to_numpy(a.net)
    snap = {k: v * 0.5 for k, v in weights.items()}
    a.set_weights(weights, 0)
    a.set_pool([(2, snap)])
    a.rollout()
    state = a.get_state()
    b = ppo_engine(cfg, 1, seed=99)  # other games, other streams
    b.set_weights(weights, 0)
    b.set_pool([(2, snap)])
    b.set_state(state)
    for eng in (a, b):
        eng.reseed(12345)
    ra, rb = a.rollout(), b.rollout()
    assert ra["stats"] == {**rb["stats"], "seconds": ra["stats"]["seconds"]}
    assert ra["stats"]["vs_heuristic_games"] > 0 and ra["stats"]["vs_pool_games"] > 0
    assert ra["batch"].keys() == rb["batch"].keys()
    for k in ra["batch"]:
        assert np.array_equal(ra["batch"][k], rb["batch"][k]), k
    sa, sb = a.get_state(), b.get_state()
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)
    other = ppo_engine(load_config("quick", ["model.hidden=16", "rollout.envs_per_worker=4"]), 0, seed=1)
    with pytest.raises(ValueError, match="rollout state: 0.states") as err:
        other.set_state(state)
    assert "\n" not in str(err.value)



def test_a_checkpoint_keeps_the_weights_only_the_requests_out_play() -> None:
    """The lanes' record: each lane's games, and the weights of a version only a request out plays (an
    older update's, a snapshot the pool dropped), not the checkpoint's own or its pool's."""
    from training.run.scheduler import Lanes, Request

    def w(x: float) -> dict[str, np.ndarray]:
        return {"inp.weight": np.full((2, 2), x, dtype=np.float32)}

    lanes = Lanes(2)
    lanes.states[0] = {"0.states": np.arange(3, dtype=np.int32)}
    lanes.ask(Request(7, 0, 5, w(5), [(2, w(2)), (4, w(4))]))
    lanes.ask(Request(6, 1, 3, w(3), [(2, w(2))]))
    arrays, record = lanes.to_checkpoint(5, {4})
    assert sorted(arrays) == ["bank.2.inp.weight", "bank.3.inp.weight", "lane.0.0.states"]
    assert record == {"count": 2, "out": [[6, 1, 3, [2]], [7, 0, 5, [2, 4]]]}
    back = Lanes.from_checkpoint(arrays, record, {5: w(5), 4: w(4)})
    assert back.states[1] is None and np.array_equal(back.states[0]["0.states"], np.arange(3))
    assert back.next().id == 6 and back.of_lane(0).id == 7
    for a, b in zip(sorted(lanes.out.values(), key=lambda r: r.id), (back.out[6], back.out[7])):
        assert (a.id, a.lane, a.version) == (b.id, b.lane, b.version)
        for (va, wa), (vb, wb) in zip([(a.version, a.weights), *a.pool], [(b.version, b.weights), *b.pool]):
            assert va == vb and np.array_equal(wa["inp.weight"], wb["inp.weight"])
    with pytest.raises(ValueError, match="version 4 that request 7 plays"):
        Lanes.from_checkpoint(arrays, record, {5: w(5)})


# ---- whole runs on Ray ---------------------------------------------------------------------------
def _kill_worker_at(update: int, killed: list[int]) -> Any:
    def hook(tr: Trainer) -> None:
        if tr.counters.updates == update and not killed:
            killed.append(tr.placement[0]["pid"])
            os.kill(killed[0], signal.SIGKILL)
    return hook


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run that never stops: FULL decisions, a checkpoint after every update."""
    run = tmp_path_factory.mktemp("straight") / "run"
    summary = new_loop(load_config("quick", [*TINY, f"total_decisions={FULL}"]), run,
                       log=lambda m: None).run()
    return {"run": run, "summary": summary}


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same config and seed stopped at HALF decisions, a worker killed on the way."""
    run = tmp_path_factory.mktemp("stopped") / "run"
    killed: list[int] = []
    tr = new_loop(load_config("quick", [*TINY, f"total_decisions={HALF}"]), run, log=lambda m: None,
                 on_update=_kill_worker_at(2, killed))
    summary = tr.run()
    assert killed and summary["worker_failures"] >= 1
    return {"run": run, "summary": summary}


def _has_bank(ckpt: Path) -> bool:
    """Whether a request out plays weights the checkpoint holds only for it (not its own, nor the pool's)."""
    return any(k.startswith("bank.") for k in _tensors(ckpt, ckfmt.TRAINER_TENSORS))


def test_two_runs_of_one_config_give_the_same_weights(straight: dict[str, Any],
                                                    stopped: dict[str, Any]) -> None:
    """At every update of the stopped run both runs hold the same checkpoint bit for bit, though one lost a
    worker (its rollouts came late, the other worker's first) and their budgets differ."""
    n = stopped["summary"]["updates"]
    assert 3 <= n < straight["summary"]["updates"]
    ours = ckfmt.list_checkpoints(stopped["run"])
    assert [p.name for p in ours] == [f"ckpt_{u:08d}" for u in range(1, n + 1)]
    for p in ours:
        assert_same_checkpoint(straight["run"] / "checkpoints" / p.name, p)
    lanes = json.loads((ours[-1] / ckfmt.TRAINER_JSON).read_text())["lanes"]
    assert lanes["count"] == 2 and sorted(lane for _, lane, _, _ in lanes["out"]) == [0, 1]
    assert any(_has_bank(p) for p in ours)


def test_a_resume_of_another_lane_count_is_refused_in_one_line(stopped: dict[str, Any]) -> None:
    run = stopped["run"]
    cfg = load_config(run / "config.yaml", ["rollout.num_workers=1"])
    with pytest.raises(TrainError, match="2 lanes resumes with rollout.num_workers=2, not 1") as err:
        new_loop(cfg, run, resume=True, log=lambda m: None)
    assert "\n" not in str(err.value)


def test_a_stopped_and_resumed_run_ends_as_one_that_never_stopped(
        straight: dict[str, Any], stopped: dict[str, Any], tmp_path: Path) -> None:
    """`--resume` from the stopped run's newest checkpoint whose requests out play weights it holds only for
    them (the final one, or as if the run had been killed after it) to the straight run's budget."""
    from samloc.commands.train import main

    run = tmp_path / "run"
    shutil.copytree(stopped["run"], run)
    cks = ckfmt.list_checkpoints(run)
    start = max(i for i, p in enumerate(cks) if _has_bank(p))
    for p in cks[start + 1:]:
        shutil.rmtree(p)
    assert main(["--resume", str(run), f"total_decisions={FULL}"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["updates"] == straight["summary"]["updates"]
    assert_same_checkpoint(Path(straight["summary"]["checkpoint"]), Path(summary["checkpoint"]))
