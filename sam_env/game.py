"""The readable API: a :class:`Game` you can deal, replay, inspect and play.

``Game`` is a thin Python shell around one row of the compiled engine
(:mod:`sam_env.core`).  It adds what the kernels leave out on purpose: which
suits each seat holds (records name cards, and the ``same_color`` instant win
needs them), the list of events, and error messages a person understands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import core, seeding
from .actions import (ACT_COUNTS, ACT_KIND, ACTION_NAMES, NO_SAM, NUM_ACTIONS, PASS, SAM,
                      action_from_counts, move_str, parse_move)
from .cards import (DEFAULT_PLAYERS, HAND_SIZE, NUM_CARDS, NUM_RANKS, CardError, card_str, cards_str,
                    parse_card, parse_cards, rank_counts)
from .rules import DEFAULT_PRESET, INSTANT_PATTERNS, RuleSet


def cards_for(held: Iterable[int], action: int) -> list[int]:
    """The cards a play gives up: the lowest suits of each rank it needs (suits never matter)."""
    out: list[int] = []
    for r in range(NUM_RANKS):
        need = int(ACT_COUNTS[action, r])
        if need:
            out += sorted(c for c in held if c // 4 == r)[:need]
    return out


class GameError(ValueError):
    """An event or move that the rules do not allow here."""


@dataclass(frozen=True)
class Chop:
    frm: int
    to: int
    amount: int

    def to_json(self) -> dict[str, int]:
        return {"from": self.frm, "to": self.to, "amount": self.amount}


@dataclass(frozen=True)
class Result:
    """How a game ended (RULES §8, PROTOCOL §3)."""

    end: str
    winner: int | None
    scores: tuple[int, ...]
    instant: str | None = None
    den: int | None = None
    chops: tuple[Chop, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"end": self.end, "winner": self.winner, "scores": list(self.scores),
                "instant": self.instant, "den": self.den, "chops": [c.to_json() for c in self.chops]}


_MAX_EVENTS = 2000  # far above any real game; a longer record is refused

# PROTOCOL §2 event shapes are exact: a field that means nothing for the kind is refused, not ignored.
EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "sam": ("seat", "type", "declare"),
    "pass": ("seat", "type"),
    "play": ("seat", "type", "cards"),
}


_ANY_EVENT_FIELD = frozenset(f for fields in EVENT_FIELDS.values() for f in fields)
_KIND_FIELDS = {kind: frozenset(fields) for kind, fields in EVENT_FIELDS.items()}


def check_event_fields(ev: Mapping[str, Any]) -> None:
    """Refuse a field no event has, or one the event's kind does not have (a pass with cards)."""
    typ = ev.get("type")
    allowed = _KIND_FIELDS.get(typ) if isinstance(typ, str) else None
    if allowed is not None and ev.keys() <= allowed:
        return  # the usual case, kept cheap: a replay checks every event
    extra = [k for k in ev if k not in _ANY_EVENT_FIELD]
    if extra:
        raise GameError(f"unknown event field {sorted(extra, key=str)[0]!r}")
    if allowed is not None:
        odd = next(k for k in ev if k not in allowed)
        raise GameError(f"a {typ} event has no {odd!r} field (its fields are {', '.join(EVENT_FIELDS[typ])})")


class Game:
    """One game of Sâm lốc.

    Build it with :meth:`new` (a seeded random deal), :meth:`from_deal`,
    :meth:`from_view` (one seat's knowledge), or from a record with
    :func:`sam_env.record.replay`.  Then
    read ``to_act``, ``phase``, :meth:`legal_moves`, and :meth:`apply`
    decisions until ``result`` is set.

    ``new``, ``from_deal`` and ``from_view`` are the readable API a person calls: they take a
    preset name or a rules object too and parse it (``RuleSet.parse``); the constructor takes
    the parsed :class:`RuleSet`.
    """

    def __init__(self, rules: RuleSet, players: int,
                 hands: Sequence[Sequence[int] | None], opener: int, *, view_seat: int | None = None):
        self.rules = rules
        self.players = self.rules.check_players(players)
        if isinstance(opener, bool) or not isinstance(opener, int) or not 0 <= opener < players:
            raise GameError(f"opener must be a seat from 0 to {players - 1}")
        if len(hands) != players:
            raise GameError(f"hands must list {players} hands, one per seat (got {len(hands)})")
        self.opener = opener
        self.view_seat = view_seat
        self._ru = self.rules.to_array()
        self._st = np.zeros(core.STATE_SIZE, dtype=np.int32)
        self._cards: list[set[int] | None] = [None if h is None else set(h) for h in hands]
        self._deal: list[list[int] | None] = [None if h is None else list(h) for h in hands]
        self._played: set[int] = set()
        self.events: list[dict[str, Any]] = []
        hidden = 0
        arr = np.zeros((core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
        for s, h in enumerate(hands):
            if h is None:
                hidden |= 1 << s
            else:
                arr[s, :] = h
        core.start_game(self._st, self._ru, arr, players, opener, hidden)

    # ---- construction ------------------------------------------------------
    @classmethod
    def new(cls, rules: RuleSet | str | Mapping[str, Any] = DEFAULT_PRESET,
            players: int = DEFAULT_PLAYERS, seed: int | None = None, opener: int | None = None,
            deal: int = 0) -> "Game":
        """Deal ``deal`` of ``seed`` (:mod:`sam_env.seeding`): the cards and opener that the
        batches, the envs and ``samloc eval`` deal for that seed.  It may be an instant win,
        already over.  ``seed=None`` draws a seed from the OS; ``opener`` replaces the dealt one.
        """
        rs = RuleSet.parse(rules)
        rs.check_players(players)
        if isinstance(deal, bool) or not isinstance(deal, int) or deal < 0:
            raise ValueError(f"deal must be a non-negative integer, not {deal!r}")
        rng = seeding.stream(seeding.fresh_seed() if seed is None else seed)
        rule_array = rs.to_array()
        arr = np.zeros((core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
        for _ in range(deal + 1):
            dealt = int(core.random_deal(rng, 0, rule_array, players, arr))
        hands = [sorted(int(c) for c in arr[s]) for s in range(players)]
        return cls(rs, players, hands, dealt if opener is None else opener)

    @classmethod
    def from_deal(cls, rules: RuleSet | str | Mapping[str, Any], hands: Sequence[Sequence[str | int]],
                  opener: int = 0) -> "Game":
        """A game from a deal given as card strings (or ids); checks the deal."""
        rs = RuleSet.parse(rules)
        if not isinstance(hands, (list, tuple)):
            raise GameError("hands must be a list of hands")
        players = rs.check_players(len(hands))
        seen: dict[int, int] = {}
        parsed = []
        for s, h in enumerate(hands):
            if not isinstance(h, (list, tuple)):
                raise GameError(f"hand of seat {s} must be a list of cards")
            cards = [c if isinstance(c, int) and not isinstance(c, bool) and 0 <= c < NUM_CARDS
                     else parse_card(c) for c in h]
            if len(cards) != HAND_SIZE:
                raise GameError(f"seat {s} holds {len(cards)} cards; a hand has {HAND_SIZE}")
            for c in cards:
                if c in seen:
                    raise GameError(f"{card_str(c)} is dealt twice (seats {seen[c]} and {s})")
                seen[c] = s
            parsed.append(cards)
        return cls(rs, players, parsed, opener)

    @classmethod
    def from_view(cls, rules: RuleSet | str | Mapping[str, Any], players: int, opener: int, seat: int,
                  hand: Sequence[str | int], events: Iterable[Mapping[str, Any]]) -> "Game":
        """One seat's view: its cards *now* and the public events so far.

        The other hands are unknown; their moves are checked against what is
        public.  Where only hidden cards could tell whose turn it is (a chop
        right, a stuck leader), the events decide.  The view must be of an
        unfinished game with ``seat`` to act; GameError names the problem of
        an inconsistent one.
        """
        rs = RuleSet.parse(rules)
        rs.check_players(players)
        if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < players:
            raise GameError(f"seat must be a seat from 0 to {players - 1}")
        if not isinstance(hand, (list, tuple)):
            raise GameError("hand must be a list of cards")
        try:
            now = [c if isinstance(c, int) and not isinstance(c, bool) and 0 <= c < NUM_CARDS
                   else parse_card(c) for c in hand]
        except CardError as exc:
            raise GameError(f"hand: {exc}") from None
        if len(set(now)) != len(now):
            dup = next(c for c in now if now.count(c) > 1)
            raise GameError(f"hand has {card_str(dup)} twice")
        events = list(events)
        own_played: list[int] = []
        for i, ev in enumerate(events):
            if isinstance(ev, Mapping) and ev.get("seat") == seat and ev.get("type") == "play" \
                    and isinstance(ev.get("cards"), list):
                try:
                    own_played += [parse_card(c) for c in ev["cards"]]
                except CardError as exc:
                    raise GameError(f"event {i}: {exc}") from None
        overlap = set(now) & set(own_played)
        if overlap:
            raise GameError(f"hand holds {card_str(min(overlap))}, which seat {seat} already played")
        if len(now) + len(own_played) != HAND_SIZE:
            raise GameError(f"seat {seat} holds {len(now)} cards and has played {len(own_played)};"
                            f" that is not the {HAND_SIZE} it was dealt")
        hands: list[list[int] | None] = [None] * players
        hands[seat] = now + own_played
        game = cls(rs, players, hands, opener, view_seat=seat)
        pattern = int(core.instant_pattern(np.array(hands[seat], dtype=np.int64), game._ru))
        if pattern >= 0:  # RULES §4: then the game ended at the deal, whoever won it
            raise GameError(f"seat {seat} was dealt an instant win ({INSTANT_PATTERNS[pattern]}):"
                            " the game ended at the deal")
        game.apply_events(events)
        if game.finished:
            raise GameError(game._over_msg())
        if game.to_act != seat:
            game._take_hidden_turns(seat)
            if game.to_act != seat:
                raise GameError(f"it is seat {game.to_act}'s turn, not seat {seat}'s")
        return game

    # ---- state ---------------------------------------------------------------
    @property
    def to_act(self) -> int | None:
        t = int(self._st[core.O_TO_ACT])
        return None if t < 0 else t

    @property
    def phase(self) -> str:
        return core.PHASE_NAMES[int(self._st[core.O_PHASE])]

    @property
    def finished(self) -> bool:
        return int(self._st[core.O_PHASE]) == core.PH_OVER

    @property
    def state(self) -> np.ndarray:
        """The engine's state row (read it with the ``core.O_*`` offsets; do not write)."""
        return self._st

    @property
    def rules_array(self) -> np.ndarray:
        return self._ru

    def hand(self, seat: int) -> list[int] | None:
        """Cards ``seat`` holds now (sorted ids), or None if they are hidden."""
        c = self._cards[seat]
        return None if c is None else sorted(c)

    def hand_size(self, seat: int) -> int:
        return int(self._st[core.O_SIZE + seat])

    @property
    def declarer(self) -> int | None:
        d = int(self._st[core.O_DECLARER])
        return None if d < 0 else d

    @property
    def top(self) -> int | None:
        """Action on top of the current round, or None when a lead is due."""
        t = int(self._st[core.O_TOP])
        return None if t < 0 else t

    @property
    def result(self) -> Result | None:
        st = self._st
        if st[core.O_PHASE] != core.PH_OVER:
            return None
        n = self.players
        w = int(st[core.O_WINNER])
        inst = int(st[core.O_INSTANT])
        den = int(st[core.O_DEN])
        chops = tuple(Chop(int(st[core.O_CHOPS + 3 * i]), int(st[core.O_CHOPS + 3 * i + 1]),
                           int(st[core.O_CHOPS + 3 * i + 2])) for i in range(int(st[core.O_NCHOPS])))
        return Result(end=core.END_NAMES[int(st[core.O_END])], winner=None if w < 0 else w,
                      scores=tuple(int(x) for x in st[core.O_SCORE:core.O_SCORE + n]),
                      instant=None if inst < 0 else INSTANT_PATTERNS[inst],
                      den=None if den < 0 else den, chops=chops)

    def legal_actions(self) -> list[int]:
        buf = np.empty(NUM_ACTIONS, dtype=np.int64)
        k = core.legal_actions(self._st, self._ru, buf)
        return [int(a) for a in buf[:k]]

    def legal_moves(self) -> list[str]:
        return [ACTION_NAMES[a] for a in self.legal_actions()]

    def legal_mask(self) -> np.ndarray:
        mask = np.zeros(NUM_ACTIONS, dtype=np.int8)
        core.legal_mask(self._st, self._ru, mask)
        return mask

    def copy(self) -> "Game":
        g = Game.__new__(Game)
        g.__dict__.update(self.__dict__)
        g._st = self._st.copy()
        g._cards = [None if c is None else set(c) for c in self._cards]
        g._played = set(self._played)
        g.events = list(self.events)
        return g

    # ---- playing ---------------------------------------------------------------
    def apply(self, move: int | str | Mapping[str, Any]) -> dict[str, Any]:
        """Apply a decision of the seat to act: an action id, a move string, or
        a record event (which may name another seat: then it must be its turn).

        Returns the event as recorded.  Raises GameError (state unchanged).
        """
        if isinstance(move, Mapping):
            return self._apply_event(move)
        if isinstance(move, str):
            try:
                a = parse_move(move)
            except ValueError as exc:
                raise GameError(str(exc)) from None
        elif (isinstance(move, (int, np.integer)) and not isinstance(move, bool)
                and 0 <= int(move) < NUM_ACTIONS):
            a = int(move)
        else:
            raise GameError(f"unknown move {move!r}")
        seat = self.to_act
        if seat is None:
            raise GameError(self._over_msg())
        cards = None
        if ACT_KIND[a] >= 3:
            held = self._cards[seat]
            if held is None:
                raise GameError(f"the cards of seat {seat} are hidden: give the play as an event"
                                " with its cards")
            cards = cards_for(held, a)
        return self._do(seat, a, cards)

    def apply_events(self, events: Iterable[Mapping[str, Any]]) -> None:
        """Apply events in order; a GameError says ``event i: ...``."""
        for i, ev in enumerate(events):
            if i >= _MAX_EVENTS:
                raise GameError(f"event {i}: a game has far fewer than {_MAX_EVENTS} decisions")
            try:
                self._apply_event(ev)
            except (GameError, CardError) as exc:
                raise GameError(f"event {i}: {exc}") from None

    def _apply_event(self, ev: Mapping[str, Any]) -> dict[str, Any]:
        if type(ev) is not dict and not isinstance(ev, Mapping):  # dict first: the ABC check is slow
            raise GameError("an event must be an object with seat and type")
        check_event_fields(ev)
        seat, typ = ev.get("seat"), ev.get("type")
        if isinstance(seat, bool) or not isinstance(seat, int) or not 0 <= seat < self.players:
            raise GameError(f"seat must be a seat from 0 to {self.players - 1}, not {seat!r}")
        if self.finished:
            raise GameError(self._over_msg())
        if typ == "sam":
            dec = ev.get("declare")
            if not isinstance(dec, bool):
                raise GameError("a sam event needs \"declare\": true or false")
            a, cards = (SAM if dec else NO_SAM), None
        elif typ == "pass":
            a, cards = PASS, None
        elif typ == "play":
            cards = ev.get("cards")
            if not isinstance(cards, list) or not cards:
                raise GameError("a play event needs \"cards\": a non-empty list of cards")
            ids = parse_cards(cards, "the play")
            a = action_from_counts(rank_counts(ids))
            if a < 0:
                raise GameError(f"{' '.join(cards_str(ids))} is not a combination")
            cards = ids
        else:
            raise GameError(f"unknown event type {typ!r} (expected sam, pass or play)")
        if seat != self.to_act:
            self._take_hidden_turns(seat)
            if seat != self.to_act:
                raise GameError(f"it is seat {self.to_act}'s turn, not seat {seat}'s")
        if cards is not None:
            held = self._cards[seat]
            if held is not None:
                missing = [c for c in cards if c not in held]
                if missing:
                    raise GameError(f"seat {seat} does not hold {card_str(missing[0])}")
            else:
                for c in cards:
                    if c in self._played:
                        raise GameError(f"{card_str(c)} was already played")
                    if any(h is not None and c in h for h in self._cards):
                        raise GameError(f"seat {seat} cannot hold {card_str(c)}")
        return self._do(seat, a, cards)

    def _take_hidden_turns(self, seat: int) -> None:
        """In a seat's view, skip hidden seats that the engine gave a turn they
        may not have had, until ``seat`` is to act or no such turn is left."""
        for _ in range(self.players):
            t = self.to_act
            if t is None or t == seat or self._cards[t] is not None:
                return
            st = self._st
            maybe_stuck = (st[core.O_TOP] < 0 and self.rules.finish_with_two == "forbidden"
                           and st[core.O_SIZE + t] == 1)
            maybe_chop = st[core.O_TOP] >= 0 and st[core.O_PASSED + t] != 0
            if not (maybe_stuck or maybe_chop):
                return
            core.skip_turn(st, self._ru)

    def _do(self, seat: int, a: int, cards: list[int] | None) -> dict[str, Any]:
        code = core.check_action(self._st, self._ru, seat, a)
        if code != core.OK:
            raise GameError(self._explain(code, seat, a))
        core.apply_action(self._st, self._ru, a)
        if a in (SAM, NO_SAM):
            ev = {"seat": seat, "type": "sam", "declare": a == SAM}
        elif a == PASS:
            ev = {"seat": seat, "type": "pass"}
        else:
            assert cards is not None
            held = self._cards[seat]
            if held is not None:
                held.difference_update(cards)
            self._played.update(cards)
            ev = {"seat": seat, "type": "play", "cards": cards_str(cards)}
        self.events.append(ev)
        return ev

    def _over_msg(self) -> str:
        return f"the game is already over ({core.END_NAMES[int(self._st[core.O_END])]})"

    def _explain(self, code: int, seat: int, a: int) -> str:
        st, n = self._st, self.players
        top = int(st[core.O_TOP])
        name = move_str(a)
        if code == core.ERR_PHASE:
            return self._over_msg()
        if code == core.ERR_NOT_SAM:
            return f"seat {seat} must first answer the Sâm question (sam or no_sam)"
        if code == core.ERR_NO_SAM_DECL:
            return "the Sâm question is only asked before the first play"
        if code == core.ERR_NOT_HELD:
            return f"seat {seat} does not hold {name}"
        if code == core.ERR_LEADER_PASS:
            return f"seat {seat} leads this round and may not pass"
        if code == core.ERR_DQUAD_ONLY:
            if not self.rules.double_quad_chops_pair_two:
                return f"double quads are not played under {self.rules.name}"
            return "a double quad may only be played on a pair of 2s"
        if code == core.ERR_NOT_BEAT:
            return f"{name} does not beat {move_str(top)}"
        if code == core.ERR_PASSED:
            return f"seat {seat} passed in this round: it may only pass or chop"
        if code == core.ERR_BAO_MOT:
            return (f"seat {(seat + 1) % n} has báo 1: seat {seat} may only play a single"
                    f" of its highest rank")
        if code == core.ERR_ACE_LOW:
            return f"{name} is not a straight under {self.rules.name} (no A-2-3 … straights)"
        if code == core.ERR_FINISH_TWO:
            return f"seat {seat} may not finish with 2s under {self.rules.name}"
        return f"{name} is not allowed here"

    # ---- records -------------------------------------------------------------------
    def to_record(self, with_result: bool = True) -> dict[str, Any]:
        if any(d is None for d in self._deal):
            raise GameError("a seat's view has hidden hands and cannot be written as a record")
        rec: dict[str, Any] = {
            "format": "samloc/1",
            "rules": self.rules.to_record(),
            "players": self.players,
            "opener": self.opener,
            "hands": [cards_str(h) for h in self._deal if h is not None],
            "events": list(self.events),
        }
        res = self.result
        if with_result and res is not None:
            rec["result"] = res.to_json()
        return rec

    def __repr__(self) -> str:
        return (f"Game({self.rules.name}, players={self.players}, phase={self.phase},"
                f" to_act={self.to_act}, events={len(self.events)})")
