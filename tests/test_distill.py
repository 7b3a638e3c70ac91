"""Expert iteration (training/algorithms/expert_search.py): the search workers' games and what they record,
the buffer, the distillation term, the config's errors, and tiny stages on Ray: the loss falls and the policy
moves towards
the search's targets on held-out decisions, with PPO and without, across rounds and a resume."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agents.nets import checkpoint as ckpt
from agents.nets import format as ckfmt
from agents.nets.belief import BeliefNet, load_belief, save_belief
from agents.nets.policy import build_net
from sam_env.actions import NUM_ACTIONS
from sam_env.obs import OBS_SIZE
from training.config import ConfigError
from training.config_load import load_config
from training.algorithms import resolve
from training.algorithms.expert import ExpertIteration
from training.algorithms.ppo import PPO
from training.algorithms.expert_search import SearchEngine, search_request_seed
from training.algorithms.expert_targets import TargetBuffer, kl_to_targets, search_answer, target_batch
from training.algorithms.losses import distill_terms
from training.run.rollout import request_seed, weights_to_numpy
from training.launch import new_loop
from training.run.loop import RunLoop

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]  # training runs

#: a stage small enough for CI: a tiny network and a search of 3 candidates in 2 worlds, 1 move deep
TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "model.hidden=32", "model.layers=1",
        "distill.enabled=true", "distill.envs_per_worker=24",
        "distill.decisions_per_request=96", "distill.candidates=3", "distill.worlds=2",
        "distill.horizon=1",
        "distill.minibatch=64", "distill.batch_decisions=96", "rollout.num_workers=1",
        "rollout.cpus_per_worker=0.5", "distill.cpus_per_worker=0.5", "eval.deals=8",
        "eval.final_deals=0", "eval.opponents=[random]", "eval.every_updates=1000", "display=none",
        "log_every_s=1", "max_minutes=0", "distill.precision=fp32"]


def _engine(overrides: list[str], seed: int, weights: dict[str, np.ndarray] | None = None) -> SearchEngine:
    cfg = load_config("quick", [*TINY, *overrides])
    if weights is None:
        torch.manual_seed(0)
        weights = weights_to_numpy(build_net(32, 1, "full"))
    eng = SearchEngine(cfg, 0, seed)
    eng.set_network(weights, 0, None)
    return eng


def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


# ---- the search workers' games --------------------------------------------------------------------
def test_the_search_games_record_every_searched_decision_with_legal_candidates_reproducibly() -> None:
    eng = _engine(["distill.precision=bf16"], seed=7)  # float32 repeats in a one-thread process: below
    assert eng.search.fast_net.inp.weight.dtype == torch.bfloat16
    out = eng.play()
    b, st = out["batch"], out["stats"]
    n = len(b["cands"])
    assert n == st["searched"] >= 96 and out["round"] == 0
    assert st["decisions"] > n and 0 < st["changed"] <= n
    assert st["heuristic_games"] <= st["games"]
    tb = target_batch(b, torch.device("cpu"), 1.0)
    mask = tb["mask"].numpy()
    cands, values = b["cands"].astype(np.int64), b["values"]
    for i in range(n):
        c = cands[i][cands[i] >= 0]
        assert len(c) >= 2 and (mask[i, c] == 1).all() and mask[i].sum() >= len(c)  # a real, legal choice
        assert np.isfinite(values[i][cands[i] >= 0]).all()
    target = tb["target"].numpy()
    np.testing.assert_allclose(target.sum(1), 1.0, rtol=1e-6)
    assert ((target > 0) <= (mask > 0)).all()  # nothing on an illegal move
    assert (target[np.arange(n), tb["move"].numpy()] == target.max(1)).all()
    # the observations the learner gets are those of the searched seats: the policy's own top move
    # from them is the first candidate
    torch.manual_seed(0)
    net = build_net(32, 1, "full").eval()
    with torch.no_grad():
        top = net(tb["obs"], tb["mask"])[0].argmax(1).numpy()
    assert (top == cands[:, 0]).all()
    assert st["precision"] == "bf16" and st["rollout_rates"] == {}
    again = _engine(["distill.precision=bf16"], seed=7).play()["batch"]
    assert all(np.array_equal(again[k], b[k]) for k in b)  # the seed decides everything, on one thread
    other = _engine(["distill.precision=bf16"], seed=8).play()["batch"]
    assert not np.array_equal(other["obs_bits"][:50], b["obs_bits"][:50])


@pytest.mark.parametrize("share, heuristic", [(1.0, True), (0.0, False)])
def test_the_opponent_mix_is_the_configured_one(share: float, heuristic: bool) -> None:
    eng = _engine([f"distill.heuristic_share={share}", "distill.decisions_per_request=300"], seed=3)
    st = eng.play()["stats"]
    assert st["games"] > 0
    assert st["heuristic_games"] == (st["games"] if heuristic else 0)


def test_float32_search_games_repeat_for_a_seed_in_a_one_thread_process() -> None:
    """A search worker's process runs one thread from its start.  In a process that has multiplied on
    several threads before (this one: the belief's training), float32 GEMM can differ in the last bits
    (8e-10 measured) and flip a move between near-equal logits, so this runs in a fresh process."""
    code = ("import sys, numpy as np; sys.path.insert(0, 'tests'); from test_distill import _engine\n"
            "a, b = (_engine(['distill.precision=fp32'], seed=7) for _ in range(2))\n"
            "assert a.search.fast_net is a.search.policy.net  # float32: no bfloat16 copy\n"
            "x, y = a.play()['batch'], b.play()['batch']\n"
            "assert all(np.array_equal(x[k], y[k]) for k in x) and len(x['cands']) >= 96\n"
            "print('same', len(x['cands']))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("same "), r.stderr[-2000:]


def test_auto_precision_runs_the_rollouts_in_the_faster_of_the_two_it_measured() -> None:
    eng = _engine(["distill.precision=auto"], seed=3)
    rates = eng.rates
    assert rates["fp32"] > 0 and set(rates) <= {"fp32", "bf16"}
    assert eng.bf16 == (rates.get("bf16", 0.0) > rates["fp32"])
    assert eng.search.fast_net.inp.weight.dtype == (torch.bfloat16 if eng.bf16 else torch.float32)
    eng.set_network(weights_to_numpy(build_net(32, 1, "full")), 1, None)  # a new round: measured once
    assert eng.rates is rates and eng.search.fast_net.inp.weight.dtype == (
        torch.bfloat16 if eng.bf16 else torch.float32)
    st = eng.play()["stats"]
    assert st["precision"] == ("bf16" if eng.bf16 else "fp32") and st["rollout_rates"] == rates


def test_bench_search_times_one_search_worker_in_each_precision(tmp_path: Path) -> None:
    from samloc.commands.bench_training import main
    from training.algorithms.expert_search import bench_search

    torch.manual_seed(0)
    start = _start_checkpoint(tmp_path / "start")
    res = bench_search(load_config("quick", [*TINY, f"init_from={start}"]), requests=1)
    assert res["init_from"] == str(start) and (res["candidates"], res["worlds"], res["horizon"]) == (3, 2, 1)
    assert res["fp32_searched_per_s"] > 0 and res["bf16_searched_per_s"] > 0
    rows = res["rollout_rows_per_s"]
    assert res["auto"] == ("bf16" if rows.get("bf16", 0) > rows["fp32"] else "fp32")
    assert main(["--search", "--requests", "0"]) == 2


def test_search_seeds_are_a_stream_of_their_own() -> None:
    seeds = {search_request_seed(0, w, r) for w in range(4) for r in range(50)}
    assert len(seeds) == 200 and not seeds & {request_seed(0, w, r) for w in range(4) for r in range(50)}
    assert search_request_seed(0, 1, 2) == search_request_seed(0, 1, 2) != search_request_seed(1, 1, 2)


# ---- the buffer and the loss ----------------------------------------------------------------------
def _rows(first: int, n: int) -> dict[str, np.ndarray]:
    return {"cands": np.arange(first, first + n, dtype=np.int16)[:, None].repeat(2, 1),
            "values": np.zeros((n, 2))}


def test_the_buffer_keeps_the_newest_decisions() -> None:
    buf = TargetBuffer(5)
    buf.add(_rows(0, 3))
    assert len(buf) == 3 and sorted(buf.rows(np.arange(3))["cands"][:, 0]) == [0, 1, 2]
    buf.add(_rows(3, 4))  # 7 in all: 0 and 1 are gone
    assert len(buf) == 5 and sorted(buf.rows(np.arange(5))["cands"][:, 0]) == [2, 3, 4, 5, 6]
    buf.add(_rows(10, 8))  # more than it holds at once: the newest 5
    assert sorted(buf.rows(np.arange(5))["cands"][:, 0]) == [13, 14, 15, 16, 17]


class _Fixed(torch.nn.Module):
    """A 'network' whose masked logits are given."""

    def __init__(self, logits: torch.Tensor):
        super().__init__()
        self.logits = logits

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.where(mask > 0, self.logits, torch.full_like(self.logits, -1e9)), torch.zeros(len(obs))


def _targets(values: list[list[float]], cands: list[list[int]], mask_rows: list[list[int]],
             temperature: float = 0.25, stake: float = 0.0) -> dict:
    """A minibatch as ``TargetBuffer.sample`` makes it, from candidates and their values (-1: none)."""
    mask = torch.zeros(len(cands), NUM_ACTIONS, dtype=torch.int8)
    for r, legal in enumerate(mask_rows):
        mask[r, legal] = 1
    answer = search_answer(np.array(cands), np.array(values), temperature, torch.device("cpu"))
    return {"obs": torch.zeros(len(cands), OBS_SIZE), "mask": mask, **answer, "stake": stake}


def test_the_distillation_term_is_the_kl_to_the_target() -> None:
    mask = torch.zeros(2, NUM_ACTIONS, dtype=torch.int8)
    mask[0, [3, 5, 8, 9]] = 1
    mask[1, [1, 2]] = 1
    target = torch.zeros(2, NUM_ACTIONS)
    target[0, [3, 5]] = torch.tensor([0.75, 0.25])
    target[1, 2] = 1.0
    t = target.double()
    entropy = -(t * torch.log(torch.where(t > 0, t, torch.ones_like(t)))).sum(1).float()
    batch = {"obs": torch.zeros(2, OBS_SIZE), "mask": mask, "target": target, "target_entropy": entropy,
             "move": torch.tensor([3, 2]), "cands": torch.tensor([[3, 5], [2, -1]]),
             "values": torch.tensor([[1.0, 0.0], [0.0, 0.0]])}
    loss, uniform = distill_terms(_Fixed(torch.zeros(2, NUM_ACTIONS)), batch, bf16=False)
    # a uniform policy over the legal moves: cross-entropy log 4 and log 2, KL that less the entropies
    ce = (np.log(4) + np.log(2)) / 2
    ent = -(0.75 * np.log(0.75) + 0.25 * np.log(0.25)) / 2
    np.testing.assert_allclose(uniform[:2].numpy(), [ce - ent, ce], rtol=1e-5)
    assert float(loss) == pytest.approx(ce - ent, rel=1e-5)  # no stake: the loss is the mean KL
    exact = distill_terms(_Fixed(torch.log(target.clamp_min(1e-30))), batch, bf16=False)[1]
    np.testing.assert_allclose(exact[:3].numpy(), [0.0, ent, 1.0], atol=1e-5)  # the policy is the target
    wrong = torch.zeros(2, NUM_ACTIONS)
    wrong[0, 9], wrong[1, 1] = 5.0, 5.0
    assert distill_terms(_Fixed(wrong), batch, bf16=False)[1][2] == 0  # never the search's move


def test_the_regret_is_the_la_the_policy_gives_away_by_the_search_values() -> None:
    # row 0: candidates 3, 5, 8 worth +2, -1, +0.5 lá; the policy 1/2, 1/4 and 1/8 on them, 1/8 on 9
    # row 1: one candidate, nothing to give away; row 2: the policy all on the best of two
    batch = _targets([[2.0, -1.0, 0.5], [4.0, 0.0, 0.0], [1.0, -2.0, 0.0]],
                     [[3, 5, 8], [2, -1, -1], [1, 4, -1]], [[3, 5, 8, 9], [1, 2], [1, 4]])
    logits = torch.full((3, NUM_ACTIONS), -30.0)
    logits[0, [3, 5, 8, 9]] = torch.log(torch.tensor([0.5, 0.25, 0.125, 0.125]))
    logits[1, [1, 2]] = 0.0
    logits[2, 1] = 0.0
    # row 0 over its candidates: 4/7, 2/7, 1/7 give away 0, 3 and 1.5 lá: 6/7 + 1.5/7 = 7.5/7
    expected = np.array([7.5 / 7, 0.0, 3 * np.exp(-30) / (1 + np.exp(-30))])
    _, terms = distill_terms(_Fixed(logits), batch, bf16=False)
    assert float(terms[3]) == pytest.approx(expected.mean(), rel=1e-5)


def test_the_stake_weights_each_decision_s_kl_by_its_regret_and_changes_no_measure() -> None:
    rows = ([[2.0, -1.0], [0.3, 0.0], [5.0, 0.0]], [[3, 5], [1, 2], [4, 6]], [[3, 5], [1, 2], [4, 6]])
    logits = torch.zeros(3, NUM_ACTIONS)  # even between each row's two moves: regrets 1.5, 0.15, 2.5 lá
    net = _Fixed(logits)
    plain_loss, plain = distill_terms(net, _targets(*rows), bf16=False)
    regret = np.array([1.5, 0.15, 2.5])
    for stake in (0.5, 1.0):
        loss, terms = distill_terms(net, _targets(*rows, stake=stake), bf16=False)
        batch = _targets(*rows)
        kl = (-(batch["target"] * torch.log_softmax(
            torch.where(batch["mask"] > 0, logits, torch.full_like(logits, -1e9)), -1)).sum(-1)
              - batch["target_entropy"]).numpy()
        weight = (1 - stake) + stake * regret / regret.mean()
        assert float(loss) == pytest.approx(float((weight * kl).mean()), rel=1e-5)
        assert float(loss) > float(plain_loss)  # the costly rows are the far ones here
        np.testing.assert_allclose(terms.numpy(), plain.numpy(), rtol=1e-6)  # what is logged is unweighted
    assert float(plain[3]) == pytest.approx(regret.mean(), rel=1e-5)


def test_the_value_loss_is_the_regret_and_one_world_at_a_time_pulls_as_their_mean_does() -> None:
    """distill.loss: value trains the regret itself: linear in the values, so the gradient of rows of one
    decision, each valued in one world, is the gradient of those rows valued by the worlds' mean; the KL
    to a softmax of each world's values is a vote instead, here for the move worse on average."""
    cands, legal = [[3, 5]] * 3, [[3, 5, 8]] * 3
    worlds = [[0.5, 0.0], [0.5, 0.0], [-4.0, 0.0]]  # move 3: a little better twice, far worse once
    mean = [[-1.0, 0.0]] * 3

    def grad(values: list[list[float]], loss: str) -> tuple[torch.Tensor, float, torch.Tensor]:
        logits = torch.zeros(3, NUM_ACTIONS, requires_grad=True)
        batch = _targets(values, cands, legal, temperature=0.25) | {"loss": loss}
        out, terms = distill_terms(_Fixed(logits), batch, bf16=False)
        out.backward()
        return logits.grad, float(out.detach()), terms

    g_world, loss, terms = grad(worlds, "value")
    assert loss == pytest.approx(float(terms[3]), rel=1e-6)  # the loss is the logged regret
    assert loss == pytest.approx((0.25 + 0.25 + 2.0) / 3, rel=1e-6)  # even over 3 and 5
    g_mean = grad(mean, "value")[0]
    torch.testing.assert_close(g_world.sum(0), g_mean.sum(0))
    assert float(g_mean[:, 3].sum()) > 0 > float(g_mean[:, 5].sum())  # descent lowers 3, the worse
    assert g_world[:, 8].abs().sum() == 0  # a legal move the search did not value is left alone
    g_kl = grad(worlds, "kl")[0]  # softmax per world at 0.25 lá: two votes for 3, one for 5
    assert float(g_kl[:, 3].sum()) < float(g_kl[:, 5].sum())  # descent raises 3 more than 5


# ---- the config ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, words", [
    (["distill.coef=0"], "distill.coef must be positive"),
    (["distill.temperature=-0.5"], "distill.temperature must be >= 0"),
    (["distill.stake=1.5"], "distill.stake must be in [0, 1]"),
    (["distill.round_updates=0"], "distill.round_updates"),
    (["distill.num_workers=0"], "distill.num_workers"),
    (["distill.candidates=1"], "distill.candidates must be an integer from 2 to 201, not 1"),
    (["distill.worlds=0"], "distill.worlds"),
    (["distill.horizon=-2"], "horizon"),
    (["distill.worlds=100000000"],
     "distill.worlds=100,000,000 with candidates=6 would hold 600,000,000 rollout"),
    (["distill.critic=101"], "distill.critic must be an integer from 0 to 100, not 101"),
    (["distill.heuristic_share=2"], "distill.heuristic_share"),
    (["distill.buffer=100", "distill.minibatch=512"],
     "distill.buffer (100) must hold at least one minibatch"),
    (["distill.reuse=0"], "distill.reuse"),
    (["distill.belief_deals=-1"], "distill.belief_deals"),
    (["distill.heldout=-1"], "heldout must be >= 0"),
    (["distill.envs_per_worker=0"], "distill.envs_per_worker"),
    (["distill.enabled=true", "model.critic=obs"], "distill.critic > 0 needs the perfect-information critic"),
    (["distill.enabled=true", "rollout.deterministic=true"], "rollout.deterministic"),
    (["distill.temprature=1"], "temprature"),
    (["distill.precision=fp16"], "distill.precision must be auto, bf16 or fp32, not 'fp16'"),
    (["distill.loss=mse"], "distill.loss must be kl or value, not 'mse'"),
    (["distill.loss=value", "distill.stake=0.5"], "distill.stake weights the KL: with loss: value"),
    (["distill.world=peek"], "distill.world must be sampled or real, not 'peek'"),
    (["distill.world=real"], "distill.worlds must be 1 with world: real (the one real deal), not 16"),
    (["distill.world=real", "distill.worlds=1", "distill.belief_deals=20000"],
     "distill.belief_deals must be 0 with world: real (nothing is dealt), not 20,000"),
])
def test_bad_distill_configs_are_refused_in_one_line(overrides: list[str], words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("quick", overrides)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_stage_is_off_by_default_and_the_expert_config_turns_it_on() -> None:
    cfg = load_config("quick")
    assert not cfg.section("distill").enabled and resolve(cfg.algorithm) is PPO
    expert = load_config(Path(__file__).resolve().parent.parent / "configs" / "expert.yaml")
    assert expert.section("distill").enabled and resolve(expert.algorithm) is ExpertIteration
    assert expert.init_from and expert.section("distill").worlds < 64 \
        and expert.section("distill").candidates < 10


# ---- tiny stages on Ray --------------------------------------------------------------------------------
def _start_checkpoint(path: Path) -> Path:
    """The stage's starting point: a tiny network with a critic, and a hand belief beside it."""
    torch.manual_seed(1)
    net = build_net(32, 1, "full")
    out = ckpt.save_checkpoint(path, net, {"obs_version": 1, "name": "start",
                                           "tables": [{"rules": "hoi_quan_bai", "players": 4}]})
    torch.manual_seed(2)
    save_belief(out, BeliefNet(OBS_SIZE, 16), {"deals": 0, "note": "random weights"})
    return out


def test_a_stage_without_ppo_lowers_the_kl_to_held_out_search_targets(tmp_path: Path) -> None:
    """The CI smoke run: search workers on Ray, the buffer, the supervised updates, TensorBoard."""
    start = _start_checkpoint(tmp_path / "start")
    over = [f"init_from={start}", "distill.ppo=false", "distill.reuse=8", "ppo.lr=2e-3",
            "distill.round_updates=1000", "total_decisions=1900", "checkpoint.every_updates=5"]
    cfg = load_config("quick", [*TINY, *over])
    net, _ = ckpt.load_checkpoint(start)
    held = SearchEngine(cfg, 0, seed=99)  # the starting network's search, on games the run never plays
    belief = load_belief(start)
    held.set_network(weights_to_numpy(net), 0, {"hidden": 16, "weights": weights_to_numpy(belief)})
    held_out = held.play()["batch"]
    before = kl_to_targets(net, held_out, cfg.section("distill").temperature)
    tr = new_loop(cfg, tmp_path / "run", log=lambda m: None)
    assert tr.algo.belief is not None and tr.algo.belief["info"]["from"] == str(start)  # init_from's belief
    summary = tr.run()
    after_net, meta = ckpt.load_checkpoint(summary["checkpoint"])
    after = kl_to_targets(after_net, held_out, cfg.section("distill").temperature)
    assert after["distill_kl"] < 0.85 * before["distill_kl"], (before, after)
    assert summary["decisions_trained"] >= 1900 and summary["distill"]["searched"] >= 1900
    assert summary["workers"] == []  # no rollout workers without PPO
    tags = _scalars(tmp_path / "run")
    kl = [v for _, v in tags["losses/distill_kl"]]
    assert len(kl) >= 10 and np.mean(kl[-3:]) < np.mean(kl[:3])
    # the run's own held-out decisions (every 20th), never trained on: the policy moved towards them too
    own = tr.algo.search_targets.held.rows(np.arange(len(tr.algo.search_targets.held)))
    assert len(own["cands"]) >= 80 and tags["losses/distill_kl_heldout"][-1][1] == pytest.approx(
        summary["distill"]["heldout"]["distill_kl"])
    assert kl_to_targets(after_net, own, 1.0)["distill_kl"] < kl_to_targets(net, own, 1.0)["distill_kl"]
    for tag in ("losses/distill_ce", "charts/search_agreement", "charts/search_la", "charts/round",
                "charts/search_decisions_per_s", "charts/search_changed", "eval/random/mean_la"):
        assert tag in tags, tag
    assert "losses/policy" not in tags
    assert meta.raw["distill"]["round"] == 0 \
        and meta.heuristic_share == cfg.section("distill").heuristic_share
    assert (Path(summary["checkpoint"]) / ckfmt.BELIEF_FILE).is_file()  # searchable as the stage searched


def test_a_round_whose_start_would_not_end_inside_the_budget_is_not_begun(tmp_path: Path) -> None:
    """A round's start (the belief, an evaluation) takes minutes on two cores: begun just before the budget's
    end it would overrun it, so the round in play goes on instead, said once; with time left, or no budget,
    the next round begins and how long its start took is kept."""
    from types import SimpleNamespace
    from training.run.runstate import RunState
    cfg = load_config("quick", [*TINY, "distill.round_updates=4"])
    logs: list[str] = []
    algo = ExpertIteration(cfg, RunState(cfg, tmp_path, "x", logs.append), logs.append)
    begun: list[int] = []
    algo._search_charts = lambda run, step: None                      # type: ignore[method-assign]
    algo._next_round = lambda run: begun.append(algo.state.counters.updates)  # type: ignore[method-assign]
    left = [math.inf]
    run = SimpleNamespace(seconds_left=lambda: left[0])
    algo.state.counters.updates = 3
    algo.after_update(run)
    assert begun == []                                 # round 0 has 4 updates
    algo.state.counters.updates = 4
    algo.after_update(run)
    assert begun == [4] and algo.round_start_s >= 0   # no budget: it begins, its start timed
    algo.round_start_s, left[0] = 70.0, 69.0
    for updates in (5, 6):
        algo.state.counters.updates = updates
        algo.after_update(run)
    assert begun == [4] and logs == ["round 1 is not begun: its start (the belief and an evaluation, 70 s "
                                     "last"
                                     " time) would not end in the 69 s left; round 0 goes on"]
    left[0] = 71.0
    algo.after_update(run)
    assert begun == [4, 6] and len(logs) == 1


def _stop_when(done: Any) -> Any:
    """An on_update hook that ends the sitting (at this update) once ``done(trainer)``."""
    def hook(tr: RunLoop) -> None:
        if done(tr):
            tr.cfg.total_decisions = tr.counters.decisions_trained
    return hook


def test_a_killed_search_worker_is_restarted_and_counted_once(tmp_path: Path) -> None:
    """A search worker's process dies mid-stage: Ray restarts it, its request is asked again, the stage
    goes on to its end, and the failure is counted once (not once per request that failed meanwhile)."""
    import os
    import signal

    over = ["distill.ppo=false", "distill.round_updates=1000", "total_decisions=700",
            "checkpoint.every_updates=1000"]
    cfg = load_config("quick", [*TINY, *over])
    logs: list[str] = []
    killed: list[int] = []

    def kill_at_update_2(tr: RunLoop) -> None:
        if tr.counters.updates == 2 and not killed:
            killed.append(tr.algo.workers.placement[0]["pid"])
            os.kill(killed[0], signal.SIGKILL)

    tr = new_loop(cfg, tmp_path / "run", log=logs.append, on_update=kill_at_update_2)
    summary = tr.run()
    assert killed and summary["decisions_trained"] >= 700
    assert summary["worker_failures"] == 1 and tr.algo.workers.health.failures == [1]
    assert sum("search worker 0 failed" in m for m in logs) == 1
    assert tr.algo.stage_counters.requests > 3  # the killed request was asked again, and the stage went on


def test_a_stage_with_ppo_goes_through_rounds_and_resumes_where_it_was(tmp_path: Path) -> None:
    over = ["distill.round_updates=4", "distill.belief_deals=12", "belief.hidden=16", "belief.epochs=1",
            "rollout.envs_per_worker=32", "rollout.steps_per_rollout=8", "ppo.batch_decisions=200",
            "ppo.minibatch=128", "ppo.epochs=1", "checkpoint.every_updates=3", "checkpoint.keep=20",
            "total_decisions=10000000"]
    cfg = load_config("quick", [*TINY, *over])
    run = tmp_path / "run"
    logs: list[str] = []
    tr = new_loop(cfg, run, log=logs.append,
                  on_update=_stop_when(lambda t: t.algo.stage_counters.round >= 2
                                       and "distill_kl" in t.algo.losses))
    first = tr.run()
    d1 = tr.algo.stage_counters
    assert d1.round >= 2 and first["distill"]["round"] == d1.round
    assert [r["round"] for r in d1.rounds] == list(range(d1.round + 1))
    # no belief to start from: round 0 learns one; each later round's is kept only where it scores better
    verdicts = [re.search(r"hand belief (\w+) .*held-out: new ([\d.]+) nats/card(?:, the round's belief so "
                          r"far "
                          r"([\d.]+))?", m) for m in logs if "hand belief" in m]
    assert [r["belief"] for r in d1.rounds] == [v[1] for v in verdicts] and len(verdicts) == d1.round + 1
    assert verdicts[0][1] == "learned" and verdicts[0][3] is None
    for v in verdicts[1:]:
        assert v[1] == ("learned" if float(v[2]) < float(v[3]) else "kept"), v[0]
    learned_in = max(i for i, v in enumerate(verdicts) if v[1] == "learned")
    tags = _scalars(run)
    for tag in ("losses/policy", "losses/distill_kl", "charts/search_agreement", "charts/round"):
        assert tag in tags, tag
    rounds = [v for _, v in tags["charts/round"]]
    assert rounds == sorted(rounds) and rounds[-1] == d1.round
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    assert [e["round"] for e in evals] == list(range(d1.round + 1))  # the start, then each round's network

    again = new_loop(load_config(run / "config.yaml"), run, resume=True, log=lambda m: None,
                           command="samloc train --resume RUN",
                           on_update=_stop_when(lambda t: t.counters.updates >= first["updates"] + 5))
    assert again.algo.stage_counters == d1  # every counter of the stage, the round included
    saved, _ = ckpt.load_trainer_state(first["checkpoint"])
    for k, v in again.algo.round_weights.items():
        assert np.array_equal(v, saved[f"round.{k}"].numpy())
    assert again.algo.belief is not None and again.algo.belief["info"]["round"] == learned_in
    second = again.run()
    assert second["updates"] >= first["updates"] + 5
    assert again.algo.stage_counters.round >= d1.round and again.algo.stage_counters.requests > d1.requests \
        and again.algo.stage_counters.searched >= d1.searched
    assert again.algo.stage_counters.rounds[:len(d1.rounds)] == d1.rounds
    meta = ckfmt.verify(Path(second["checkpoint"]), trainer=True)
    assert meta.raw["distill"]["round"] == again.algo.stage_counters.round \
        and meta.resumes == ("samloc train --resume RUN",)
    assert [m for m in logs if "rollouts in" in m] == [
        "search worker 0: rollouts in fp32 (distill.precision)"]
    assert meta.raw["distill"]["precision"] == {"0": "fp32"}
