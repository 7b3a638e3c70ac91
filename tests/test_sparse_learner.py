"""The CPU learner's sparse arithmetic (agents/nets/sparse.py) computes what the dense layers compute.

On the observations, masks and hands of random games of every preset: the
packed rollout read as nonzero cells is the dense batch bit for bit; the
network's outputs, its losses and every parameter's gradient agree with the
dense path to float rounding, and under bfloat16 autocast to bfloat16's; a
whole PPO update lands on the same weights.
And an epoch's minibatches learn every row exactly once.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.nets.policy import build_net
from agents.nets.sparse import SparseRows
from sam_env.rules import PRESET_NAMES
from tests.test_compact import random_states
from training.run import compact
from training.algorithms.ppo import PPOConfig
from training.config import LearnerConfig
from training.run.learner import Learner
from training.config_load import load_config
from training.algorithms.losses import minibatch_indices
from training.algorithms.ppo import ppo_update

CPU = torch.device("cpu")


def batches(net: torch.nn.Module, rules: str, players: int, seed: int) -> tuple[dict, dict]:
    """The same decisions of random games, expanded densely and sparsely, with a taken legal action, the
    network's own log-probability of it, and random advantages, returns and Sâm lessons."""
    s = random_states(rules, players, games=24, steps=40, seed=seed)
    n = len(s["obs"])
    rng = np.random.default_rng(seed)
    act = np.array([rng.choice(np.flatnonzero(m)) for m in s["mask"]])
    with torch.no_grad():
        logits, _ = net(torch.from_numpy(s["obs"]), torch.from_numpy(s["mask"]))
    logp = torch.log_softmax(logits, -1)[torch.arange(n), torch.from_numpy(act)].numpy()
    plain = {"logp": logp, "val": rng.standard_normal(n).astype(np.float32),
             "adv": rng.standard_normal(n).astype(np.float32),
             "ret": rng.standard_normal(n).astype(np.float32),
             "teach": np.where(rng.random(n) < 0.1, act, -1).astype(np.int16)}
    packed = compact.to_device(compact.pack(s["obs"], s["mask"], s["hid"], act, plain), CPU)
    dense, sparse = compact.expand(packed), compact.expand(packed, sparse=True)
    for d in (dense, sparse):
        d["lag"] = torch.zeros(n, dtype=torch.int64)
    return dense, sparse


def loss_of(net: torch.nn.Module, data: dict, rows: torch.Tensor, bf16: bool = False) -> torch.Tensor:
    """PPO's terms (policy, value, critic, entropy, lesson) on ``rows``, as ppo_update combines them
    (``bf16``:
    the network under bfloat16 autocast, the loss in float32, as ppo_update runs it)."""
    mask = data["mask"][rows]
    with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
        out = net.train_forward(data["obs"][rows], mask, data["hid"][rows])
    logits, value, base = (t.float() for t in out)
    logp_all = torch.log_softmax(logits, -1)
    ratio = (logp_all.gather(1, data["act"][rows][:, None]).squeeze(-1) - data["logp"][rows]).exp()
    adv = data["adv"][rows]
    pg = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
    v = 0.5 * ((value - data["ret"][rows]) ** 2).mean() + 0.5 * ((base - data["ret"][rows]) ** 2).mean()
    entropy = -(torch.softmax(logits, -1) * logp_all.masked_fill(mask <= 0, 0.0)).sum(-1).mean()
    teach = data["teach"][rows]
    lesson = -logp_all[teach >= 0].gather(1, teach[teach >= 0].long()[:, None]).mean()
    return pg + 0.5 * v - 0.01 * entropy + lesson


CASES = [(rules, p) for rules in PRESET_NAMES for p in (2, 4)]


@pytest.mark.parametrize("rules,players", CASES)
def test_sparse_rows_are_the_dense_batch_bit_for_bit(rules: str, players: int) -> None:
    dense, sparse = batches(build_net(64, 2, "full"), rules, players, seed=players)
    assert torch.equal(sparse["obs"].dense(), dense["obs"])
    assert torch.equal(sparse["hid"].dense(), dense["hid"].float())
    assert torch.equal(sparse["mask"], dense["mask"])
    again = SparseRows.from_dense(dense["obs"])  # the other way in: the same cells
    assert torch.equal(again.dense(), dense["obs"])
    assert sorted(map(int, again.vals.count_nonzero(1))) == sorted(map(int,
                                                                       sparse["obs"].vals.count_nonzero(1)))
    assert sparse["obs"].shape == dense["obs"].shape and len(sparse["obs"]) == len(dense["obs"])


@pytest.mark.parametrize("critic", ["full", "obs"])
@pytest.mark.parametrize("rules,players", CASES)
def test_outputs_losses_and_gradients_match_the_dense_network(rules: str, players: int, critic: str) -> None:
    torch.manual_seed(players)
    net = build_net(128, 3, critic).train()
    dense, sparse = batches(net, rules, players, seed=10 + players)
    rows = torch.randperm(len(dense["act"]))[:700]
    out = {}
    for name, data in (("dense", dense), ("sparse", sparse)):
        net.zero_grad()
        logits, value, base = net.train_forward(data["obs"][rows], data["mask"][rows], data["hid"][rows])
        loss = loss_of(net, data, rows)
        loss.backward()
        out[name] = (logits.detach(), value.detach(), base.detach(), loss.detach(),
                     {k: p.grad.clone() for k, p in net.named_parameters()})
    (ld, vd, bd, lossd, gd), (ls, vs, bs, losss, gs) = out["dense"], out["sparse"]
    legal = dense["mask"][rows] > 0
    assert torch.equal(ls[~legal], ld[~legal])  # MASK_LOGIT, exactly
    torch.testing.assert_close(ls[legal], ld[legal], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(vs, vd, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bs, bd, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(losss, lossd, rtol=1e-5, atol=1e-6)
    assert gd.keys() == gs.keys()
    for k in gd:
        assert gd[k].abs().max() > 0, k  # every parameter is trained: a zero gradient would compare trivially
        torch.testing.assert_close(gs[k], gd[k], rtol=1e-4, atol=1e-5 * float(gd[k].abs().max()), msg=k)


def test_the_sparse_forward_plays_as_the_dense_one() -> None:
    """``forward`` (the stale rows' proximal policy) on nonzero cells: the served forward's numbers."""
    net = build_net(64, 2, "full").eval()
    dense, sparse = batches(net, "online", 3, seed=4)
    with torch.no_grad():
        ld, vd = net(dense["obs"], dense["mask"])
        ls, vs = net(sparse["obs"], sparse["mask"])
    torch.testing.assert_close(ls, ld, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(vs, vd, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stale", [False, True])
def test_a_ppo_update_lands_on_the_same_weights(stale: bool) -> None:
    torch.manual_seed(0)
    net = build_net(128, 2, "full")
    dense, sparse = batches(net, "hoi_quan_bai", 4, seed=7)
    lcfg = LearnerConfig(precision="fp32")
    cfg = PPOConfig(minibatch=1000, epochs=2, lr=1e-3, correct_from_lag=1)
    result = {}
    for name, data in (("dense", dense), ("sparse", sparse)):
        if stale:  # half the rows a few updates old: the proximal policy's forward runs too
            data["lag"] = torch.arange(len(data["act"])) % 2
        twin = copy.deepcopy(net)
        quick = load_config("quick", [])
        learner = Learner(quick.model, quick.learner, cfg.lr)
        learner.net = twin  # the learner's one gradient step, on the twin with an optimizer of its own
        opt = torch.optim.Adam(twin.parameters(), lr=cfg.lr, eps=1e-5)
        losses = ppo_update(twin, lambda loss: learner.step(loss, cfg.max_grad_norm, opt), data, cfg, lcfg,
                            torch.Generator().manual_seed(3))
        result[name] = losses, dict(twin.named_parameters())
    (ld, pd), (ls, ps) = result["dense"], result["sparse"]
    assert ld.keys() == ls.keys()
    for k in ld:
        assert ls[k] == pytest.approx(ld[k], rel=1e-4, abs=1e-6), k
    for k in pd:
        moved = float((pd[k].detach() - net.state_dict()[k]).abs().max())
        assert moved > 0, k
        torch.testing.assert_close(ps[k], pd[k], rtol=0, atol=1e-3 * moved, msg=k)


def _grads(net: torch.nn.Module, data: dict, rows: torch.Tensor, bf16: bool) -> tuple[torch.Tensor, dict]:
    net.zero_grad()
    loss = loss_of(net, data, rows, bf16)
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in net.named_parameters()}


@pytest.mark.parametrize("critic", ["full", "obs"])
@pytest.mark.parametrize("rules,players", [("online", 4), ("hoi_quan_bai", 2)])
def test_under_bf16_autocast_the_sparse_path_matches_the_dense_one(rules: str, players: int,
                                                                   critic: str) -> None:
    """The kernels run in float32 inside a bfloat16 region: the loss and every gradient (float32, for the
    float32 weights) agree with the dense layers' under autocast to bfloat16's rounding, and autocast did
    change both paths' numbers (so the comparison is not fp32 against fp32)."""
    torch.manual_seed(players)
    net = build_net(128, 3, critic).train()
    dense, sparse = batches(net, rules, players, seed=20 + players)
    rows = torch.randperm(len(dense["act"]))[:700]
    loss_d, grad_d = _grads(net, dense, rows, bf16=True)
    loss_s, grad_s = _grads(net, sparse, rows, bf16=True)
    loss_f, grad_f = _grads(net, sparse, rows, bf16=False)
    torch.testing.assert_close(loss_s, loss_d, rtol=1e-2, atol=1e-3)
    assert not torch.equal(loss_s, loss_f)  # autocast reached the sparse path's later layers
    assert grad_d.keys() == grad_s.keys()
    for k, p in net.named_parameters():
        assert p.dtype == grad_s[k].dtype == torch.float32, k
        assert grad_d[k].abs().max() > 0, k
        err = float((grad_s[k] - grad_d[k]).norm() / grad_d[k].norm())
        assert err < 0.05, (k, err)  # bf16 rounding: up to ~2% here, as far as the dense path is from fp32


def test_the_learner_takes_sparse_rows_on_a_cpu_in_any_precision_and_not_on_a_gpu() -> None:
    for precision in ("auto", "fp32", "bf16"):
        named = load_config("quick", [f"learner.precision={precision}"])
        learner = Learner(named.model, named.learner, 1e-3)
        assert learner.sparse_input(), precision
        learner.device = torch.device("cuda")  # what sparse_input reads (no GPU is needed to ask)
        assert not learner.sparse_input(), precision


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 5000), size=st.integers(1, 5000), seed=st.integers(0, 2**31))
def test_an_epoch_learns_every_row_exactly_once(n: int, size: int, seed: int) -> None:
    parts = minibatch_indices(n, size, torch.Generator().manual_seed(seed))
    lengths = [len(p) for p in parts]
    assert len(parts) == -(-n // size)
    assert max(lengths) <= size and max(lengths) - min(lengths) <= 1
    assert torch.equal(torch.cat(parts).sort().values, torch.arange(n))
    again = minibatch_indices(n, size, torch.Generator().manual_seed(seed))
    assert all(torch.equal(a, b) for a, b in zip(parts, again))


def test_the_quick_config_no_longer_drops_a_third_of_each_epoch() -> None:
    """12,000 decisions in minibatches of 4,096: three of 4,000, not two of 4,096 and 3,808 rows left out."""
    parts = minibatch_indices(12000, 4096, torch.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [4000, 4000, 4000]
