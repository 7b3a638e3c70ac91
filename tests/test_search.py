"""Play-time search (agents/players/search.py): worlds consistent with the seat's knowledge,
no peeking, legal and reproducible choices, specs and their errors."""

from __future__ import annotations

import random
import re
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from agents import make_agent
from agents.evaluation.eval_report import write_report
from agents.evaluation.evaluate import evaluate
from agents.players.policy_agent import PolicyAgent, load_policy_agent
from agents.players.search import (DEFAULTS, PAD_ROWS, SearchAgent, _apply_all, _expand, _legal_argmax,
                                   parse_search_spec, search_targets)
from agents.players.search_settings import MAX_SEARCH_BYTES, ROW_BYTES
from conftest import play_positions
from sam_env import core
from sam_env import obs as obs_mod
from sam_env.actions import NUM_ACTIONS
from sam_env.cards import cards_str
from sam_env.game import Game
from sam_env.rules import RuleSet
from sam_env.table import Table
from agents.nets.policy import build_net

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "standard"
NR = core.NR


def _positions(count: int, seed: int, players: int = 4) -> list[tuple[Game, int]]:
    """(full game, seat to act) at random points of heuristic-vs-random games, choices only."""
    return [(g, g.to_act) for g in play_positions(count, seed, players)]


def _others_redealt(state: np.ndarray, seat: int, players: int, seed: int) -> np.ndarray:
    """A copy of ``state`` with the other seats' cards shuffled among them (each keeps its hand size)."""
    st = state.copy()
    others = [s for s in range(players) if s != seat]
    pool = [r for s in others for r in range(NR) for _ in range(st[core.O_HAND + s * NR + r])]
    random.Random(seed).shuffle(pool)
    for s in others:
        st[core.O_HAND + s * NR:core.O_HAND + s * NR + NR] = 0
        for _ in range(st[core.O_SIZE + s]):
            st[core.O_HAND + s * NR + pool.pop()] += 1
    return st


@pytest.fixture(scope="module")
def shipped() -> SearchAgent:
    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("no shipped checkpoint")
    return make_agent(f"{SHIPPED}+search:candidates=3,worlds=4,horizon=1", seed=5)


# ---- the worlds -----------------------------------------------------------------------------
def test_worlds_keep_what_the_seat_knows_and_deal_only_unseen_cards():
    pos = _positions(40, seed=1)
    states = np.stack([g.state for g, _ in pos])
    rule_array = pos[0][0].rules_array
    k, worlds = 2, 5
    cands = np.full((len(pos), k), -1, dtype=np.int64)
    for i, (g, _) in enumerate(pos):
        cands[i, 0] = int(np.flatnonzero(g.legal_mask())[0])
    out = np.zeros((len(pos) * worlds * k, core.STATE_SIZE), dtype=np.int32)
    seats = np.zeros(out.shape[0], dtype=np.int64)
    flat = np.zeros((0, core.MAX_PLAYERS, NR))
    assert _expand(states, rule_array, np.arange(len(pos)), cands, k, worlds, 3, out, seats, flat, False) \
        == out.shape[0]
    seen_other_deals = 0
    for i, (g, seat) in enumerate(pos):
        n = g.players
        before = g.state
        unseen = 4 - before[core.O_HAND + seat * NR:core.O_HAND + seat * NR + NR].copy()
        for s in range(n):
            unseen -= before[core.O_PLAYED + s * NR:core.O_PLAYED + s * NR + NR]
        for w in range(worlds):
            for c in range(k):
                row = out[(i * worlds + w) * k + c]
                assert seats[(i * worlds + w) * k + c] == seat
                # the world before the move: the deal of this row, with the first candidate undone
                world = before.copy()
                dealt = np.zeros(NR, dtype=np.int64)
                for s in range(n):
                    if s != seat:
                        hs = row[core.O_HAND + s * NR:core.O_HAND + s * NR + NR].astype(np.int64)
                        played_now = row[core.O_PLAYED + s * NR:core.O_PLAYED + s * NR + NR] \
                            - before[core.O_PLAYED + s * NR:core.O_PLAYED + s * NR + NR]
                        assert (played_now == 0).all()  # only the searching seat moved
                        assert hs.sum() == before[core.O_SIZE + s]
                        dealt += hs
                        world[core.O_HAND + s * NR:core.O_HAND + s * NR + NR] = hs
                assert (dealt <= unseen).all(), "a world dealt a card the seat has seen"
                if c == 0:
                    core.apply_action(world, rule_array, int(cands[i, 0]))
                    assert (world == row).all(), "the candidate move, applied to the world"
                else:  # an empty candidate slot repeats the first move in the same world
                    assert (out[(i * worlds + w) * k] == row).all()
            hs0 = out[(i * worlds) * k, core.O_HAND:core.O_HAND + n * NR]
            if w and (out[(i * worlds + w) * k, core.O_HAND:core.O_HAND + n * NR] != hs0).any():
                seen_other_deals += 1
    assert seen_other_deals > 0  # worlds differ


def test_the_true_world_plays_each_candidate_in_the_real_deal_as_a_move_by_move_playout_does():
    """true_world (expert iteration's targets, never a player): each candidate's value is what the greedy
    policy in every seat makes of it in the game's own deal, here played to the end move by move with
    Game objects (an independent playout); no seed enters, and the other seats' cards do."""
    torch.manual_seed(4)
    policy = PolicyAgent(build_net(32, 2, "full"), name="tiny")
    agent = SearchAgent(policy, 3, 1, -1, bf16=False, seed=1, true_world=True)
    pos = _positions(16, seed=21)
    states = np.stack([g.state for g, _ in pos])
    masks = np.stack([g.legal_mask() for g, _ in pos]).astype(np.int8)
    rule_array = pos[0][0].rules_array
    res = agent.search_batch(states.copy(), rule_array, None, masks)
    assert len(res.rows) > 8
    for i, r in enumerate(res.rows):
        g, seat = pos[r]
        for c, v in zip(res.cands[i], res.values[i]):
            if c < 0:
                continue
            h = g.copy()
            h.apply(int(c))
            while not h.finished:
                h.apply(policy.act(h, h.to_act))
            assert v == h.state[core.O_SCORE + seat], f"row {r}, candidate {c}"
    again = SearchAgent(policy, 3, 1, -1, bf16=False, seed=2, true_world=True)
    again_values = again.search_batch(states.copy(), rule_array, None, masks).values
    np.testing.assert_array_equal(again_values, res.values)
    # the other seats' cards dealt again among them: other values
    shuffled = np.stack([_others_redealt(g.state, seat, g.players, j) for j, (g, seat) in enumerate(pos)])
    assert not np.array_equal(agent.search_batch(shuffled, rule_array, None, masks).values, res.values)
    assert agent.settings["true_world"] == 1
    with pytest.raises(ValueError, match="worlds must be 1 and no belief given, not worlds=2"):
        SearchAgent(policy, 3, 2, -1, true_world=True)


# ---- choices ---------------------------------------------------------------------------------------
def test_search_never_peeks_and_is_legal_and_reproducible(shipped: SearchAgent):
    pos = _positions(24, seed=2)
    for g, seat in pos:
        a = shipped.act(g, seat)
        assert g.legal_mask()[a] == 1
        view = Game.from_view(g.rules, g.players, g.opener, seat, cards_str(g.hand(seat)), g.events)
        assert shipped.act(view, seat) == a  # the seat's view alone: same move
        st = _others_redealt(g.state, seat, g.players, seat)  # other seats' cards shuffled: same move
        mask = g.legal_mask()[None, :].astype(np.int8)
        assert shipped.act_batch(st[None, :], g.rules_array, None, mask)[0] == a
    states = np.stack([g.state for g, _ in pos])
    masks = np.stack([g.legal_mask() for g, _ in pos]).astype(np.int8)
    batch = shipped.act_batch(states, pos[0][0].rules_array, None, masks)
    assert batch.tolist() == [shipped.act(g, s) for g, s in pos]  # batching changes nothing


def test_search_changes_some_policy_moves_and_leaves_forced_ones(shipped: SearchAgent):
    pos = _positions(60, seed=3)
    states = np.stack([g.state for g, _ in pos])
    masks = np.stack([g.legal_mask() for g, _ in pos]).astype(np.int8)
    rule_array = pos[0][0].rules_array
    searched = shipped.act_batch(states, rule_array, None, masks)
    greedy = shipped.policy.act_batch(states, rule_array, None, masks)
    assert (searched != greedy).any(), "search that never departs from the policy does nothing"
    g = Game.new("hoi_quan_bai", 4, seed=11)
    while int(g.legal_mask().sum()) > 1 or g.state[core.O_PHASE] != core.PH_PLAY:
        g.apply(int(np.flatnonzero(g.legal_mask())[-1]))
    assert shipped.act(g, g.to_act) == int(np.flatnonzero(g.legal_mask())[0])


def test_rollouts_to_the_end_or_an_own_value_leaf_need_no_critic():
    torch.manual_seed(0)
    bare = PolicyAgent(build_net(32, 2, "obs"), name="bare")
    with pytest.raises(ValueError, match="no critic.*critic=0.*horizon=-1"):
        SearchAgent(bare, 3, 4, 1)
    for agent in (SearchAgent(bare, 3, 4, -1, bf16=False), SearchAgent(bare, 3, 4, 1, critic=0, bf16=False)):
        for g, seat in _positions(10, seed=4):
            assert g.legal_mask()[agent.act(g, seat)] == 1
    full = PolicyAgent(build_net(32, 2, "full"), name="full")
    for h in (0, 2):
        agent = SearchAgent(full, 2, 3, h, bf16=False)
        for g, seat in _positions(6, seed=5 + h):
            assert g.legal_mask()[agent.act(g, seat)] == 1


def test_the_leaf_blends_the_critic_and_the_own_value_head():
    torch.manual_seed(3)
    net = build_net(32, 2, "full").eval()
    obs = torch.rand(7, obs_mod.OBS_SIZE)
    hands = torch.rand(7, obs_mod.FULL_EXTRA)
    with torch.no_grad():
        critic = net.baseline(obs, hands)
        own = net(obs, torch.ones(7, NUM_ACTIONS))[1]
        assert not torch.allclose(critic, own)
        torch.testing.assert_close(net.leaf_value(obs, hands, 1.0), critic)
        torch.testing.assert_close(net.leaf_value(obs, hands, 0.0), own)
        torch.testing.assert_close(net.leaf_value(obs, hands, 0.25), 0.25 * critic + 0.75 * own)
        with pytest.raises(ValueError, match="no critic"):
            build_net(32, 2, "obs").leaf_value(obs, hands, 0.5)


def test_search_batch_says_what_it_searched_and_plays_what_act_batch_plays():
    """Rows are the real play choices; their candidates are the policy's most probable legal moves,
    each valued by its rollouts (to the end here: means of whole lá over the worlds); the move played
    is the best candidate, the policy's own everywhere else."""
    torch.manual_seed(2)
    policy = PolicyAgent(build_net(32, 2, "full"), name="tiny")
    k, worlds = 4, 5
    agent = SearchAgent(policy, k, worlds, -1, bf16=False, seed=9)
    pos = _positions(40, seed=12)
    g0 = Game.new("hoi_quan_bai", 4, seed=11)  # and a forced move
    while int(g0.legal_mask().sum()) > 1 or g0.state[core.O_PHASE] != core.PH_PLAY:
        g0.apply(int(np.flatnonzero(g0.legal_mask())[-1]))
    pos.append((g0, g0.to_act))
    states = np.stack([g.state for g, _ in pos])
    masks = np.stack([g.legal_mask() for g, _ in pos]).astype(np.int8)
    rule_array = pos[0][0].rules_array
    res = agent.search_batch(states.copy(), rule_array, None, masks)
    legal = masks.sum(1)
    want = np.flatnonzero((legal > 1) & (states[:, core.O_PHASE] == core.PH_PLAY))
    assert res.rows.tolist() == want.tolist() and 0 < len(want) < len(pos)
    assert res.acts.tolist() == agent.act_batch(states.copy(), rule_array, None, masks).tolist()
    greedy = policy.act_batch(states, rule_array, None, masks)
    others = np.setdiff1d(np.arange(len(pos)), res.rows)
    assert (res.acts[others] == greedy[others]).all()
    assert res.cands.shape == res.values.shape == (len(want), k)
    for i, r in enumerate(res.rows):
        c, v = res.cands[i], res.values[i]
        n = min(k, int(legal[r]))
        assert (c[:n] >= 0).all() and (c[n:] == -1).all() and len(set(c[:n].tolist())) == n
        assert c[0] == greedy[r] and (masks[r, c[:n]] == 1).all()
        assert np.isfinite(v[:n]).all() and np.isneginf(v[n:]).all()
        np.testing.assert_allclose(v[:n] * worlds, np.rint(v[:n] * worlds), atol=1e-9)  # whole lá
        assert res.acts[r] == c[int(np.argmax(v))]
    assert (res.acts[res.rows] != res.cands[:, 0]).any(), "a search that never departs from the policy"


def test_rollout_batches_are_padded_to_a_multiple_of_the_pad_and_keep_each_rows_move():
    """The network sees a few shapes (a multiple of PAD_ROWS, less than one PAD_ROWS of padding), and the
    padding rows change no real row's move."""
    torch.manual_seed(4)
    policy = PolicyAgent(build_net(32, 2, "full"), name="tiny")
    agent = SearchAgent(policy, 3, 4, 1, bf16=False)
    seen: list[int] = []
    trunk = agent.fast_net.trunk
    agent.fast_net.trunk = lambda obs: (seen.append(obs.shape[0]), trunk(obs))[1]
    pos = _positions(2 * PAD_ROWS + 45, seed=21)
    sim = np.stack([g.state for g, _ in pos])
    rule_array = pos[0][0].rules_array
    alone = [int(agent._fast_argmax(sim, rule_array, np.array([i]))[0]) for i in range(0, len(pos), 37)]
    moves = agent._fast_argmax(sim, rule_array, np.arange(len(pos)))
    assert seen == [PAD_ROWS] * len(alone) + [3 * PAD_ROWS]
    assert moves[::37].tolist() == alone
    masks = np.stack([g.legal_mask() for g, _ in pos]).astype(np.int8)
    assert moves.tolist() == policy.act_batch(sim, rule_array, None, masks).tolist()


def test_the_rollout_kernels_run_on_the_calling_thread():
    """Numba's parallel loops made a search worker beside the learner about ten times slower (each loop
    waited on a second thread for a busy core): no kernel of the search may be parallel again."""
    import agents.players.search as S
    from numba.core.registry import CPUDispatcher
    kernels = [f for f in vars(S).values() if isinstance(f, CPUDispatcher)]
    assert len(kernels) >= 6 and {"_obs_masks", "_full_obs", "_legal_argmax"} <= {k.__name__ for k in kernels}
    assert [k.__name__ for k in kernels if k.targetoptions.get("parallel")] == []


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_legal_argmax_picks_what_argmax_picks_over_the_masked_logits(dtype: torch.dtype):
    """Against a brute force over the numbers themselves: every bfloat16 (or many float32) bit patterns,
    ties, -0 beside +0, infinities and subnormals, random masks; the first of equal values wins."""
    rng = np.random.default_rng(7)
    itype, width = (torch.int16, 16) if dtype == torch.bfloat16 else (torch.int32, 32)
    pool = torch.from_numpy(rng.integers(-2 ** (width - 1), 2 ** (width - 1), 60_000, dtype=np.int64))
    if width == 16:
        pool = torch.arange(-2 ** 15, 2 ** 15)  # every bfloat16
    values = pool.to(itype).view(dtype).float()
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), 1e-40,
                            -1e-40, 1.0, -1.0]).to(dtype).float()
    values = torch.cat([values[~values.isnan()], special])
    rows, cols = 20_000, 7
    pick = rng.integers(0, values.numel(), (rows, cols))
    pick[:2000, 1:] = pick[:2000, :1]                          # whole rows of one value
    pick[2000:4000, rng.integers(0, cols)] = pick[2000:4000, 0]  # a tie somewhere
    pick[4000:4500, :2] = [values.numel() - 7, values.numel() - 8]  # -0 before +0, the only legal moves
    logits = values[torch.from_numpy(pick)].to(dtype)
    masks = (rng.random((rows, cols)) < 0.6).astype(np.int8)
    masks[np.arange(rows), rng.integers(0, cols, rows)] = 1   # at least one legal move
    masks[:4000] = 1
    masks[4000:4500] = [1, 1] + [0] * (cols - 2)
    out = np.empty(rows, dtype=np.int64)
    _legal_argmax(logits.view(itype).numpy(), masks, out)
    x = logits.float().numpy()
    for i in range(rows):
        legal = np.flatnonzero(masks[i])
        want = legal[np.flatnonzero(x[i, legal] == x[i, legal].max())[0]]
        assert out[i] == want, (i, x[i].tolist(), masks[i].tolist(), out[i])


@pytest.mark.parametrize("bf16", [True, False])
def test_rollout_moves_are_the_greedy_forwards_moves(bf16: bool):
    """The rollouts' lean argmax against the network's own forward, on rows of real rollouts."""
    torch.manual_seed(2)
    policy = PolicyAgent(build_net(32, 2, "full"), name="tiny")
    agent = SearchAgent(policy, 3, 4, 1, bf16=bf16)
    pos = [g for g, _ in _positions(60, seed=8)]
    states, rule_array = np.stack([g.state for g in pos]), pos[0].rules_array
    cands = np.stack([np.flatnonzero(g.legal_mask())[:1].tolist() + [-1] * 2 for g in pos])
    sim = np.zeros((len(pos) * 4 * 3, core.STATE_SIZE), dtype=np.int32)
    _expand(states, rule_array, np.arange(len(pos)), cands, 3, 4, 1, sim, np.zeros(len(sim), dtype=np.int64),
            np.zeros((0, core.MAX_PLAYERS, NR)), False)
    checked = 0
    for _ in range(8):
        live = np.flatnonzero(sim[:, core.O_PHASE] != core.PH_OVER)
        obs = obs_mod.encode_to_act(sim[live], rule_array)
        masks = np.zeros((live.size, NUM_ACTIONS), dtype=np.int8)
        for j, i in enumerate(live):
            core.legal_mask(sim[i], rule_array, masks[j])
        with torch.no_grad():
            logits, _ = agent.fast_net(torch.from_numpy(obs).to(agent.fast_net.inp.weight.dtype),
                                       torch.from_numpy(masks))
        moves = agent._fast_argmax(sim, rule_array, live)
        assert moves.tolist() == logits.float().argmax(1).tolist()
        checked += live.size
        _apply_all(sim, rule_array, live, moves)
    assert checked > 1000


def test_search_targets_are_a_softmax_of_the_values_over_the_candidates():
    ln2 = float(np.log(2.0))
    cands = np.array([[5, 9, -1], [7, 3, 12]])
    values = np.array([[1.0, 0.0, -np.inf], [0.0, 2 * ln2, 4 * ln2]])
    t = search_targets(cands, values, 2.0)
    assert t.shape == (2, NUM_ACTIONS) and t.dtype == np.float32
    e = float(np.exp(0.5))
    np.testing.assert_allclose(t[0, [5, 9]], [e / (e + 1), 1 / (e + 1)], rtol=1e-6)  # 0.6225, 0.3775
    np.testing.assert_allclose(t[1, [7, 3, 12]], [1 / 7, 2 / 7, 4 / 7], rtol=1e-6)  # e^0 : e^ln2 : e^ln4
    np.testing.assert_allclose(t.sum(1), 1.0, rtol=1e-6)
    assert np.count_nonzero(t[0]) == 2 and np.count_nonzero(t[1]) == 3  # nothing off the candidates
    np.testing.assert_allclose(search_targets(cands, values, 1.0)[0, 5], e * e / (e * e + 1), rtol=1e-6)
    cold = search_targets(cands, values, 0.0)  # the search's own move
    assert cold[0, 5] == 1 and cold[1, 12] == 1 and cold.sum() == 2
    tie = search_targets(np.array([[4, 2]]), np.array([[1.5, 1.5]]), 0.0)
    assert tie[0, 4] == 1 and tie[0, 2] == 0  # the first of equal ones, as the search plays
    tie = search_targets(np.array([[4, 2]]), np.array([[1.5, 1.5]]), 3.0)
    np.testing.assert_allclose(tie[0, [4, 2]], 0.5)
    for bad_c, bad_v, temp, words in (([[1, 2]], [[0.0, 1.0]], -1.0, "temperature"),
                                      ([[1, 2]], [[0.0, 1.0]], float("nan"), "temperature"),
                                      ([[-1, -1]], [[-np.inf, -np.inf]], 1.0, "needs a candidate"),
                                      ([[1, 2]], [[0.0, np.nan]], 1.0, "finite value"),
                                      ([[1, 2]], [[0.0]], 1.0, "shapes")):
        with pytest.raises(ValueError, match=words):
            search_targets(np.array(bad_c), np.array(bad_v), temp)


# ---- specs ------------------------------------------------------------------------------------------
def test_search_specs_and_their_errors(tmp_path: Path):
    assert parse_search_spec("") == DEFAULTS
    assert parse_search_spec(":worlds=64, horizon=-1") == {**DEFAULTS, "worlds": 64, "horizon": -1}
    assert parse_search_spec(":deadline_ms=200", defaults=False) == {"deadline_ms": 200}
    for bad, words in ((":depth=3", "unknown search setting"), (":worlds=x", "must be an integer"),
                       ("x", "expected DIR\\+search"), (":worlds", "unknown search setting")):
        with pytest.raises(ValueError, match=words):
            parse_search_spec(bad)
    with pytest.raises(ValueError, match="no such checkpoint directory"):
        make_agent(str(tmp_path / "nothing") + "+search")
    if (SHIPPED / "model.safetensors").is_file():
        for spec, words in ((f"{SHIPPED}+search:worlds=0", "worlds must be an integer of at least 1, not 0"),
                            (f"{SHIPPED}+search:candidates=1",
                             "candidates must be an integer from 2 to 201,"),
                            (f"{SHIPPED}+search:critic=101", "critic must be an integer from 0 to 100,"),
                            (f"{SHIPPED}+search:critic=-1", "critic must be an integer from 0 to 100,"),
                            (f"{SHIPPED}+search:deadline_ms=-1",
                             "deadline_ms must be an integer from 0 to ")):
            with pytest.raises(ValueError, match=words) as info:
                make_agent(spec)
            assert "\n" not in str(info.value)
        agent = make_agent(f"{SHIPPED}+search", seed=2)
        assert agent.settings == {**DEFAULTS, "belief": int((SHIPPED / "belief.safetensors").is_file())}
        assert agent.name == "standard+search" and agent.reward_scale == 20.0
        assert isinstance(load_policy_agent(SHIPPED), PolicyAgent)


def test_search_settings_are_bounded_by_the_memory_they_take(tmp_path: Path):
    """``worlds=100000000`` died in a MemoryError: a searched decision holds worlds × candidates rollout
    positions at once, and they may take at most 1 GiB (as a network's parameters may)."""
    for cands in (2, 10, 57, NUM_ACTIONS):
        most = MAX_SEARCH_BYTES // (cands * ROW_BYTES)
        assert most * cands * ROW_BYTES <= 1 << 30 < (most + 1) * cands * ROW_BYTES
        assert parse_search_spec(f":candidates={cands},worlds={most}")["worlds"] == most
        with pytest.raises(ValueError, match=f"at most worlds={most:,} with candidates={cands}$"):
            parse_search_spec(f":candidates={cands},worlds={most + 1}")
    for text, words in ((":worlds=100000000",
                         "would hold 1,000,000,000 rollout positions at once (976.0 GiB)"),
                        (":candidates=202", "candidates must be an integer from 2 to 201, not 202"),
                        (":horizon=1001", "horizon must be an integer from -1 to 1,000, not 1001"),
                        (":deadline_ms=3600001", "deadline_ms must be an integer from 0 to 3,600,000"),
                        (":belief=2",
                         "belief must be 1 (the checkpoint's belief) or 0 (uniform worlds), not 2"),
                        (":worlds=" + "9" * 5000, "worlds must be an integer of at least 1, not '9999"),
                        (":worlds=4,worlds=5", "worlds is given twice")):
        with pytest.raises(ValueError, match=re.escape(words)) as info:
            make_agent(f"{tmp_path}+search{text}")  # refused before anything is loaded (no checkpoint here)
        assert "\n" not in str(info.value) and len(str(info.value)) < 300
    with pytest.raises(ValueError, match="would hold"):
        SearchAgent(PolicyAgent(build_net(32, 2, "full"), name="tiny"), 10, 10**8, bf16=False)


@pytest.mark.slow
def test_a_rollout_position_takes_no_more_than_the_bound_counts():
    """What a searched decision allocates grows by at most ROW_BYTES per rollout position (measured
    with tracemalloc, which sees numpy's buffers): the bound is honest."""
    torch.manual_seed(0)
    agent = SearchAgent(PolicyAgent(build_net(32, 2, "full"), name="tiny"), 10, 1000, 2, 50, bf16=False)
    g = play_positions(1, 7, play_only=True)[0]
    peaks = {}
    for worlds in (1000, 3000):
        agent.worlds = worlds
        agent.act(g, g.to_act)  # the buffers reused between calls are there before the measurement
        tracemalloc.start()
        agent.act(g, g.to_act)
        peaks[worlds] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    per_row = (peaks[3000] - peaks[1000]) / (2000 * 10)
    assert 0.9 * 4 * core.STATE_SIZE < per_row <= ROW_BYTES, per_row


def test_evaluation_reports_say_how_the_search_played(tmp_path: Path):
    torch.manual_seed(0)
    agent = SearchAgent(PolicyAgent(build_net(32, 2, "full"), name="tiny"), 3, 4, 1, critic=25, bf16=False)
    res = evaluate(agent, "random", Table(RuleSet.preset("hoi_quan_bai"), 4), deals=2, seed=3)
    assert res["agent"] == "tiny+search"
    assert res["agent_settings"] == {"candidates": 3, "worlds": 4, "horizon": 1, "critic": 25, "belief": 0}
    text = (write_report({**res, "by_table": {"hoi_quan_bai/4": res}},
                         tmp_path / "rep") / "report.md").read_text()
    assert "Agent settings: candidates=3, worlds=4, horizon=1, critic=25, belief=0" in text
    assert "agent_settings" not in evaluate("random", "random", deals=2, seed=3)


def test_server_serves_the_search_bot_reproducibly():
    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("no shipped checkpoint")
    import warnings
    with warnings.catch_warnings():  # Starlette's notice about httpx, at import
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from agents.serving.app import create_app
    from agents.serving.bots import Bot
    spec = f"{SHIPPED}+search:candidates=3,worlds=4,horizon=1"
    with pytest.raises(ValueError, match="temperature"):
        Bot(spec, temperature=0.5)
    bot = Bot(spec, seed=1, deadline_ms=0)  # no time bound: answers independent of the machine's speed
    assert bot.agent is not None and not bot.per_request and bot.checkpoint == str(SHIPPED)
    with TestClient(create_app(bot=bot), raise_server_exceptions=False) as c:
        assert c.get("/v1/info").json()["name"] == "standard+search"
        for g, seat in _positions(8, seed=6):
            body = {"format": "samloc/1", "rules": g.rules.to_record(), "players": g.players,
                    "opener": g.opener, "seat": seat, "hand": cards_str(g.hand(seat)),
                    "events": list(g.events)}
            r1, r2 = c.post("/v1/act", json=body), c.post("/v1/act", json=body)
            assert r1.status_code == 200 and r1.json() == r2.json()
            assert r1.json()["event"] == g.copy().apply(bot.agent.act(g, seat))


# ---- the deadline ------------------------------------------------------------------------------------
SLACK_S = 1.0  # one rollout step on a busy machine: the clock is read between steps


def test_a_deadline_bounds_every_searched_decision():
    torch.manual_seed(0)
    policy = PolicyAgent(build_net(64, 2, "full"), name="tiny")
    agent = SearchAgent(policy, 5, 64, 2, bf16=False, deadline_ms=2)
    assert agent.settings["deadline_ms"] == 2
    pos = _positions(30, seed=7)
    agent.act(*pos[0])  # the first call loads compiled kernels: not a step of the search
    for g, seat in pos:
        t0 = time.perf_counter()
        a = agent.act(g, seat)
        took = time.perf_counter() - t0
        assert took <= 0.002 + SLACK_S, f"{took:.3f} s for a 2 ms deadline"
        assert g.legal_mask()[a] == 1


@pytest.mark.slow
def test_a_deadline_not_reached_changes_no_answer():
    """Under a deadline the worlds are rolled out in slices; with time to spare, every slice is
    done and the answer is the one without a deadline."""
    torch.manual_seed(1)
    policy = PolicyAgent(build_net(32, 2, "full"), name="tiny")
    free = SearchAgent(policy, 4, 7, 2, bf16=False)
    bound = SearchAgent(policy, 4, 7, 2, bf16=False, deadline_ms=600_000)
    pos = _positions(30, seed=8)
    assert [bound.act(g, s) for g, s in pos] == [free.act(g, s) for g, s in pos]
    if (SHIPPED / "model.safetensors").is_file():
        fast = make_agent(f"{SHIPPED}+search:candidates=3,worlds=4,horizon=1,deadline_ms=600000", seed=5)
        exact = make_agent(f"{SHIPPED}+search:candidates=3,worlds=4,horizon=1", seed=5)
        assert [fast.act(g, s) for g, s in pos] == [exact.act(g, s) for g, s in pos]


def test_a_deadline_counts_from_the_requests_arrival():
    """A request that waited its whole deadline behind others gets the policy's move at once: its
    search runs to ``until`` (the arrival plus the deadline), not a full deadline from now."""
    torch.manual_seed(2)
    policy = PolicyAgent(build_net(32, 2, "full"), name="tiny")
    agent = SearchAgent(policy, 4, 7, 2, bf16=False, deadline_ms=600_000)
    for g, seat in _positions(10, seed=9):
        if g.state[core.O_PHASE] != core.PH_PLAY:
            continue
        st, mask = g.state[None, :].copy(), np.asarray(g.legal_mask(), dtype=np.int8)[None, :]
        late = agent.search_batch(st, g.rules_array, None, mask, until=time.perf_counter() - 1.0)
        assert late.rows.size == 0 and late.acts[0] == policy.act(g, seat)
        assert agent.act(g, seat, until=time.perf_counter() - 1.0) == policy.act(g, seat)
        assert agent.search_batch(st, g.rules_array, None, mask).rows.size == 1  # a real choice, searched


def test_a_step_that_would_end_late_is_not_begun():
    """The search knows its longest recent rollout step: with less time left than that, it stops
    (a deadline kept, not overrun by one step on a slow machine)."""
    torch.manual_seed(3)
    policy = PolicyAgent(build_net(32, 2, "full"), name="tiny")
    agent = SearchAgent(policy, 4, 7, 2, bf16=False)
    g = next(g for g, _ in _positions(20, seed=10) if g.state[core.O_PHASE] == core.PH_PLAY)
    st, mask = g.state[None, :].copy(), np.asarray(g.legal_mask(), dtype=np.int8)[None, :]
    agent._step_s = 3600.0  # as if a step took an hour
    assert agent.search_batch(st, g.rules_array, None, mask, until=time.perf_counter() + 60).rows.size == 0
    # a step not begun halves the estimate: one slow step stops no search for good
    assert agent._step_s == 1800.0
    agent._step_s = 0.0
    assert agent.search_batch(st, g.rules_array, None, mask, until=time.perf_counter() + 600).rows.size == 1


def test_a_served_search_leaves_time_for_the_requests_queued_behind_it():
    """With 16 clients on one search thread, the requests behind a search waited out its whole
    deadline and then their own answers: the search now stops early enough for each of them to get
    at least the policy's move by its deadline."""
    if not (SHIPPED / "model.safetensors").is_file():
        pytest.skip("no shipped checkpoint")
    from agents.serving.bots import Bot

    bot = Bot(f"{SHIPPED}+search:candidates=3,worlds=4,horizon=1", deadline_ms=200)
    assert bot.agent.policy_s == bot.agent._step_s == 0.0  # warmed: the loading times are not kept
    bot.agent.policy_s = 0.01
    assert bot._until(100.0) == pytest.approx(100.2)
    bot._waiting = 5
    assert bot._until(100.0) == pytest.approx(100.2 - 5 * 2 * 0.01)


def test_the_server_bounds_searched_answers_and_says_so(tmp_path: Path):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from agents.nets.checkpoint import save_checkpoint
    from agents.serving.app import create_app
    from agents.serving.bots import DEADLINE_MS, Bot
    from sam_env.actions import ACTION_TABLE_VERSION

    torch.manual_seed(2)
    ckpt = save_checkpoint(tmp_path / "tiny", build_net(32, 2, "full"), {
        "name": "tiny", "tables": [{"rules": "hoi_quan_bai", "players": 4}],
        "obs_version": obs_mod.OBS_VERSION, "action_table_version": ACTION_TABLE_VERSION})
    assert Bot(f"{ckpt}+search").agent.deadline_ms == DEADLINE_MS == 200  # the server's default bound
    assert Bot(f"{ckpt}+search:deadline_ms=7", deadline_ms=0).agent.deadline_ms == 7  # the spec's own
    with TestClient(create_app(f"{ckpt}+search:worlds=64", deadline_ms=1)) as c:
        info = c.get("/v1/info").json()
        assert info["deadline_ms"] == 1 and info["deterministic"] is False
        assert info["bots"][0]["settings"]["deadline_ms"] == 1
        for g, seat in _positions(20, seed=9):
            body = {"format": "samloc/1", "rules": g.rules.to_record(), "players": g.players,
                    "opener": g.opener, "seat": seat, "hand": cards_str(g.hand(seat)),
                    "events": list(g.events)}
            r = c.post("/v1/act", json=body)
            assert r.status_code == 200, r.text
            assert float(r.headers["server-timing"].split("dur=")[1]) <= 1 + 1000 * SLACK_S
            g.copy().apply(r.json()["event"])  # legal
    with TestClient(create_app("heuristic")) as c:
        info = c.get("/v1/info").json()
        assert info["deadline_ms"] is None and info["deterministic"] is True
