"""Legal moves against an independent brute force (RULES §3, §5, §6).

For every decision of many random games, every subset of the hand of the seat
to act (as cards, up to 2^10) is classified from scratch — single, pair,
triple, quad, straight, double quad — and filtered by the rules: beating the
top, the chop right of passed seats, báo 1 enforced, no finishing with 2s, a
double quad only on a pair of 2s.  The move strings that remain (plus
``pass`` when not leading) must be exactly ``Game.legal_moves()``, and at
every 16th position exactly the actions ``core.check_action`` accepts.

Nothing here calls the engine's legality code: the position is read from the
game (hand, whose turn, whether the seat passed in this round, hand sizes) and
the top combination is classified again from the cards of the last play.
The subset sweep is vectorised with numpy and cached per hand, so 100,000+
positions take well under a minute.
"""

from __future__ import annotations

import random
from collections import Counter
from functools import lru_cache

import numpy as np
import pytest

from sam_env import core
from sam_env.actions import ACTION_NAMES, NUM_ACTIONS
from sam_env.rules import RuleSet

RANK_CH = "3456789TJQKA2"
A, TWO = 11, 12
SINGLE, PAIR, TRIPLE, QUAD, STRAIGHT, DQUAD = 1, 2, 3, 4, 5, 6
POSITIONS_PER_CONFIG = 20_000  # 16 configurations → 320,000 positions


# ---- an independent classifier ---------------------------------------------------
def _pos_char(p: int) -> str:
    """Straight position (A low = 1, 2 = 2, 3 … K = 3 … 13, A high = 14) → rank character."""
    return "A" if p in (1, 14) else "2" if p == 2 else RANK_CH[p - 3]


def _straight_top(ranks: list[int], ace_low: bool) -> int:
    """Top position of the straight made of these distinct ranks, or -1 (RULES §3)."""
    if not 3 <= len(ranks) <= 10:
        return -1
    mappings = []
    if TWO not in ranks:  # A high, no 2 at all
        mappings.append(sorted(14 if r == A else r + 3 for r in ranks))
    if ace_low:  # A low and a low 2
        mappings.append(sorted(1 if r == A else 2 if r == TWO else r + 3 for r in ranks))
    tops = {m[-1] for m in mappings if m[-1] - m[0] == len(m) - 1}
    assert len(tops) <= 1
    return tops.pop() if tops else -1


STRAIGHT_TOP = {al: np.array([_straight_top([r for r in range(13) if b >> r & 1], al)
                               for b in range(1 << 13)])
                for al in (False, True)}
SUBSETS = [((np.arange(1 << k)[:, None] >> np.arange(k)) & 1).astype(np.int64) for k in range(11)]
BIT = 1 << np.arange(13)


def _name(kind: int, length: int, key: int) -> str:
    if kind <= QUAD:
        return RANK_CH[key] * kind
    if kind == STRAIGHT:
        return "".join(_pos_char(p) for p in range(key - length + 1, key + 1))
    lo, hi = divmod(key, 13)
    return RANK_CH[lo] * 4 + RANK_CH[hi] * 4


@lru_cache(maxsize=200_000)
def combos(ranks: tuple[int, ...], ace_low: bool) -> tuple[np.ndarray, ...]:
    """Every combination some subset of these cards forms: arrays (kind, length, key, names).

    ``key`` is the rank (same-rank kinds), the top position (straights) or
    ``lo*13 + hi`` (double quads).
    """
    k = len(ranks)
    counts = SUBSETS[k] @ np.eye(13, dtype=np.int64)[list(ranks)]
    n = counts.sum(1)
    present = counts > 0
    distinct = present.sum(1)
    most = counts.max(1)
    bits = present @ BIT
    kind = np.zeros(len(counts), dtype=np.int64)
    key = np.zeros(len(counts), dtype=np.int64)
    same = (distinct == 1) & (n <= 4)
    kind[same] = n[same]
    key[same] = counts[same].argmax(1)
    top = STRAIGHT_TOP[ace_low][bits]
    st = (most == 1) & (n >= 3) & (top >= 0)
    kind[st] = STRAIGHT
    key[st] = top[st]
    dq = (distinct == 2) & (n == 8) & (most == 4)
    kind[dq] = DQUAD
    lo = present.argmax(1)
    hi = 12 - present[:, ::-1].argmax(1)
    key[dq] = lo[dq] * 13 + hi[dq]
    code = np.unique((kind * 1000 + n) * 1000 + key)
    code = code[code >= 1000 * 1000]
    kind, rest = np.divmod(code, 1_000_000)
    length, key = np.divmod(rest, 1000)
    names = np.array([_name(*t) for t in zip(kind.tolist(), length.tolist(), key.tolist())], dtype=object)
    return kind, length, key, names


def classify(cards: list[int], ace_low: bool) -> tuple[int, int, int, str]:
    """(kind, length, key, move string) of a whole play."""
    kind, length, key, names = combos(tuple(sorted(c // 4 for c in cards)), ace_low)
    i = int(np.flatnonzero(length == len(cards))[0])
    return int(kind[i]), int(length[i]), int(key[i]), str(names[i])


def expected_moves(rs: RuleSet, hand: list[int], top: tuple | None, top_was_chop: bool,
                   passed: bool, next_size: int) -> set[str]:
    """The legal moves of RULES §3, §5, §6 for this position, by brute force."""
    ranks = tuple(sorted(c // 4 for c in hand))
    kind, length, key, names = combos(ranks, rs.ace_low_straights)
    same = kind <= QUAD
    ok = np.ones(len(kind), dtype=bool)
    if rs.finish_with_two == "forbidden":  # a play of only 2s that empties the hand
        ok &= ~(same & (key == TWO) & (length == len(hand)))
    if rs.bao_mot == "enforce" and next_size == 1:  # tay trên: a single only of its highest rank
        ok &= ~((kind == SINGLE) & (key != max(ranks)))
    if top is None:
        return set(names[ok & (kind != DQUAD)])
    tkind, tlen, tkey, _ = top
    single_two = tkind == SINGLE and tkey == TWO
    if passed:
        right = rs.passed_can_chop and ((single_two and rs.quad_chops_single_two)
                                        or (tkind == QUAD and top_was_chop))
        beat = (kind == QUAD) & (key > tkey if tkind == QUAD else True) if right else np.zeros_like(ok)
    else:
        # same kind, higher, same length; nothing beats a double quad
        beat = (kind == tkind) & (key > tkey) & (length == tlen) & (kind != DQUAD)
        if single_two and rs.quad_chops_single_two:
            beat |= kind == QUAD
        if tkind == PAIR and tkey == TWO and rs.double_quad_chops_pair_two:
            beat |= kind == DQUAD
    return {"pass"} | set(names[ok & beat])


# ---- the sweep -------------------------------------------------------------------
def test_classifier_knows_straights():
    """The brute force's own straight rule, on the cases RULES §3 names."""
    def top(s: str, ace_low: bool) -> int:
        return _straight_top(sorted(RANK_CH.index(c) for c in s), ace_low)
    assert top("A23", True) == 3 and top("234", True) == 4 and top("QKA", True) == 14
    assert top("A23", False) == -1 and top("234", False) == -1 and top("QKA", False) == 14
    assert top("KA2", True) == -1 and top("A34", True) == -1 and top("JQKA2", True) == -1
    assert top("A23456789T", True) == 10 and top("56789TJQKA", False) == 14
    assert (STRAIGHT_TOP[True] >= 0).sum() == sum(15 - n for n in range(3, 11))  # runs within 1…14
    assert (STRAIGHT_TOP[False] >= 0).sum() == sum(13 - n for n in range(3, 11))  # runs within 3…14
    kind, length, key, names = combos(tuple(sorted([0, 0, 0, 0, 6, 6, 6, 6, 12, 1])), True)
    assert set(names) == {"3", "4", "9", "2", "33", "99", "333", "999", "3333", "9999", "33339999", "234"}


@pytest.mark.slow
def test_legal_moves_match_brute_force(engine_cfg, deal_for):
    rules, players = engine_cfg
    rs = RuleSet.parse(rules)
    rng = random.Random(f"brute-{rs.name}-{players}")
    seen: Counter[str] = Counter()
    seed = 0
    while seen["positions"] < POSITIONS_PER_CONFIG:
        game = deal_for(rs, players, seed)
        seed += 1
        top, top_was_chop = None, False
        while not game.finished:
            seat = game.to_act
            legal = game.legal_moves()
            if game.phase == "sam":
                assert legal == ["sam", "no_sam"]
                game.apply("sam" if rng.random() < 0.05 else "no_sam")
                continue
            if game.top is None:
                top, top_was_chop = None, False
            else:
                assert top is not None and top[3] == ACTION_NAMES[game.top], "the top is the last play"
            passed = bool(game.state[core.O_PASSED + seat])
            hand = game.hand(seat)
            next_size = game.hand_size((seat + 1) % players)
            want = expected_moves(rs, hand, top, top_was_chop, passed, next_size)
            assert len(legal) == len(set(legal))
            assert set(legal) == want, (f"{rs.name} {players}p seed {seed - 1} seat {seat} hand "
                                        f"{game.hand(seat)} top {top} passed {passed}: engine {sorted(legal)}"
                                        f" brute force {sorted(want)}")
            seen["positions"] += 1
            if seen["positions"] % 16 == 0:  # the gate every apply goes through agrees, action by action
                ok = {ACTION_NAMES[a] for a in range(NUM_ACTIONS)
                      if core.check_action(game.state, game.rules_array, seat, a) == core.OK}
                assert ok == want, f"check_action accepts {sorted(ok ^ want)} ({rs.name}, seed {seed - 1})"
            seen["passed, with a chop right"] += passed
            seen["facing a single 2 with a quad"] += bool(top and top[0] == SINGLE and top[2] == TWO
                                                          and any(len(m) == 4 and m != "pass" for m in want))
            seen["a double quad is legal"] += any(len(m) == 8 for m in want)
            seen["báo 1 binds"] += next_size == 1 and any(len(m) == 1 for m in want)
            seen["a lone 2 left to play"] += len(hand) == 1 and hand[0] // 4 == TWO
            ev = game.apply(rng.choice(legal))
            if ev["type"] == "play":
                new = classify([_card(c) for c in ev["cards"]], rs.ace_low_straights)
                top_was_chop = new[0] == QUAD and top is not None and (
                    top[0] == QUAD or (top[0] == SINGLE and top[2] == TWO))
                top = new
    # the rare rules really were exercised where the rule set has them
    if rs.quad_chops_single_two:
        assert seen["facing a single 2 with a quad"] > 20
    # (with two seats a pass ends the round: no chop right)
    if rs.passed_can_chop and rs.quad_chops_single_two and players >= 3:
        assert seen["passed, with a chop right"] > 20
    if rs.double_quad_chops_pair_two:
        assert seen["a double quad is legal"] > 0
    if rs.bao_mot == "enforce":
        assert seen["báo 1 binds"] > 50
    if rs.finish_with_two == "forbidden":
        assert seen["a lone 2 left to play"] > 20


def _card(text: str) -> int:
    return RANK_CH.index(text[0]) * 4 + "csdh".index(text[1])


def test_brute_force_by_hand():
    """The brute force itself, on positions worked out by hand."""
    hqb, s666 = RuleSet.parse("hoi_quan_bai"), RuleSet.parse("s666pg")
    hand = [_card(c) for c in ("3c", "4c", "5d", "5h", "2s")]
    assert expected_moves(hqb, hand, None, False, False, 10) == {
        "3", "4", "5", "2", "55", "345", "234", "2345"}
    assert expected_moves(s666, hand, None, False, False, 10) == {"3", "4", "5", "2", "55", "345"}
    assert expected_moves(s666, hand, None, False, False, 1) == {"2", "55", "345"}  # báo 1 enforced
    assert expected_moves(hqb, hand, classify([_card("4s")], True), False, False, 10) == {"pass", "5", "2"}
    assert expected_moves(hqb, hand, classify([_card(c) for c in ("3s", "4s", "5s")], True), False, False,
                          10) == {"pass"}
    quads = [_card(r + s) for r in "59" for s in "csdh"] + [_card("3c")]
    pair2 = classify([_card("2c"), _card("2d")], True)
    two = classify([_card("2c")], True)
    assert expected_moves(hqb, quads, two, False, False, 10) == {"pass", "5555", "9999"}
    assert expected_moves(hqb, quads, two, False, True, 10) == {"pass", "5555", "9999"}
    assert expected_moves(s666, quads, two, False, True, 10) == {"pass"}
    q7 = classify([_card("7" + s) for s in "csdh"], True)
    assert expected_moves(hqb, quads, q7, True, True, 10) == {"pass", "9999"}
    assert expected_moves(hqb, quads, q7, False, True, 10) == {"pass"}  # a led quad gives no chop right
    assert expected_moves(hqb, quads, pair2, False, False, 10) == {"pass"}
    online = RuleSet.parse("online")
    assert expected_moves(online, quads, pair2, False, False, 10) == {"pass", "55559999"}
    lone2 = [_card("2h")]
    assert expected_moves(s666, lone2, None, False, False, 10) == set()  # a stuck leader
    assert expected_moves(hqb, lone2, None, False, False, 10) == {"2"}
