"""The observation (sam_env.obs): layout, an independent reference encoder,
no peeking at hidden cards, and equality with a seat's view of the game."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from sam_env import core, obs
from sam_env.actions import ACT_COUNTS, ACT_KIND, ACT_RANK, NO_SAM, NUM_ACTIONS, PASS, SAM, action_from_counts
from sam_env.batch import GameBatch
from sam_env.cards import card_str, parse_card, rank_counts
from sam_env.game import Game
from sam_env.rules import PRESET_NAMES, RuleSet

CONFIGS = [("hoi_quan_bai", 4), ("hoi_quan_bai", 2), ("hoi_quan_bai", 5), ("s666pg", 5), ("mien_bac", 3),
           ("online", 4)]


def random_positions(rules: str, players: int, games: int, seed: int):
    """Random legal play (Sâm declared now and then); yields (game, seat to act) before each decision."""
    rng = random.Random(seed)
    for i in range(games):
        g = Game.new(rules, players, seed=seed * 1000 + i)
        while not g.finished:
            yield g, g.to_act
            legal = g.legal_actions()
            if SAM in legal:
                g.apply(SAM if rng.random() < 0.05 else NO_SAM)
            else:
                g.apply(rng.choice(legal))


def event_action(ev: dict) -> int:
    if ev["type"] == "sam":
        return SAM if ev["declare"] else NO_SAM
    if ev["type"] == "pass":
        return PASS
    return action_from_counts(rank_counts(parse_card(c) for c in ev["cards"]))


def therm(counts) -> list[float]:
    return [1.0 if c > k else 0.0 for c in counts for k in range(4)]


def reference(game: Game, seat: int) -> dict[str, np.ndarray]:
    """The documented sections, computed from the Game's public API and its events only."""
    n = game.players
    rel = lambda s: (s - seat) % n  # noqa: E731
    ref: dict[str, np.ndarray] = {}
    own = rank_counts(game.hand(seat))
    played = [[0] * 13 for _ in range(5)]
    for ev in game.events:
        if ev["type"] == "play":
            for c in ev["cards"]:
                played[rel(ev["seat"])][parse_card(c) // 4] += 1
    ref["hand"] = np.array(therm(own))
    ref["unseen"] = np.array(therm([4 - own[r] - sum(p[r] for p in played) for r in range(13)]))
    ref["played"] = np.array(sum((therm(p) for p in played), []))
    left = np.zeros((5, 11))
    bao = np.zeros(5)
    present = np.zeros(5)
    for s in range(n):
        left[rel(s), game.hand_size(s)] = 1
        bao[rel(s)] = game.hand_size(s) == 1
        present[rel(s)] = 1
    ref["cards_left"], ref["bao_1"], ref["present"] = left.ravel(), bao, present
    ref["to_act"] = np.eye(5)[rel(game.to_act)]
    ref["opener"] = np.eye(5)[rel(game.opener)]
    ref["phase"] = np.eye(3)[["sam", "play", "over"].index(game.phase)]
    ref["declarer"] = np.eye(6)[0 if game.declarer is None else 1 + rel(game.declarer)]
    top = game.top
    kind, rank, cards, by = np.zeros(7), np.zeros(15), np.zeros(13), np.zeros(5)
    if top is None:
        kind[0] = 1
    else:
        kind[ACT_KIND[top] - 2] = 1
        rank[ACT_RANK[top]] = 1
        cards[:] = ACT_COUNTS[top] / 4
        last_play = [ev for ev in game.events if ev["type"] == "play"][-1]
        by[rel(last_play["seat"])] = 1
    ref["top_kind"], ref["top_rank"], ref["top_cards"], ref["top_by"] = kind, rank, cards, by
    hist = np.zeros((16, 28))
    for j, ev in enumerate(reversed(game.events[-16:])):
        a = event_action(ev)
        hist[j, 0] = 1
        hist[j, 1 + rel(ev["seat"])] = 1
        hist[j, 6 + ACT_KIND[a]] = 1
        hist[j, 15:] = ACT_COUNTS[a] / 4
    ref["history"] = hist.ravel()
    ref["progress"] = np.array([min(len(game.events), 100) / 100])
    ref["players"] = np.eye(4)[n - 2]
    return ref


def test_layout_table_matches_offsets():
    """The table in the module docstring is the layout the code writes."""
    rows = re.findall(r"^(\d+)\s+``(\w+)``\s+(\d+)", obs.__doc__, re.M)
    assert [(name, int(start), int(size)) for start, name, size in rows] == \
        [(s.name, obs.OFFSETS[s.name], s.size) for s in obs.SECTIONS]
    assert obs.OBS_SIZE == sum(s.size for s in obs.SECTIONS) == 993
    assert f"``OBS_SIZE`` = {obs.OBS_SIZE}" in obs.__doc__
    assert len(obs.RULE_FEATURES) == {s.name: s.size for s in obs.SECTIONS}["rules"]


@pytest.mark.parametrize("rules,players", CONFIGS)
def test_matches_independent_reference(rules, players):
    low, high = obs.obs_bounds()
    checked = 0
    for game, seat in random_positions(rules, players, games=6, seed=players):
        for s in {seat, (seat + 1) % players}:
            vec = obs.encode(game, s)
            assert vec.dtype == np.float32 and vec.shape == (obs.OBS_SIZE,)
            assert np.all(vec >= low) and np.all(vec <= high)
            got = obs.describe(vec)
            for name, want in reference(game, s).items():
                np.testing.assert_array_equal(got[name], want.astype(np.float32), err_msg=name)
            checked += 1
    assert checked > 100


def test_known_position_by_hand():
    """One position spelled out: seat 1's view after seat 0 leads a pair of 5s (s666pg, 3 players)."""
    hands = [["5s", "5c", "7d", "8d", "9d", "Td", "Jd", "Qd", "Kd", "Ad"],
             ["3s", "3c", "3d", "6s", "6c", "9s", "9c", "Js", "Qs", "2h"],
             ["4s", "4c", "4d", "4h", "7s", "7c", "8s", "8c", "Ks", "Kc"]]
    g = Game.from_deal("s666pg", hands, opener=0)
    for ev in ({"seat": 0, "type": "sam", "declare": False}, {"seat": 1, "type": "sam", "declare": False},
               {"seat": 2, "type": "sam", "declare": False},
               {"seat": 0, "type": "play", "cards": ["5s", "5c"]}):
        g.apply(ev)
    d = obs.describe(obs.encode(g, 1))
    np.testing.assert_array_equal(d["hand"].reshape(13, 4)[:, 0], [1, 0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1])
    np.testing.assert_array_equal(d["hand"].reshape(13, 4)[0], [1, 1, 1, 0])      # three 3s
    np.testing.assert_array_equal(d["played"].reshape(5, 13, 4)[2, 2], [1, 1, 0, 0])  # seat 0 is relative 2
    assert d["played"].sum() == 2
    np.testing.assert_array_equal(d["unseen"].reshape(13, 4)[2], [1, 1, 0, 0])     # two 5s left somewhere
    np.testing.assert_array_equal(d["cards_left"].reshape(5, 11)[:3].argmax(1), [10, 10, 8])
    np.testing.assert_array_equal(d["present"], [1, 1, 1, 0, 0])
    np.testing.assert_array_equal(d["to_act"], [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(d["opener"], [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(d["top_kind"], [0, 0, 1, 0, 0, 0, 0])           # a pair
    assert d["top_rank"].argmax() == 2 and d["top_by"].argmax() == 2
    assert d["history"].reshape(16, 28)[:4, 0].tolist() == [1, 1, 1, 1]
    assert d["history"].reshape(16, 28)[0, 6 + 4] == 1                              # most recent: the pair
    assert d["history"].reshape(16, 28)[1, 6 + 2] == 1                              # then a no_sam
    assert d["players"].tolist() == [0, 1, 0, 0]
    rules = dict(zip(obs.RULE_FEATURES, d["rules"]))
    assert rules["bao_mot=enforce"] == 1 and rules["ace_low_straights"] == 0 and rules["cong defined"] == 0
    assert rules["sam_win/20"] == 1.0 and rules["instant:dragon"] == 0


def _random_states(rules: str, players: int, count: int, seed: int) -> np.ndarray:
    """``count`` states from random batched play (varied phases, tops, chains)."""
    gb = GameBatch(RuleSet.parse(rules), players, num_games=64, seed=seed)
    rng = np.random.default_rng(seed)
    out = []
    while len(out) * 64 < count:
        masks = gb.legal_masks()
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        # answer Sâm mostly with no_sam so that games last
        acts = np.where(masks[:, NO_SAM] == 1, np.where(rng.random(64) < 0.9, NO_SAM, SAM), acts)
        gb.step(acts)
        out.append(gb.states.copy())
    return np.concatenate(out)[:count]


@pytest.mark.parametrize("rules,players",
                         [("hoi_quan_bai", 4), ("online", 4), ("s666pg", 5), ("mien_bac", 2)])
def test_no_peeking_when_hidden_cards_move(rules, players):
    """Redealing the other seats' cards (sizes kept) and the hidden-only fields never changes a seat's
    vector."""
    states = _random_states(rules, players, 1500, seed=7)
    rule_array = RuleSet.parse(rules).to_array()
    rng = np.random.default_rng(1)
    a, b = np.empty(obs.OBS_SIZE, np.float32), np.empty(obs.OBS_SIZE, np.float32)
    changed_own = 0
    for st in states:
        seat = int(rng.integers(players))
        others = [s for s in range(players) if s != seat]
        pool = np.repeat(np.arange(13),
                         [sum(st[core.O_HAND + s * 13 + r] for s in others) for r in range(13)])
        rng.shuffle(pool)
        st2 = st.copy()
        st2[core.O_HAND:core.O_HAND + 5 * 13].reshape(5, 13)[others] = 0
        at = 0
        for s in others:
            size = int(st[core.O_HAND + s * 13:core.O_HAND + s * 13 + 13].sum())
            np.add.at(st2[core.O_HAND + s * 13:core.O_HAND + s * 13 + 13], pool[at:at + size], 1)
            at += size
        st2[core.O_DEN_PENDING] = rng.integers(-1, players)
        st2[core.O_DEN_TRANG] = rng.integers(-1, players)
        st2[core.O_HIDDEN] = sum(1 << s for s in others)
        obs.encode_row(st, rule_array, seat, a)
        obs.encode_row(st2, rule_array, seat, b)
        np.testing.assert_array_equal(a, b)
        # the control: the seat's own cards do show
        st3 = st.copy()
        own = st3[core.O_HAND + seat * 13:core.O_HAND + seat * 13 + 13]
        if own.sum() and own.min() == 0:
            r_from, r_to = int(np.flatnonzero(own)[0]), int(np.flatnonzero(own == 0)[0])
            own[r_from] -= 1
            own[r_to] += 1
            obs.encode_row(st3, rule_array, seat, b)
            changed_own += not np.array_equal(a, b)
    assert changed_own > 500


@pytest.mark.parametrize("rules,players", CONFIGS)
def test_seat_view_gives_the_same_vector(rules, players):
    """Game.from_view (hidden hands) and the full game give one vector for the seat to act."""
    checked = 0
    for game, seat in random_positions(rules, players, games=4, seed=11 + players):
        view = Game.from_view(game.rules, players, game.opener, seat, [card_str(c) for c in game.hand(seat)],
                              game.events)
        np.testing.assert_array_equal(obs.encode(view, seat), obs.encode(game, seat))
        checked += 1
    assert checked > 50


def test_batch_and_full_vectors():
    states = _random_states("hoi_quan_bai", 4, 256, seed=3)
    rule_array = RuleSet.parse("hoi_quan_bai").to_array()
    seats = np.arange(len(states), dtype=np.int64) % 4
    batch = np.zeros((len(states), obs.OBS_SIZE), np.float32)
    obs.encode_batch(states, rule_array, seats, batch)
    full = np.zeros((len(states), obs.FULL_SIZE), np.float32)
    obs.encode_full_batch(states, rule_array, seats, full)
    one = np.empty(obs.OBS_SIZE, np.float32)
    for g in range(len(states)):
        obs.encode_row(states[g], rule_array, seats[g], one)
        np.testing.assert_array_equal(batch[g], one)
        np.testing.assert_array_equal(full[g, :obs.OBS_SIZE], one)
        hands = full[g, obs.OBS_SIZE:].reshape(5, 13, 4).sum(-1)
        for s in range(4):
            np.testing.assert_array_equal(hands[(s - seats[g]) % 4], states[g, core.O_HAND + s * 13:][:13])
    # the mask-and-observation kernel agrees with the engine
    masks = np.zeros((len(states), NUM_ACTIONS), np.int8)
    to_act = np.zeros(len(states), np.int64)
    obs.encode_mask_batch(states, rule_array, batch, masks, to_act)
    for g in range(len(states)):
        want = np.zeros(NUM_ACTIONS, np.int8)
        core.legal_mask(states[g], rule_array, want)
        np.testing.assert_array_equal(masks[g], want)


def test_bad_seat_and_views_are_refused():
    g = Game.new("hoi_quan_bai", 3, seed=1)
    with pytest.raises(ValueError, match="seat must be a seat from 0 to 2"):
        obs.encode(g, 3)
    view = Game.from_view("hoi_quan_bai", 3, g.opener, g.to_act, [card_str(c) for c in g.hand(g.to_act)], [])
    with pytest.raises(ValueError, match="view"):
        obs.encode(view, (g.to_act + 1) % 3)
    with pytest.raises(ValueError, match="hidden hands"):
        obs.encode_full(view, g.to_act)


def test_rule_parameters_tell_presets_apart():
    vecs = {}
    for name in PRESET_NAMES:
        g = Game.new(name, 4, seed=0)
        vecs[name] = obs.describe(obs.encode(g, 0))["rules"].tobytes()
    assert len(set(vecs.values())) == len(PRESET_NAMES)


def _rule_reference(rs: RuleSet) -> dict[str, float]:
    """Each rule feature computed from its name alone: ``x`` a flag, ``x=v`` a choice,
    ``instant:p`` an enabled pattern, ``x/20`` an amount of lá over LA_SCALE (clipped)."""
    out = {}
    for name in obs.RULE_FEATURES:
        if name.startswith("instant:"):
            v = name.split(":")[1] in rs.instant_wins
        elif name == "cong defined":
            v = rs.cong is not None
        elif name == "hand size/10":
            v = 1.0
        elif "=" in name:
            key, want = name.split("=")
            v = getattr(rs, key) == want
        elif "/" in name:
            key, div = name.split("/")
            v = min((getattr(rs, key) or 0) / float(div), obs.AMOUNT_CLIP)
        else:
            v = bool(getattr(rs, name))
        out[name] = float(np.float32(v))
    return out


def test_each_rule_feature_lands_at_its_named_offset():
    """Every cell of the rules block holds the parameter its name says, for rule sets that change
    each parameter in turn; rule_offset(name) is its place."""
    base = {"preset": "hoi_quan_bai"}
    changes = [{}, {"ace_low_straights": False}, {"quad_chops_single_two": False},
               {"double_quad_chops_pair_two": True}, {"passed_can_chop": False},
               {"finish_with_two": "forbidden"}, {"bao_mot": "enforce"}, {"instant_wins": ["poor_hand"]},
               {"instant_wins": ["rich_hand", "dragon", "four_twos"]}, {"sam_declaration": False},
               {"cong": None}, {"cong": 7}, {"two_left": 3}, {"quad_left": 9}, {"chop_two": 300},
               {"chop_quad": 11}, {"sam_win": 13}, {"sam_fail": 17}, {"sam_fail_to_blocker": True},
               {"sam_success_den": True}, {"instant_win": None}, {"instant_win": 30},
               {"instant_win_adds_penalties": True}, {"first_opener": "lowest_card"}, {"max_players": 3}]
    seen = set()
    for change in changes:
        rs = RuleSet.parse(base | change)
        got = obs.describe_rules(obs.encode(Game.from_deal(rs, [list(range(10)), list(range(10, 20))]), 0))
        assert got == _rule_reference(rs), change
        seen.add(tuple(got.values()))
    assert len(seen) == len(changes)  # every change moved some cell
    for i, name in enumerate(obs.RULE_FEATURES):
        assert obs.rule_offset(name) == obs.F_RULES + i


def test_named_views_of_a_vector_and_a_batch():
    """``view`` gives a section shaped as declared, for one vector or a batch, without a copy."""
    g = Game.new("online", 3, seed=2)
    vec = obs.encode(g, 0)
    batch = np.stack([vec, obs.encode(g, 1)])
    assert obs.view(vec, "played").shape == (5, 13, 4) and obs.view(batch, "history").shape == (2, 16, 28)
    assert np.shares_memory(obs.view(batch, "hand"), batch)
    for s in obs.SECTIONS:
        assert np.array_equal(obs.view(vec, s.name).reshape(-1), obs.describe(vec)[s.name])
    hand = obs.view(vec, "hand").sum(axis=1)  # thermometers: a rank's cells add up to its count
    assert hand.sum() == 10


def test_bounds_come_from_the_cell_kinds():
    low, high = obs.obs_bounds()
    assert low[obs.F_SCORES] == -obs.AMOUNT_CLIP and high[obs.F_CHAIN] == obs.AMOUNT_CLIP
    assert high[obs.rule_offset("cong/20")] == obs.AMOUNT_CLIP and high[obs.rule_offset("max_players/5")] == 1
    assert low.min() == -obs.AMOUNT_CLIP and set(high.tolist()) == {1.0, obs.AMOUNT_CLIP}
