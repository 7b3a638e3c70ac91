"""One seat's view of a game (Game.from_view): the seat's hand now and the
public events, the other hands unknown.

At every decision of the viewing seat in random full games, the view must
offer exactly the moves the full game offers — across every rule set,
including passed seats' chop rights (hoi_quan_bai) and stuck leaders (the
forbidden-2 presets), where only the events tell a view whose turn it was.
Inconsistent views raise GameError with a one-line message.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from sam_env import core
from sam_env.cards import card_str, parse_card
from sam_env.game import Game, GameError
from sam_env.rules import RuleSet

GAMES_PER_CONFIG = 600


def view_of(g: Game, seat: int, events=None, hand=None) -> Game:
    return Game.from_view(g.rules, g.players, g.opener, seat,
                          [card_str(c) for c in (g.hand(seat) if hand is None else hand)],
                          g.events if events is None else events)


def test_view_offers_the_same_moves_as_the_full_game(engine_cfg, deal_for):
    rules, players = engine_cfg
    rs = RuleSet.parse(rules)
    rng = random.Random(f"view-{rs.name}-{players}")
    seen: Counter[str] = Counter()
    for seed in range(GAMES_PER_CONFIG):
        g = deal_for(rs, players, seed)
        viewer = seed % players
        hidden_turns = 0  # turns the view had to resolve from the events since its last decision
        while not g.finished:
            if g.to_act == viewer:
                v = view_of(g, viewer)
                assert v.to_act == viewer and v.phase == g.phase
                assert sorted(v.legal_moves()) == sorted(g.legal_moves()), (seed, g.events)
                assert [v.hand_size(s) for s in range(players)] == [g.hand_size(s) for s in range(players)]
                assert v.top == g.top and v.declarer == g.declarer
                seen["views"] += 1
                seen["views after a hidden seat's chop right or stuck lead"] += hidden_turns > 0
                hidden_turns = 0
            st = g.state
            last = int(st[core.O_LAST])
            a = rng.choice(g.legal_actions())
            if g.phase == "sam":
                a = 1 if rng.random() < 0.1 else 2
            g.apply(a)
            t = g.to_act
            if t is None:
                continue
            if g.top is None and last >= 0 and t != last and last != viewer and int(st[core.O_DECLARER]) < 0:
                hidden_turns += 1  # a round ended and its last player was skipped as a stuck leader
                seen["stuck hidden leaders"] += 1
            if t != viewer and g.top is not None and st[core.O_PASSED + t]:
                hidden_turns += 1  # a hidden seat that passed takes its chop right
                seen["hidden chop rights"] += 1
    assert seen["views"] > 500
    if rs.finish_with_two == "forbidden":
        assert seen["stuck hidden leaders"] > 0
    if rs.passed_can_chop and players >= 3 and rs.quad_chops_single_two:
        assert seen["hidden chop rights"] > 3
        assert seen["views after a hidden seat's chop right or stuck lead"] > 3


def test_view_of_a_hidden_chop_right_and_a_stuck_leader():
    """The scripted cases: the events show whether a hidden seat took its turn."""
    passed = ["8c 3c 4d 6h 7c Tc Jd Qd Ah 3s",
              "2c 4c 6c 8s Jc Qc Kc 3d 7d Td",
              "9c 9d 9h 9s 3h 4h 6d 7s Ts Js",
              "5c 5d 5h 5s 4s 6s 8d Kd Qh 2d"]
    g = Game.from_deal("hoi_quan_bai", [h.split() for h in passed])
    for m in "no_sam no_sam no_sam no_sam 8 2 pass 5555 pass pass".split():
        g.apply(m)
    assert g.to_act == 2  # seat 2 passed on the 2 but may chop 5555 with 9999
    g.apply("9999")  # seat 3 sees seat 2 take that turn from the events
    v = view_of(g, 3)
    assert v.to_act == 3 and v.legal_moves() == g.legal_moves() == ["pass"]
    g = Game.from_deal("hoi_quan_bai", [h.split() for h in passed])
    for m in "no_sam no_sam no_sam no_sam 8 2 pass 5555 pass pass pass".split():
        g.apply(m)
    assert g.to_act == 3 and g.top is None  # seat 2 passed again: seat 3 leads
    v = view_of(g, 3)
    assert v.to_act == 3 and v.legal_moves() == g.legal_moves()
    # a view cannot know that a hidden seat holds no quad: the events say so when
    # the next event is another seat's (here seat 3 leads after seat 1's pass)
    no_right = {"preset": "hoi_quan_bai", "passed_can_chop": False}
    no_quad = Game.from_deal(no_right, [h.split() for h in passed])
    for m in "no_sam no_sam no_sam no_sam 8 2 pass 5555 pass pass".split():
        no_quad.apply(m)
    v = Game.from_view("hoi_quan_bai", 4, 0, 3, [card_str(c) for c in no_quad.hand(3)], no_quad.events)
    assert v.to_act == 3 and v.top is None
    stuck = ["4c 5c 6c 7c 8c 9c Tc Jc Qc 2d",
             "3s 5h 6d 7h 8d 9h Td Jh Qd 2h",
             "3c 3d 4d 4h Kc Kd Ks Ah Ac 2c"]
    g = Game.from_deal("mien_bac", [h.split() for h in stuck])
    for m in "no_sam no_sam no_sam 456789TJQ pass pass".split():
        g.apply(m)
    assert g.to_act == 1  # seat 0, stuck with a lone 2, is skipped as leader
    v = view_of(g, 1)
    assert v.to_act == 1 and v.legal_moves() == g.legal_moves() and "pass" not in v.legal_moves()


# ---- inconsistent views ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def midgame() -> Game:
    g = Game.new("hoi_quan_bai", 4, seed=7)
    rng = random.Random(7)
    def has_played(seat: int) -> bool:
        return any(e["type"] == "play" and e["seat"] == seat for e in g.events)
    while len(g.events) < 16 or not all(has_played(s) for s in range(4)):
        g.apply("no_sam" if g.phase == "sam" else rng.choice(g.legal_moves()))
        assert not g.finished
    return g


def _raises(match: str, fn, *args, **kw) -> str:
    with pytest.raises(GameError, match=match) as info:
        fn(*args, **kw)
    msg = str(info.value)
    assert "\n" not in msg and msg
    return msg


def test_consistent_view_of_the_midgame(midgame):
    v = view_of(midgame, midgame.to_act)
    assert v.legal_moves() == midgame.legal_moves()


def test_a_card_in_hand_that_this_seat_played(midgame):
    seat = midgame.to_act
    mine = [e for e in midgame.events if e["type"] == "play" and e["seat"] == seat]
    played = parse_card(mine[0]["cards"][0])
    hand = midgame.hand(seat)[1:] + [played]
    _raises("already played", view_of, midgame, seat, hand=hand)


def test_a_card_in_hand_that_another_seat_played(midgame):
    seat = midgame.to_act
    ev = next(e for e in midgame.events if e["type"] == "play" and e["seat"] != seat)
    hand = midgame.hand(seat)[1:] + [parse_card(ev["cards"][0])]
    i = midgame.events.index(ev)
    _raises(f"event {i}: seat {ev['seat']} cannot hold", view_of, midgame, seat, hand=hand)


@pytest.mark.parametrize("delta", [-1, +1])
def test_wrong_hand_size(midgame, delta):
    seat = midgame.to_act
    hand = midgame.hand(seat)
    if delta < 0:
        hand = hand[1:]
    else:
        dealt = {parse_card(c) for h in midgame.to_record()["hands"] for c in h}
        free = sorted(set(range(52)) - dealt)
        hand = hand + free[:1]
    _raises("not the 10 it was dealt", view_of, midgame, seat, hand=hand)


def test_not_this_seats_turn(midgame):
    seat = (midgame.to_act + 1) % 4
    _raises(f"it is seat {midgame.to_act}'s turn, not seat {seat}'s", view_of, midgame, seat)


def test_a_finished_game():
    hands = ["3c 4c 5c 6c 7c 8c 9c Tc Jc Kd",
             "3d 4d 5d 6d 7d 9d Td Qd Ah 2s",
             "3h 4h 5s 6s 8s 9s Js Qs Ks 2d"]
    g = Game.from_deal("hoi_quan_bai", [h.split() for h in hands])
    for m in "no_sam no_sam no_sam 3456789TJ pass pass K".split():
        g.apply(m)
    assert g.finished
    for seat in range(3):
        _raises("already over", view_of, g, seat)


@pytest.mark.parametrize("seat", [0, 2])
def test_a_view_whose_own_hand_is_an_instant_win(seat):
    """RULES §4: such a game ended at the deal, before any decision (the view
    cannot see the other hands, but its own is enough)."""
    dragon = "3s 4s 5s 6s 7c 8c 9c Tc Jc Qh".split()
    _raises("instant win \\(dragon\\)", Game.from_view, "hoi_quan_bai", 3, 1, seat, dragon, [])
    v = Game.from_view("s666pg", 3, seat, seat, dragon, [])  # no instant wins there
    assert v.legal_moves() == ["sam", "no_sam"]


def test_other_bad_views(midgame):
    seat = midgame.to_act
    hand = [card_str(c) for c in midgame.hand(seat)]
    with pytest.raises(ValueError, match="unknown card"):
        Game.from_view("hoi_quan_bai", 4, midgame.opener, seat, hand[1:] + ["Zq"], midgame.events)
    _raises("twice", Game.from_view, "hoi_quan_bai", 4, midgame.opener, seat, hand[:-1] + hand[:1],
            midgame.events)
    bad = list(midgame.events)
    i = next(k for k, e in enumerate(bad) if e["type"] == "pass")
    bad[i] = {"seat": (bad[i]["seat"] + 1) % 4, "type": "pass"}
    _raises(f"event {i}:", Game.from_view, "hoi_quan_bai", 4, midgame.opener, seat, hand, bad)
    _raises("seat must be", Game.from_view, "hoi_quan_bai", 4, midgame.opener, 7, hand, midgame.events)
