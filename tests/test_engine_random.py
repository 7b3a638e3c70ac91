"""Random-simulation invariants, as OpenSpiel's game tests do.

At least 10,000 seeded games per preset, spread over every player count, half
with random Sâm answers and half where every seat answers ``no_sam`` (random
play declares Sâm at every other deal, and a Sâm game is short).  At every
decision: there is a legal move, a leader is never offered ``pass``, a seat
that follows always may pass, and every card is held or played exactly once.
Each game is bounded in length, its scores sum to 0, and its record replays
to the same result.

A small independent referee follows every game from its events alone (turn
order, rounds, stuck leaders, chop chains, đền làng, đền trắng, instant wins,
every payment of RULES §7) and must agree with the engine on whose turn it is
after every event and on the whole result.  The batched engine is checked too:
no illegal move, identical games from identical seeds, and the very same games
as :class:`Game` when its decisions are replayed there.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from sam_env import core
from sam_env.actions import PASS
from sam_env.batch import GameBatch, IllegalActionError, play_random
from sam_env.cards import parse_card
from sam_env.game import Game
from sam_env.record import replay_report
from sam_env.rules import PRESET_NAMES, RuleSet

GAMES_PER_PRESET = 10_000
TWO, A = 12, 11


# ---- an independent referee -----------------------------------------------------
def _straight_top(ranks: list[int], ace_low: bool) -> int:
    """Top position of a straight of these distinct ranks (RULES §3), or -1."""
    maps = []
    if TWO not in ranks:
        maps.append(sorted(14 if r == A else r + 3 for r in ranks))
    if ace_low:
        maps.append(sorted(1 if r == A else 2 if r == TWO else r + 3 for r in ranks))
    ok = [m[-1] for m in maps if len(set(m)) == len(m) >= 3 and m[-1] - m[0] == len(m) - 1]
    return ok[0] if ok else -1


def instant_pattern(cards: list[int], rs: RuleSet) -> int:
    """Index (RULES §4 priority) of the best enabled pattern of a dealt hand, or 99."""
    counts = Counter(c // 4 for c in cards)
    red = sum(c % 4 >= 2 for c in cards)
    has = {
        "dragon": len(counts) == 10 and _straight_top(sorted(counts), rs.ace_low_straights) >= 0,
        "four_twos": counts[TWO] == 4,
        "same_color": red in (0, 10),
        "three_triples": sum(v >= 3 for v in counts.values()) >= 3,
        "five_pairs": sum(v // 2 for v in counts.values()) >= 5,
        "poor_hand": not any(counts[r] for r in (7, 8, 9, 10)),
        "rich_hand": not any(counts[r] for r in range(7)),
    }
    order = ("dragon", "four_twos", "same_color", "three_triples", "five_pairs", "poor_hand", "rich_hand")
    return min((i for i, p in enumerate(order) if p in rs.instant_wins and has[p]), default=99)


class Referee:
    """Follows a game from its deal and events with RULES read afresh: who acts
    next, and how the game ends and pays.  Shares no code with the engine."""

    def __init__(self, rs: RuleSet, hands: list[list[int]], opener: int):
        self.rs, self.n = rs, len(hands)
        self.hands = [Counter(c // 4 for c in h) for h in hands]
        self.played = [False] * self.n
        self.scores = [0] * self.n
        self.chops: list[dict[str, int]] = []
        self.end = self.winner = self.den = self.instant = None
        self.declarer = None
        # (kind, length, key, seat, was_chop); kinds 1–4 same rank, 5 straight, 6 double quad
        self.top = None
        self.passed: set[int] = set()
        self.chain = [0, -1, -1]  # value, last chopped, last chopper
        self.pending_den = None  # T after a non-highest single played while W had báo 1
        self.den_trang = None
        self.skipped_leaders = 0
        best = [(instant_pattern(hands[(opener + i) % self.n], rs), i) for i in range(self.n)]
        pat, i = min(best)
        if pat < 99:
            w = (opener + i) % self.n
            self.instant = ("dragon", "four_twos", "same_color", "three_triples", "five_pairs",
                            "poor_hand", "rich_hand")[pat]
            for s in range(self.n):
                if s != w:
                    v = rs.instant_win + (self._penalty(s) if rs.instant_win_adds_penalties else 0)
                    self._pay(s, w, v)
            self._finish("instant_win", w)
            return
        self.phase = "sam" if rs.sam_declaration else "play"
        self.asked = 0
        self.to_act = opener
        self.opener = opener

    # ---- bookkeeping
    def _pay(self, frm: int, to: int, v: int) -> None:
        self.scores[frm] -= v
        self.scores[to] += v

    def _finish(self, end: str, winner: int | None) -> None:
        self.end, self.winner, self.phase, self.to_act = end, winner, "over", None

    def _size(self, s: int) -> int:
        return sum(self.hands[s].values())

    def _penalty(self, s: int) -> int:
        h = self.hands[s]
        return self.rs.two_left * h[TWO] + self.rs.quad_left * sum(v == 4 for v in h.values())

    def _base(self, s: int) -> int:
        c = self.rs.cong if (not self.played[s] and self.rs.cong is not None) else self._size(s)
        return c + self._penalty(s)

    def _stuck(self, s: int) -> bool:
        return self.rs.finish_with_two == "forbidden" and self._size(s) == 1 and self.hands[s][TWO] == 1

    def _settle(self) -> None:
        v, frm, to = self.chain
        if to >= 0 and v:
            self._pay(frm, to, v)
            self.chops.append({"from": frm, "to": to, "amount": v})
        self.chain = [0, -1, -1]

    def _chop_right(self, s: int) -> bool:
        kind, _, key, _, was_chop = self.top
        if not self.rs.passed_can_chop:
            return False
        quads = [r for r, v in self.hands[s].items() if v == 4]
        if kind == 1 and key == TWO:
            return self.rs.quad_chops_single_two and bool(quads)
        return kind == 4 and was_chop and any(r > key for r in quads)

    def _new_round(self, leader: int) -> None:
        if self.declarer is None:
            self._settle()
        self.top, self.passed, self.pending_den = None, set(), None
        for i in range(self.n):
            s = (leader + i) % self.n
            if not self._stuck(s):
                self.to_act = s
                self.skipped_leaders += i
                return
        self._finish("draw", None)

    def _advance(self, cur: int) -> None:
        for i in range(1, self.n + 1):
            s = (cur + i) % self.n
            if s == self.top[3]:
                return self._new_round(s)
            if s not in self.passed or self._chop_right(s):
                self.to_act = s
                return

    # ---- events
    def sam(self, seat: int, declare: bool) -> None:
        assert self.phase == "sam" and seat == self.to_act
        if declare:
            self.declarer, self.phase = seat, "play"
            return
        self.asked += 1
        if self.asked == self.n:
            self.phase, self.to_act = "play", self.opener
        else:
            self.to_act = (seat + 1) % self.n

    def pass_(self, seat: int, held_a_play: bool) -> None:
        if self.declarer is not None and seat != self.declarer and held_a_play and self.den_trang is None:
            self.den_trang = seat
        self.pending_den = None
        self.passed.add(seat)
        self._advance(seat)

    def play(self, seat: int, cards: list[int]) -> None:
        n, rs = self.n, self.rs
        ranks = sorted(c // 4 for c in cards)
        cnt = Counter(ranks)
        if len(cnt) == 1:
            kind, key = len(ranks), ranks[0]
        elif len(cnt) == 2:  # two quads
            kind, key = 6, min(ranks) * 13 + max(ranks)
        else:
            kind, key = 5, _straight_top(ranks, rs.ace_low_straights)
        den_from = self.pending_den
        self.pending_den = None
        w = (seat + 1) % n
        h = self.hands[seat]
        if kind == 1 and self._size(w) == 1 and key != max(r for r, v in h.items() if v):
            assert rs.bao_mot == "penalty", "báo 1 enforced: only the highest single is legal"
            self.pending_den = seat
        chop = None
        if self.top is not None:
            tk, _, tkey, tseat, _ = self.top
            if kind == 4 and (tk == 4 or (tk == 1 and tkey == TWO)):
                chop = rs.chop_quad if tk == 4 else rs.chop_two
            elif kind == 6:
                chop = 2 * rs.chop_two
            if chop is not None:
                self.chain = [self.chain[0] + chop, tseat, seat]
        for r in ranks:
            h[r] -= 1
        self.played[seat] = True
        self.top = (kind, len(ranks), key, seat, chop is not None)
        self.passed.discard(seat)
        d = self.declarer
        if d is not None and seat != d:  # the Sâm is broken: its payment only
            if rs.sam_fail_to_blocker:
                self._pay(d, seat, rs.sam_fail * (n - 1))
            else:
                for s in range(n):
                    if s != d:
                        self._pay(d, s, rs.sam_fail)
            return self._finish("sam_failed", seat)
        if self._size(seat) == 0:
            if d == seat:
                if rs.sam_success_den and self.den_trang is not None:
                    self._pay(self.den_trang, d, rs.sam_win * (n - 1))
                    self.den = self.den_trang
                else:
                    for s in range(n):
                        if s != d:
                            self._pay(s, d, rs.sam_win)
                return self._finish("sam_success", seat)
            self._settle()
            t = (seat - 1) % n
            if den_from == t:
                self._pay(t, seat, sum(self._base(s) for s in range(n) if s != seat))
                self.den = t
            else:
                for s in range(n):
                    if s != seat:
                        self._pay(s, seat, self._base(s))
            return self._finish("won", seat)
        self._advance(seat)

    def result(self) -> dict:
        return {"end": self.end, "winner": self.winner, "scores": self.scores, "instant": self.instant,
                "den": self.den, "chops": self.chops}


# ---- the sweep ---------------------------------------------------------------------
def _max_decisions(n: int) -> int:
    # n Sâm answers; at most 10n plays (each plays a card); between two plays,
    # or before a round ends, each other seat passes at most once.
    return n + 10 * n * n


def play_checked(game: Game, rng: random.Random, no_sam: bool, stats: Counter) -> None:
    """Play one game at random, checking every invariant at every decision."""
    n = game.players
    dealt = [game.hand(s) for s in range(n)]
    ref = Referee(game.rules, dealt, game.opener)
    dealt_counts = np.zeros((core.MAX_PLAYERS, 13), dtype=np.int32)
    for s, h in enumerate(dealt):
        for c in h:
            dealt_counts[s, c // 4] += 1
    st = game.state
    steps = 0
    while not game.finished:
        assert game.to_act == ref.to_act and game.phase == ref.phase, f"turn: {game.events[-3:]}"
        held = st[core.O_HAND:core.O_HAND + 65].reshape(5, 13)
        played = st[core.O_PLAYED:core.O_PLAYED + 65].reshape(5, 13)
        assert np.array_equal(held + played, dealt_counts), "a card is lost or doubled"
        assert np.array_equal(held.sum(1), st[core.O_SIZE:core.O_SIZE + 5])
        legal = game.legal_actions()
        assert legal, "a decision without a legal move"
        if game.phase == "play":
            assert (PASS in legal) == (game.top is not None), "pass is offered exactly to followers"
            stats["decisions"] += 1
        if game.phase == "sam" and no_sam:
            a = 2
        else:
            a = rng.choice(legal)
        seat = game.to_act
        ev = game.apply(a)
        steps += 1
        assert steps <= _max_decisions(n)
        if ev["type"] == "sam":
            ref.sam(seat, ev["declare"])
        elif ev["type"] == "pass":
            ref.pass_(seat, len(legal) > 1)
        else:
            ref.play(seat, [parse_card(c) for c in ev["cards"]])
    assert ref.phase == "over", f"the referee expected seat {ref.to_act} to act"
    res = game.result
    assert sum(res.scores) == 0
    assert res.to_json() == ref.result()
    assert int(st[core.O_NDEC]) == len(game.events) == steps
    # every card exactly once: in its seat's hand or in a play of that seat
    plays = [parse_card(c) for e in game.events if e["type"] == "play" for c in e["cards"]]
    assert len(plays) == len(set(plays))
    for s in range(n):
        mine = [parse_card(c) for e in game.events if e["type"] == "play" and e["seat"] == s
                for c in e["cards"]]
        assert sorted(mine + game.hand(s)) == dealt[s]
    rec = game.to_record()
    assert replay_report(rec) == {"ok": True, "finished": True, "result": res.to_json()}
    stats[res.end] += 1
    stats["chops"] += len(res.chops)
    stats["den"] += res.den is not None
    stats["stuck leaders"] += ref.skipped_leaders


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESET_NAMES)
def test_random_games_keep_every_invariant(preset, deal_for):
    rs = RuleSet.parse(preset)
    counts = range(2, rs.max_players + 1)
    per_count = math.ceil(GAMES_PER_PRESET / len(counts))
    stats: Counter[str] = Counter()
    for players in counts:
        rng = random.Random(f"random-{preset}-{players}")
        for seed in range(per_count):
            play_checked(deal_for(rs, players, seed), rng, (seed // 2) % 2 == 0, stats)
    ends = ("won", "instant_win", "sam_success", "sam_failed", "draw")
    assert sum(stats[e] for e in ends) >= GAMES_PER_PRESET
    # the random games reach every way a game can end under this preset
    assert stats["won"] > GAMES_PER_PRESET // 3 and stats["sam_failed"] > 100 and stats["sam_success"] > 0
    assert (stats["chops"] > 100) == bool(rs.chop_two or rs.chop_quad)
    assert (stats["instant_win"] > 50) == bool(rs.instant_wins)
    if rs.finish_with_two == "forbidden":
        assert stats["stuck leaders"] > 10
    if rs.bao_mot == "penalty" or rs.sam_success_den:
        assert stats["den"] > 0


# ---- the batched engine ------------------------------------------------------------
@pytest.mark.parametrize("no_sam", [True, False])
def test_batched_random_play_is_always_legal(engine_cfg, no_sam):
    rules, players = engine_cfg
    out = play_random(RuleSet.parse(rules), players, games=3000, seed=11, batch=64, no_sam=no_sam)
    assert out["illegal"] == 0
    assert out["games"] == 3000
    assert out["decisions"] > 3000 * (20 if no_sam else 2)


def _run_batch(rules, players: int, seed: int, steps: int, num_games: int = 32):
    """Step a GameBatch with seeded random legal actions; log each finished game."""
    b = GameBatch(RuleSet.parse(rules), players, num_games=num_games, seed=seed)
    rng = np.random.default_rng(seed)
    deals = [b.deals[g].copy() for g in range(num_games)]
    openers = [int(b.states[g, core.O_OPENER]) for g in range(num_games)]
    acts: list[list[int]] = [[] for _ in range(num_games)]
    totals = np.zeros((num_games, core.MAX_PLAYERS), dtype=np.int64)
    finished = []
    trace = []
    for _ in range(steps):
        masks = b.legal_masks()
        assert (masks.sum(1) > 0).all()
        leaders = b.states[:, core.O_TOP] < 0
        in_play = b.states[:, core.O_PHASE] == core.PH_PLAY
        assert not masks[leaders & in_play, PASS].any()
        held = b.states[:, core.O_HAND:core.O_HAND + 65].reshape(-1, 5, 13)
        played = b.states[:, core.O_PLAYED:core.O_PLAYED + 65].reshape(-1, 5, 13)
        dealt = np.zeros_like(held)
        for g in range(num_games):
            for s in range(players):
                np.add.at(dealt[g, s], b.deals[g, s] // 4, 1)
        assert np.array_equal(held + played, dealt)
        a = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        for g in range(num_games):
            acts[g].append(int(a[g]))
        rewards, done = b.step(a)
        assert (rewards.sum(1) == 0).all()
        totals += rewards
        trace.append(b.states.copy())
        for g in np.flatnonzero(done):
            finished.append((deals[g], openers[g], acts[g], totals[g, :players].copy()))
            deals[g], openers[g] = b.deals[g].copy(), int(b.states[g, core.O_OPENER])
            acts[g], totals[g] = [], 0
    return finished, trace


@pytest.mark.slow
def test_game_batch_is_reproducible_and_matches_game():
    rules = "mien_bac"
    f1, t1 = _run_batch(rules, 4, seed=5, steps=200)
    f2, t2 = _run_batch(rules, 4, seed=5, steps=200)
    assert all(np.array_equal(x, y) for x, y in zip(t1, t2))
    def plain(fin):
        return [(d.tolist(), o, a, s.tolist()) for d, o, a, s in fin]
    assert plain(f1) == plain(f2)
    _, t3 = _run_batch(rules, 4, seed=6, steps=5)
    assert not np.array_equal(t1[4], t3[4])
    assert len(f1) > 40
    for hands, opener, actions, scores in f1:  # the very same game through the readable API
        g = Game.from_deal(rules, [h.tolist() for h in hands], opener)
        for a in actions:
            g.apply(a)
        assert g.finished and list(g.result.scores) == scores.tolist()


def test_game_batch_refuses_an_illegal_action():
    with pytest.raises(TypeError, match="rules must be a RuleSet"):  # libraries take the parsed value
        GameBatch("hoi_quan_bai", 3, num_games=4, seed=1)  # type: ignore[arg-type]
    b = GameBatch(RuleSet.parse("hoi_quan_bai"), 3, num_games=4, seed=1)
    masks = b.legal_masks()
    a = masks.argmax(1).astype(np.int64)
    bad = int(np.flatnonzero(masks[2] == 0)[0])
    a[2] = bad
    with pytest.raises(IllegalActionError, match="game 2"):
        b.step(a)
    with pytest.raises(ValueError, match="shape"):
        b.step(np.zeros(3, dtype=np.int64))
