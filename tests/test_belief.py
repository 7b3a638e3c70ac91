"""The hand belief (training/tools/belief.py) and the worlds search deals with it (agents/players/search.py):
labels, believed dealing against its uniform special case, training, files and their errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import make_agent
from agents.players.policy_agent import load_policy_agent
from agents.players.search import _expand
from conftest import play_positions
from sam_env import core
from sam_env import obs as obs_mod
from sam_env.actions import ACTION_TABLE_VERSION
from agents.nets import belief as NB
from agents.nets.checkpoint import save_checkpoint
from sam_env.table import Table
from agents.nets.policy import build_net
from sam_env.game import Game
from sam_env.rules import RuleSet
from samloc.commands.belief import main as belief_main
from training.tools import belief as B

NR, P = core.NR, core.MAX_PLAYERS
SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "standard"


def _positions(count: int, seed: int, players: int = 4) -> list[Game]:
    """Games stopped at random play decisions with a real choice."""
    return play_positions(count, seed, players, play_only=True)


def _tiny_checkpoint(path: Path, rules: tuple[str, ...] = ("hoi_quan_bai",),
                     players: tuple[int, ...] = (4,)) -> Path:
    torch.manual_seed(0)
    net = build_net(32, 2, "full")
    return save_checkpoint(path, net, {
        "name": "tiny", "rules": list(rules), "players": list(players), "obs_version": obs_mod.OBS_VERSION,
        "action_table_version": ACTION_TABLE_VERSION,
        "config": {"rollout": {"opponent_fraction": 0.5, "heuristic_share": 1.0},
                   "env": {"reward_scale": 20.0, "rules": list(rules), "players": list(players)}}})


# ---- labels ------------------------------------------------------------------------------------
@pytest.mark.parametrize("players", [2, 3, 4, 5])
def test_labels_are_the_other_hands_seen_from_the_seat_and_the_undealt_rest(players: int):
    for g in _positions(15, seed=players, players=players):
        seat, n = g.to_act, g.players
        t = B.targets(g.state[None, :])[0].astype(np.int64)
        for d in range(1, P):
            want = np.bincount([c // 4 for c in g.hand((seat + d) % n)], minlength=NR) if d < n else 0
            assert (t[d] == want).all()
        assert t[0].sum() == 52 - 10 * n and (t >= 0).all()
        own = np.bincount([c // 4 for c in g.hand(seat)], minlength=NR)
        played = g.state[core.O_PLAYED:core.O_PLAYED + P * NR].reshape(P, NR).sum(0)
        assert (t.sum(0) + own + played == 4).all()


# ---- believed worlds ------------------------------------------------------------------------------
def _worlds(g: Game, share: np.ndarray, worlds: int, seed: int = 3) -> np.ndarray:
    cands = np.array([[int(np.flatnonzero(g.legal_mask())[0])]], dtype=np.int64)
    out = np.zeros((worlds, core.STATE_SIZE), dtype=np.int32)
    seats = np.zeros(worlds, dtype=np.int64)
    _expand(g.state[None, :], g.rules_array, np.zeros(1, dtype=np.int64), cands, 1, worlds, seed, out,
            seats, share, False)
    return out


def _places(g: Game, rows: np.ndarray) -> np.ndarray:
    """Cards per place and rank in each world (places as in the belief: 0 undealt, d the d-th seat after)."""
    seat, n = g.to_act, g.players
    out = np.zeros((rows.shape[0], P, NR), dtype=np.int64)
    unseen = B.targets(g.state[None, :])[0].astype(np.int64).sum(0)
    for d in range(1, n):
        s = (seat + d) % n
        out[:, d] = rows[:, core.O_HAND + s * NR:core.O_HAND + s * NR + NR]
    out[:, 0] = unseen[None, :] - out[:, 1:].sum(1)
    return out


def test_a_flat_belief_deals_like_the_uniform_deal_and_keeps_every_hand_size():
    g = _positions(1, seed=7)[0]
    seat, n = g.to_act, g.players
    t = B.targets(g.state[None, :])[0].astype(np.float64)
    room = t.sum(1)
    flat = np.repeat((room / room.sum())[None, :, None], NR, axis=2)  # the prior itself
    worlds = 3000
    rows = _worlds(g, flat, worlds)
    cards = _places(g, rows)
    assert (cards >= 0).all()
    for d in range(1, n):
        assert (cards[:, d].sum(1) == room[d]).all()
    # each unseen card lies at a place with probability room / all unseen (hypergeometric means)
    expect = t.sum(0)[None, :] * room[:, None] / room.sum()
    sd = np.sqrt(expect.clip(0.05) / worlds)
    assert (np.abs(cards.mean(0) - expect) < 5 * sd).all()
    uniform = _places(g, _worlds(g, np.zeros((0, P, NR)), worlds))
    assert (np.abs(uniform.mean(0) - expect) < 5 * sd).all()
    assert seat == g.to_act


def test_a_sure_belief_puts_the_cards_where_it_says():
    for g in _positions(10, seed=8):
        t = B.targets(g.state[None, :])[0].astype(np.int64)
        unseen, room = t.sum(0), t.sum(1)
        r = int(np.argmax(unseen))  # the rank with the most unseen cards
        if unseen[r] > room[1]:
            continue
        share = np.full((1, P, NR), 0.25)
        share[0, 1, :] = 1e-9  # the next seat holds nothing but rank r, as far as it is believed
        share[0, :, r] = 1e-9
        share[0, 1, r] = 1.0
        cards = _places(g, _worlds(g, share, 50))
        assert (cards[:, 1, r] == unseen[r]).all(), "every world gives the believed seat all of the rank"
        assert (cards[:, 1].sum(1) == room[1]).all()


# ---- training and files -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    # a checkpoint for two rule sets and two player counts: the deals are shared among the four tables
    ckpt = _tiny_checkpoint(tmp_path_factory.mktemp("belief") / "ckpt", ("hoi_quan_bai", "online"), (3, 4))
    assert belief_main([str(ckpt), "--deals", "62", "--epochs", "2", "--hidden", "16", "--seed", "4"]) == 0
    return ckpt, json.loads((ckpt / NB.BELIEF_META).read_text())


@pytest.mark.slow
def test_samloc_belief_trains_and_saves_a_belief_that_search_uses(trained: tuple[Path, dict]):
    ckpt, info = trained
    assert info["format"] == NB.BELIEF_FORMAT and info["hidden"] == 16 and info["deals"] == 62
    assert info["tables"] == [{"rules": r, "players": p} for r in ("hoi_quan_bai", "online") for p in (3, 4)]
    assert info["heuristic_share"] == 0.5 and info["decisions"] > 500
    assert info["command"].startswith("samloc belief ") and info["wall_time_s"] > 0
    assert np.isfinite(info["holdout_nll"]) and info["uniform_nll"] > 0
    net = NB.load_belief(ckpt)
    obs = np.random.default_rng(0).random((5, obs_mod.OBS_SIZE)).astype(np.float32)
    s = net.shares(obs)
    assert s.shape == (5, P, NR) and np.allclose(s.sum(1), 1.0)
    searched = make_agent(f"{ckpt}+search:candidates=2,worlds=3,horizon=1", seed=1)
    assert searched.settings["belief"] == 1 and searched.belief is not None
    assert make_agent(f"{ckpt}+search:candidates=2,worlds=3,horizon=1,belief=0").belief is None
    for g in _positions(5, seed=9):
        assert g.legal_mask()[searched.act(g, g.to_act)] == 1


def test_a_broken_or_missing_belief_is_refused_with_a_clear_error(trained: tuple[Path, dict], tmp_path: Path):
    ckpt, _ = trained
    bare = _tiny_checkpoint(tmp_path / "bare")
    assert NB.load_belief(bare) is None
    assert make_agent(f"{bare}+search:candidates=2,worlds=3").belief is None
    with pytest.raises(ValueError, match="has no belief network"):
        make_agent(f"{bare}+search:belief=1")
    with pytest.raises(ValueError, match="belief must be 1 .* or 0"):
        make_agent(f"{ckpt}+search:belief=2")
    import shutil
    for name, damage in ((NB.BELIEF_FILE, lambda p: p.write_bytes(p.read_bytes()[:100])),
                         (NB.BELIEF_META, lambda p: p.write_text("{not json")),
                         (NB.BELIEF_META, lambda p: p.write_text(json.dumps(
                             {**json.loads((ckpt / NB.BELIEF_META).read_text()), "obs_version": 99}))),
                         (NB.BELIEF_META, lambda p: p.write_text(json.dumps(
                             {**json.loads((ckpt / NB.BELIEF_META).read_text()), "hidden": 32})))):
        bad = tmp_path / f"bad_{name}_{damage.__code__.co_firstlineno}"
        shutil.copytree(ckpt, bad)
        damage(bad / name)
        with pytest.raises(ValueError, match="belief") as info:
            make_agent(f"{bad}+search")
        assert str(bad) in str(info.value) and "\n" not in str(info.value)
    assert load_policy_agent(ckpt) is not None  # the policy itself is untouched


def test_a_new_belief_is_scored_against_the_one_it_replaces_on_the_same_held_out_decisions(tmp_path: Path):
    """The same data and seed learn the same belief again, so the replaced one must score exactly the
    new one's held-out loss: a different held-out set, or none, would not."""
    policy = load_policy_agent(_tiny_checkpoint(tmp_path / "c"))
    obs, tgt = B.collect(policy, 0.5, 40, [Table(RuleSet.preset("hoi_quan_bai"), 4)], seed=3)
    first, losses = B.fit(obs, tgt, hidden=16, epochs=1, seed=5)
    assert "incumbent_nll" not in losses
    again, scored = B.fit(obs, tgt, hidden=16, epochs=1, seed=5, incumbent=first)
    assert scored["incumbent_nll"] == pytest.approx(scored["holdout_nll"], abs=1e-4)
    flat = NB.BeliefNet(obs_mod.OBS_SIZE, 16)
    # a fifth of each card per place
    torch.nn.init.zeros_(flat.out.weight), torch.nn.init.zeros_(flat.out.bias)
    _, vs_flat = B.fit(obs, tgt, hidden=16, epochs=1, seed=5, incumbent=flat)
    assert vs_flat["incumbent_nll"] == pytest.approx(np.log(P), abs=1e-5)


@pytest.mark.slow
def test_samloc_belief_says_what_the_belief_it_replaces_scores(trained: tuple[Path, dict], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture):
    import shutil
    ckpt = shutil.copytree(trained[0], tmp_path / "again")
    assert belief_main([str(ckpt), "--deals", "62", "--epochs", "2", "--hidden", "16", "--seed", "4"]) == 0
    info = json.loads((ckpt / NB.BELIEF_META).read_text())
    assert "incumbent_nll" not in trained[1]  # the first belief replaced nothing
    assert info["incumbent_nll"] == pytest.approx(info["holdout_nll"], abs=1e-4)  # the same recipe again
    assert f"the replaced belief {info['incumbent_nll']:.4f}" in capsys.readouterr().out


def test_the_belief_command_refuses_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture):
    assert belief_main([str(tmp_path)]) == 2
    assert "not a checkpoint folder" in capsys.readouterr().err
    ckpt = _tiny_checkpoint(tmp_path / "c")
    assert belief_main([str(ckpt), "--deals", "0"]) == 2
    assert "--deals: must be from 1 to 10,000,000, not 0" in capsys.readouterr().err
    assert not (ckpt / NB.BELIEF_FILE).exists()


@pytest.mark.slow
def test_the_shipped_belief_knows_more_than_the_uniform_deal():
    """On fresh deals (not its training deals) the shipped belief gives the true hands a
    higher likelihood than the uniform deal does."""
    if not (SHIPPED / NB.BELIEF_FILE).is_file():
        pytest.skip("no shipped belief")
    net = NB.load_belief(SHIPPED)
    policy = load_policy_agent(SHIPPED)
    obs, tgt = B.collect(policy, 0.72, 150, [Table(RuleSet.preset("hoi_quan_bai"), 4)], seed=987654)
    o, t = torch.from_numpy(obs.astype(np.float32)), torch.from_numpy(tgt.astype(np.float32))
    with torch.no_grad():
        learned = float(B.nll(net(o), t))
        uniform = float(-(t * B._prior_log_shares(o, t)).sum() / t.sum())
    assert learned < uniform - 0.02, (learned, uniform)


def test_collect_shares_the_deals_among_the_tables(tmp_path: Path):
    policy = load_policy_agent(_tiny_checkpoint(tmp_path / "c"))
    tables = [Table(RuleSet.preset("hoi_quan_bai"), 3), Table(RuleSet.preset("online"), 4)]
    obs, tgt = B.collect(policy, 0.5, 9, tables, seed=2)
    one_hot = obs[:, obs_mod.F_PLAYERS:obs_mod.F_PLAYERS + 4].astype(np.float32)  # player count 2…5
    players = 2 + one_hot.argmax(1)
    assert set(players.tolist()) == {3, 4} and len(obs) == len(tgt)
    for n in (3, 4):  # the undealt stock: 52 - 10 n cards at every decision of an n-player table
        assert (tgt[players == n, 0].sum(1) == 52 - 10 * n).all()
