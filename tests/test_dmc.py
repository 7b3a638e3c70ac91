"""Deep Monte-Carlo (training/algorithms/dmc.py): its targets against an independent count of every lá
each seat received, across rollout boundaries; its play; its state in deterministic mode; and a tiny run
through the real loop that checkpoints, resumes, exports and is evaluated like any network."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from agents.nets import checkpoint as ckpt
from training.run import compact
from training.algorithms import resolve
from training.algorithms.dmc import DeepMonteCarlo, MonteCarloEngine, first_end
from training.config_load import load_config
from training.launch import new_loop

ENGINE = ["rollout.envs_per_worker=6", "model.hidden=16", "model.layers=1", "ppo.sam_lesson_coef=0"]


class LoggedEngine(MonteCarloEngine):
    """Also writes down, step by step, every learner decision and every lá each seat receives."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.game_no = defaultdict(int)  # (stream, slot) -> games finished there
        self.decisions: list[tuple[bytes, int, tuple]] = []  # (obs, act, game key, seat, step)
        self.lá: dict[tuple, list[tuple[int, float]]] = defaultdict(list)  # (game key, seat) -> (step, lá)
        self.step = 0

    def stepped(self, st: Any, t: int, seat: np.ndarray, rewards: np.ndarray, done: np.ndarray) -> None:
        i = self.streams.index(st)
        for e in range(st.n):
            key = (i, e, self.game_no[i, e])
            if st.b_valid[t, e]:
                self.decisions.append((st.b_obs[t, e].tobytes(), int(st.b_act[t, e]),
                                       (key, int(seat[e]), self.step)))
            for s in range(st.players):
                self.lá[key, s].append((self.step, float(rewards[e, s])))
            if done[e]:
                self.game_no[i, e] += 1
                self.lá[key, "ended"] = [(self.step, 0.0)]
        self.step += 1
        super().stepped(st, t, seat, rewards, done)


def brute_force_returns(eng: LoggedEngine, scale: float) -> dict[tuple[bytes, int], list[float]]:
    """(obs, move) -> the returns of the decisions made there: the lá their seat received from that step to
    the end of its game, counted from the log alone (decisions of games not ended yet have none)."""
    out: dict[tuple[bytes, int], list[float]] = defaultdict(list)
    for obs, act, (key, seat, step) in eng.decisions:
        if (key, "ended") in eng.lá:
            out[obs, act].append(sum(v for k, v in eng.lá[key, seat] if k >= step) / scale)
    return out


@pytest.mark.parametrize("steps", [1, 5, 16])
def test_the_targets_are_each_decisions_whole_game_return(steps: int) -> None:
    """Every decision shipped carries exactly the lá its seat got from it to the end of its game, however
    many rollouts the game spanned; every decision of a game that ended is shipped once."""
    cfg = load_config("quick", [*ENGINE, f"rollout.steps_per_rollout={steps}",
                                "rollout.opponent_fraction=0.5",
                                "env.players=[3]"])
    eng = LoggedEngine(cfg, 0, 11)
    shipped: dict[tuple[bytes, int], list[float]] = defaultdict(list)
    for _ in range(max(4, 120 // steps)):
        data = compact.expand({k: torch.from_numpy(v) for k, v in eng.rollout()["batch"].items()})
        for o, a, r in zip(data["obs"].numpy(), data["act"].numpy(), data["ret"].numpy()):
            shipped[o.tobytes(), int(a)].append(float(r))
    want = brute_force_returns(eng, cfg.env.reward_scale)
    assert sum(map(len, want.values())) > 60  # games ended, with decisions of many rollouts
    assert shipped.keys() == want.keys()
    for k in want:
        np.testing.assert_allclose(sorted(shipped[k]), sorted(want[k]), atol=1e-5)
    carried = len(eng.streams[0].extra.carry["act"])
    assert carried == sum(1 for *_, (key, _, _) in eng.decisions if (key, "ended") not in eng.lá)


def test_scripted_games_with_chop_money_get_their_exact_returns() -> None:
    """Two game slots over two rollouts of three steps, scripted: a chop paid mid-game, games that end in
    either rollout, a new game begun.  Each decision's return is worked out by hand (lá / reward_scale)."""
    cfg = load_config("quick", [*ENGINE, "rollout.envs_per_worker=2", "rollout.steps_per_rollout=3",
                                "env.players=[3]"])
    eng = MonteCarloEngine(cfg, 0, 1)
    st = eng.streams[0]
    move = iter(range(1, 100))  # each decision's move is its name

    def rollout(script: list[tuple[list[int], list[list[int]], list[bool]]]) -> dict[int, float]:
        for t, (seat, lá, done) in enumerate(script):
            st.b_valid[t] = True
            st.b_act[t] = [next(move), next(move)]
            rewards = np.pad(np.array(lá, dtype=np.int32), ((0, 0), (0, 2)))  # five seats' columns
            eng.stepped(st, t, np.array(seat), rewards, np.array(done))
        out = compact.expand({k: torch.from_numpy(v) for k, v in eng.targets(st, *[None] * 4).items()})
        return dict(zip(out["act"].tolist(), (out["ret"] * cfg.env.reward_scale).tolist()))

    first = rollout([  # slot 0: seat 1 chops seat 0 (4 lá) at step 1; slot 1: its game ends at step 1
        ([0, 2], [[0, 0, 0], [0, 0, 0]], [False, False]),          # moves 1, 2
        ([1, 0], [[-4, 4, 0], [10, -5, -5]], [False, True]),       # moves 3, 4
        ([2, 1], [[0, 0, 0], [0, 0, 0]], [False, False]),          # moves 5, 6 (6: slot 1's new game)
    ])
    assert first == pytest.approx({2: -5, 4: 10})
    second = rollout([
        ([0, 2], [[0, 0, 0], [0, 0, 0]], [False, False]),          # moves 7, 8
        ([1, 0], [[-6, 12, -6], [0, 0, 0]], [True, False]),        # moves 9, 10: slot 0's game ends
        ([2, 1], [[0, 0, 0], [3, -6, 3]], [False, True]),          # moves 11, 12: slot 1's ends
    ])
    assert second == pytest.approx({1: -10, 3: 16, 5: -6, 7: -6, 9: 12,  # slot 0's game: the chop and the end
                                    6: -6, 8: 3, 10: 3, 12: -6})
    assert st.extra.carry["act"].tolist() == [11]  # slot 0's new game goes on


def test_first_end_finds_the_next_game_end() -> None:
    ended = np.array([[0, 1], [1, 0], [0, 0], [1, 1]], dtype=bool)
    assert first_end(ended).tolist() == [[1, 0], [1, 3], [3, 3], [3, 3]]


def test_play_is_epsilon_greedy_and_the_pool_greedy() -> None:
    cfg = load_config("quick", [*ENGINE, "dmc.epsilon=0.25"])
    eng = MonteCarloEngine(cfg, 0, 3)
    logits = torch.tensor([[0.0, 5.0, -1e9, 1.0]]).repeat(4000, 1)
    mask = torch.tensor([[1, 1, 0, 1]], dtype=torch.int8).repeat(4000, 1)
    act, logp = eng.explore(logits, mask)
    share = np.bincount(act.numpy(), minlength=4) / 4000
    assert share[2] == 0 and abs(share[1] - (0.75 + 0.25 / 3)) < 0.03 and abs(share[0] - 0.25 / 3) < 0.02
    assert not logp.any() and eng.pool_choice(logits).eq(1).all()


def test_deterministic_state_carries_the_waiting_decisions() -> None:
    """A rollout continued on a fresh engine from get_state ships what the first engine ships."""
    cfg = load_config("quick", [*ENGINE, "rollout.steps_per_rollout=7"])
    a = MonteCarloEngine(cfg, 0, 5)
    a.rollout()
    state = a.get_state()
    assert len(state["0.carry.act"]) > 0
    b = MonteCarloEngine(cfg, 0, 99)
    b.set_weights({k: v.numpy() for k, v in a.net.state_dict().items()}, 0)
    b.set_state(state)
    a.reseed(42)
    b.reseed(42)
    ra, rb = a.rollout()["batch"], b.rollout()["batch"]
    assert ra.keys() == rb.keys() and all(np.array_equal(ra[k], rb[k]) for k in ra)
    state.pop("0.carry.c0")
    with pytest.raises(ValueError, match="does not fit this DMC engine"):
        b.set_state(state)


TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "rollout.num_workers=1", "model.hidden=16",
        "model.layers=1", "rollout.envs_per_worker=16",
        "rollout.steps_per_rollout=8", "dmc.batch_decisions=100", "eval.every_updates=0",
        "eval.final_deals=0",
        "checkpoint.every_updates=1000", "display=none", "log_every_s=1", "max_minutes=0", "algorithm=dmc"]


@pytest.mark.slow
def test_a_tiny_dmc_run_trains_checkpoints_resumes_and_exports(tmp_path: Path) -> None:
    cfg = load_config("quick", [*TINY, "total_decisions=600"])
    assert resolve(cfg.algorithm) is DeepMonteCarlo
    loop = new_loop(cfg, tmp_path / "run", log=lambda m: None)
    before = {k: v.copy() for k, v in loop.algo.learner.weights().items()}
    summary = loop.run()
    assert summary["updates"] >= 3 and summary["decisions_trained"] >= 600
    assert set(loop.algo.losses) >= {"q_loss", "value_loss", "q_mean", "return_mean"}
    assert np.isfinite(loop.algo.losses["q_loss"])
    after = loop.algo.learner.weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    net, meta = ckpt.load_checkpoint(summary["checkpoint"])
    assert meta.raw["config"]["algorithm"] == "dmc" and meta.updates == summary["updates"]
    resumed = new_loop(load_config(tmp_path / "run" / "config.yaml", ["total_decisions=900"]),
                      tmp_path / "run",
                      resume=True, log=lambda m: None)
    assert isinstance(resumed.algo, DeepMonteCarlo) and resumed.counters.updates == summary["updates"]
    more = resumed.run()
    assert more["updates"] > summary["updates"] and more["decisions_trained"] >= 900
    assert resumed.algo.learner.opt.param_groups[0]["lr"] == cfg.section("dmc").lr


@pytest.mark.slow
def test_the_dmc_network_is_exported_and_evaluated_like_any_other(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from samloc.commands.eval import main as eval_main
    from samloc.commands.export import main as export_main

    summary = new_loop(load_config("quick", [*TINY, "total_decisions=300"]), tmp_path / "run",
                      log=lambda m: None).run()
    assert export_main([summary["checkpoint"], "--out", str(tmp_path / "q.onnx"), "--samples",
                        "50", "--json"]) == 0
    side = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert side["check"]["max_abs_diff"] < 1e-4  # the ONNX file answers as the network does
    assert eval_main(["--agent", str(tmp_path / "run"), "--opponents", "heuristic", "--deals", "8", "--seed",
                      "1",
                      "--json"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["deals"] == 8 and res["zero_sum"] and np.isfinite(res["mean_score"])
