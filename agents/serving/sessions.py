"""The play page's sessions: a person at a table of bots (:class:`PlaySession`), kept in one SQLite
file that every worker process shares (:class:`SessionStore`), bounded and fair between clients
(:func:`client_key`), and each process's sessions as objects (:class:`LiveSessions`), so that a
request does not read and replay its session's state when no other process changed it."""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import sqlite3
import tempfile
import time
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from starlette.exceptions import HTTPException as StarletteHTTPException

from sam_env import core
from sam_env.actions import ACTION_NAMES, action_from_counts
from sam_env.cards import CardError, cards_str, parse_cards, rank_counts
from sam_env.game import Game, GameError, cards_for
from sam_env.table import Table

from .bots import Bot, decide_event
from .protocol import HumanMove, RequestError

MAX_SESSIONS = 512            # play-page sessions kept (SessionStore)
SESSIONS_PER_CLIENT = 8       # of them, for one client address
MIN_IDLE_S = 300.0            # a session must be idle this long before another client's may replace it
HISTORY_KEPT = 50             # the latest games' results a session keeps and shows (the totals count all:
                              # 2,077 games once made 228 KB answers)
MAX_SEED = 2**63 - 1


class PlaySession:
    """A person at a table of bots, game after game, with a running total.

    What the session store keeps of it is :meth:`to_json`: the table, the seed of its deals
    (the server's secret), the games finished and their running totals, the results of the latest
    :data:`HISTORY_KEPT` of them (older ones roll off, so a session's size is bounded however long
    it plays) and the events of the game in play; the constructor rebuilds the rest by replaying
    those events on the same deal."""

    def __init__(self, bot: Bot, table: Table, seat: int, seed: int, stand_in: bool = False, *,
                 sid: str | None = None, history: list[dict[str, Any]] | None = None, game: int = 1,
                 opener: int | None = None, events: list[dict[str, Any]] | None = None, played: int = 0,
                 totals: list[int] | None = None):
        """A new session by default (its first game dealt and played up to the person's turn), or
        the stored one ``to_json`` described."""
        self.id = sid or secrets.token_urlsafe(16)
        self.bot, self.table, self.seat, self.seed = bot, table, seat, seed
        self.stand_in = stand_in  # the heuristic, sitting in where no served bot was trained
        self.history: list[dict[str, Any]] = list(history or [])
        self.played = played      # games finished, the rolled-off ones included
        self.totals: list[int] = list(totals or [0] * table.players)
        self.game_no = game
        self._deal(opener)
        for ev in events or []:
            self._apply(ev)
        self.play_bots()

    @classmethod
    def from_json(cls, state: dict[str, Any], table: Table, bot: Bot, stand_in: bool,
                  sid: str) -> "PlaySession":
        """The session ``to_json`` stored (its ``rules`` and ``players`` read by the caller as ``table``,
        which chose the bot by it)."""
        return cls(bot, table, state["seat"], state["seed"], stand_in, sid=sid, history=state["history"],
                   game=state["game"], opener=state["opener"], events=state["events"], played=state["played"],
                   totals=state["totals"])

    def to_json(self) -> dict[str, Any]:
        return {**self.table.to_record(), "seat": self.seat,
                "seed": self.seed, "history": self.history, "played": self.played, "totals": self.totals,
                "game": self.game_no, "opener": self.game.opener, "events": self.game.events}

    def new_game(self) -> None:
        """Deal the next game: the previous winner opens it (the same opener after a draw)."""
        last = self.history[-1]
        self.game_no += 1
        self._deal(last["opener"] if last["winner"] is None else last["winner"])
        self.play_bots()

    def _deal(self, opener: int | None) -> None:
        seed = int(np.random.SeedSequence([self.seed, self.game_no]).generate_state(1)[0])
        self.game = Game.new(self.table.rules, self.table.players, seed=seed, opener=opener)
        self.log: list[dict[str, Any]] = []
        self.top: dict[str, Any] | None = None

    def human(self, move: HumanMove) -> None:
        g = self.game
        if g.finished:
            raise RequestError("this game is over: press Play again")
        if g.to_act != self.seat:
            raise RequestError(f"it is seat {g.to_act}'s turn")
        if (move.move is None) == (move.cards is None):
            raise RequestError("send either a move (pass, sam, no_sam) or the cards to play")
        if move.move == "pass":
            ev: dict[str, Any] = {"seat": self.seat, "type": "pass"}
        elif move.move in ("sam", "no_sam"):
            ev = {"seat": self.seat, "type": "sam", "declare": move.move == "sam"}
        else:
            if not move.cards:
                raise RequestError("select the cards to play first")
            ev = {"seat": self.seat, "type": "play", "cards": move.cards}
        try:
            self._apply(ev)
        except (GameError, CardError) as exc:
            raise RequestError(str(exc)) from None
        self.play_bots()

    def play_bots(self) -> None:
        g = self.game
        for _ in range(2000):
            if g.finished or g.to_act == self.seat:
                break
            s = g.to_act
            assert s is not None
            t = self.table
            view = Game.from_view(t.rules, t.players, g.opener, s, g.hand(s) or [], g.events)
            ev, _ = decide_event(self.bot, view, s)
            self._apply(ev)
        if g.finished and self.played < self.game_no:
            res = g.result
            assert res is not None
            entry = {"game": self.game_no, "opener": g.opener, **res.to_json()}
            self.history = (self.history + [entry])[-HISTORY_KEPT:]
            self.totals = [t + s for t, s in zip(self.totals, res.scores)]
            self.played = self.game_no

    def _apply(self, event: dict[str, Any]) -> None:
        g, st = self.game, self.game.state
        chops_before = int(st[core.O_NCHOPS])
        ev = g.apply(event)
        entry: dict[str, Any] = dict(ev)
        if ev["type"] == "play":
            a = action_from_counts(rank_counts(parse_cards(ev["cards"])))
            entry["move"] = ACTION_NAMES[a]
            entry["chop"] = bool(st[core.O_TOP_CHOP]) and int(st[core.O_TOP]) == a
            self.top = {"seat": ev["seat"], "cards": ev["cards"], "move": entry["move"]}
        else:
            entry["move"] = "pass" if ev["type"] == "pass" else ("sam" if ev["declare"] else "no_sam")
        if int(st[core.O_TOP]) < 0:
            self.top = None
        n = self.table.players
        entry.update(i=len(self.log), top=self.top,
                     sizes=[g.hand_size(s) for s in range(n)],
                     passed=[bool(st[core.O_PASSED + s]) for s in range(n)],
                     scores=[int(x) for x in st[core.O_SCORE:core.O_SCORE + n]],
                     settled=[{"from": int(st[core.O_CHOPS + 3 * i]), "to": int(st[core.O_CHOPS + 3 * i + 1]),
                               "amount": int(st[core.O_CHOPS + 3 * i + 2])}
                              for i in range(chops_before, int(st[core.O_NCHOPS]))])
        self.log.append(entry)

    def state(self) -> dict[str, Any]:
        g, n = self.game, self.table.players
        hand = g.hand(self.seat) or []
        mine = not g.finished and g.to_act == self.seat
        res = g.result
        return {
            "session": self.id, "game": self.game_no, "rules": self.table.rules.name, "players": n,
            "seat": self.seat, "opener": g.opener, "phase": g.phase, "to_act": g.to_act,
            "your_turn": mine, "declarer": g.declarer,
            "hand": cards_str(hand), "sizes": [g.hand_size(s) for s in range(n)],
            "events": self.log, "top": self.top,
            "legal": ([{"move": ACTION_NAMES[a], "cards": cards_str(cards_for(hand, a))}
                       for a in g.legal_actions()] if mine else []),
            "result": None if res is None else res.to_json(),
            "totals": self.totals, "played": self.played, "history": self.history,
            "bot": self.bot.name + (" (stand-in: no trained bot for this table)" if self.stand_in else ""),
            "reveal": [cards_str(g.hand(s) or []) for s in range(n)] if g.finished else None,
        }


class SessionStore:
    """The play page's sessions, in one SQLite file that every worker process shares
    (``samloc serve --workers N``: any worker continues any session).

    Bounded and fair: at most ``limit`` sessions in all and ``per_client`` for one client
    (:func:`client_key`: the connection's address, or what a trusted proxy says it is).  A client
    starting one more than its share loses its own least recently used session.  When the store is
    full, the session idle longest makes room, provided it has been idle ``min_idle_s`` at least;
    otherwise the new session is refused (503, try again later).  So no client, however fast,
    pushes out a game another person is playing.  The state is the server's
    (:meth:`PlaySession.to_json`, the deals' seed included): a client holds only the id.
    """

    def __init__(self, path: str | Path, *, limit: int = MAX_SESSIONS, per_client: int = SESSIONS_PER_CLIENT,
                 min_idle_s: float = MIN_IDLE_S, clock: Callable[[], float] = time.time):
        self.limit, self.per_client, self.min_idle_s, self.clock = limit, per_client, min_idle_s, clock
        self.db = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=OFF")  # sessions do not outlive the server: no fsync
        with self._transaction():
            self.db.execute("CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, client TEXT NOT NULL,"
                            " touched REAL NOT NULL, version INTEGER NOT NULL, state TEXT NOT NULL)")
            self.db.execute("CREATE INDEX IF NOT EXISTS by_client ON sessions (client, touched)")
            self.db.execute("CREATE INDEX IF NOT EXISTS by_touched ON sessions (touched)")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")  # one writer at a time, across processes
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def add(self, sid: str, client: str, state: dict[str, Any]) -> None:
        """Keep a new session, making room as the class docstring says (503 when none can be made)."""
        now = self.clock()
        with self._transaction():
            self.db.execute("DELETE FROM sessions WHERE id IN (SELECT id FROM sessions WHERE client = ?"
                            " ORDER BY touched DESC LIMIT -1 OFFSET ?)", (client, self.per_client - 1))
            if self.db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] >= self.limit:
                idle = self.db.execute("SELECT id FROM sessions WHERE touched <= ? ORDER BY touched LIMIT 1",
                                       (now - self.min_idle_s,)).fetchone()
                if idle is None:
                    raise StarletteHTTPException(503, f"every table is taken ({self.limit} games in play):"
                                                      " try again in a minute", headers={"Retry-After": "60"})
                self.db.execute("DELETE FROM sessions WHERE id = ?", idle)
            self.db.execute("INSERT INTO sessions VALUES (?, ?, ?, 0, ?)",
                            (sid, client, now, json.dumps(state)))

    def get(self, sid: str, known: int | None = None) -> tuple[dict[str, Any] | None, int]:
        """A session's state and version (a look counts as use), the state None when the version is
        ``known`` (the caller holds it already: nothing is read or parsed); 404 for an unknown one."""
        with self._transaction():
            row = self.db.execute("SELECT version FROM sessions WHERE id = ?", (sid,)).fetchone()
            if row is None:
                raise StarletteHTTPException(404, "unknown or expired session: start a new game")
            self.db.execute("UPDATE sessions SET touched = ? WHERE id = ?", (self.clock(), sid))
            if row[0] == known:
                return None, known
            state = self.db.execute("SELECT state FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
        return json.loads(state), row[0]

    def put(self, sid: str, state: dict[str, Any], version: int) -> None:
        """Store a session's new state, unless it changed since ``version`` was read (409) or is
        gone (404)."""
        with self._transaction():
            done = self.db.execute("UPDATE sessions SET state = ?, version = version + 1, touched = ?"
                                   " WHERE id = ? AND version = ?",
                                   (json.dumps(state), self.clock(), sid, version)).rowcount
            if done:
                return
            if self.db.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone() is None:
                raise StarletteHTTPException(404, "unknown or expired session: start a new game")
        raise StarletteHTTPException(409, "this game moved on meanwhile (another tab?): reload the page")

    def count(self, client: str | None = None) -> int:
        """Sessions kept, in all or for one client."""
        if client is None:
            return self.db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
        return self.db.execute("SELECT COUNT(*) FROM sessions WHERE client = ?", (client,)).fetchone()[0]

    def close(self) -> None:
        self.db.close()


class LiveSessions:
    """This process's play sessions as objects, each with the store's version it was read or
    written at, the least recently used dropped past ``limit``.  A request takes its session out
    (:meth:`take`) and gives it back once stored: one that failed half-way is read again."""

    def __init__(self, limit: int = MAX_SESSIONS):
        self.limit = limit
        self._items: OrderedDict[str, tuple[int, PlaySession]] = OrderedDict()

    def version(self, sid: str) -> int | None:
        item = self._items.get(sid)
        return item[0] if item else None

    def take(self, sid: str, version: int) -> PlaySession | None:
        """The session at ``version``, removed from here; None when not held at that version."""
        item = self._items.pop(sid, None)
        return item[1] if item is not None and item[0] == version else None

    def keep(self, session: PlaySession, version: int) -> None:
        self._items[session.id] = (version, session)
        self._items.move_to_end(session.id)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)


def client_key(host: str) -> str:
    """Whose quota a request counts against: its client's address, an IPv6 one by its /64 (one
    source, a home or a host, is given a whole /64), an IPv4-mapped one as IPv4."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host  # not an address (a test client, a Unix socket): as it is
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


@contextmanager
def session_file(path: str | None) -> Iterator[str]:
    """``path``, or a private file that is removed afterwards."""
    if path is not None:
        yield path
        return
    folder = tempfile.mkdtemp(prefix="samloc-play-")
    try:
        yield os.path.join(folder, "sessions.db")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def deal_seed(asked: int | None, allowed: bool) -> int:
    """The seed of a session's deals: the server's own randomness, unless the operator lets clients
    choose it (for tests and demos: whoever knows the seed can compute every bot's hand)."""
    if asked is None:
        return secrets.randbits(63)
    if not allowed:
        raise RequestError("this server deals its own cards: a seed is accepted only where the operator"
                           " allows it (samloc serve --allow-client-seed)")
    if not 0 <= asked <= MAX_SEED:
        raise RequestError(f"seed must be an integer from 0 to {MAX_SEED}")
    return asked


