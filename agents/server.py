"""``samloc serve``: a bot over HTTP (PROTOCOL §4) and a page to play against it.

One FastAPI app; its bots are loaded once, in the lifespan.  Several can be
served together (``--agent`` repeated; by default every shipped bot): each
table is played by the bot measured strongest there (:class:`Bots`).

- ``POST /v1/act`` rebuilds the asking seat's view with the engine
  (:meth:`Game.from_view`), refuses anything malformed or inconsistent with
  ``422 {"error": ...}`` (``413`` for a body over 64 KiB), and answers one
  legal decision as a record event, plus ``info`` (for a neural bot, its value
  estimate and its three most probable moves).
- ``GET /v1/health``, ``GET /v1/info``.
- ``GET /play``: a page (plain HTML/JS/CSS in ``agents/static``) where a person
  plays whole sessions against the bot; the server is the game master and the
  bots see only their own seat's view, built exactly as for ``/v1/act``.

Answers are reproducible: the decision for a request depends only on the
request and the server's ``--seed`` (and, for a searched decision that runs
into its ``--deadline-ms``, on how far the search got).  A neural bot is
greedy by default; ``--temperature T`` samples from ``p^(1/T)`` with a random
stream seeded by (seed, request), so the same request still gets the same
answer.  A model is checked before it serves (:mod:`agents.onnx_agent`), and
an answer it cannot give soundly is a 503 naming why, never a guess.

Clients meet limits (docs/serving.md): headers and bodies must arrive in
time, bodies are at most 64 KiB, connections per process are bounded, the
play page keeps a bounded, fair number of sessions (:class:`SessionStore`,
shared by the ``--workers N`` processes), and every answer carries a
Content-Security-Policy.

The agent is built by ``agents.make_agent`` from a spec the registry parses
(:func:`agents.registry.parse_spec`).  The server imports neither torch nor
gymnasium unless a checkpoint is served without its ONNX file, or with
play-time search (``DIR+search``, see :mod:`agents.search`).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import logging
import math
import multiprocessing
import multiprocessing.connection
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import sys
import tempfile
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator, Literal, TypeVar

import h11
import numpy as np
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from agents.base import AgentFailure
from agents.nets.format import read_json_file
from agents.registry import AgentSpec, make_agent, parse_spec
from sam_env import core
from sam_env.actions import ACTION_NAMES, ACTION_TABLE_VERSION, action_from_counts
from sam_env.cards import CardError, cards_str, parse_cards, rank_counts
from sam_env.game import Game, GameError, cards_for
from sam_env.rules import PRESET_NAMES, RuleSet, RulesError

ROOT = Path(__file__).resolve().parent.parent
STATIC = Path(__file__).resolve().parent / "static"
MAX_BODY = 64 * 1024          # a whole game's events are a few KiB
# Slow and greedy clients (docs/serving.md): each holds a connection, and there are only so many.
HEADER_TIMEOUT_S = 10.0       # a request's headers must be in this long after the connection or last answer
BODY_TIMEOUT_S = 10.0         # and its body this long after that
KEEP_ALIVE_S = 5              # an idle keep-alive connection is closed after this
MAX_HEADER_BYTES = 16 * 1024  # a request line and headers still incomplete at this size are refused
MAX_CONCURRENCY = 256         # connections and requests in progress, per process; more are answered 503
MAX_SESSIONS = 512            # play-page sessions kept (SessionStore)
SESSIONS_PER_CLIENT = 8       # of them, for one client address
MIN_IDLE_S = 300.0            # a session must be idle this long before another client's may replace it
FORMAT = "samloc/1"
DEADLINE_MS = 200             # a searched decision's time bound (agents.search: the best move found by then)
MAX_SEED = 2**63 - 1
#: Sent with every answer: the page runs only its own scripts and styles and is never framed.
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; object-src 'none';"
                                 b" base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
_LOG = logging.getLogger("uvicorn.error")


class RequestError(ValueError):
    """A request the server refuses with 422 (the message names the problem)."""


# ---- the bot ---------------------------------------------------------------------------
def shipped_models(root: Path = ROOT) -> list[Path]:
    """The shipped bots: every checkpoint folder under ``checkpoints/`` with an exported ``*.onnx``."""
    return sorted({p.parent for p in (root / "checkpoints").glob("*/*.onnx") if p.is_file()})


def measured_strength(folder: Path, name: str, searches: bool = False) -> dict[tuple[str, int], float]:
    """Mean lá per game against ``heuristic`` of the agent ``name`` at each table, from the evaluation
    reports shipped in its checkpoint folder: the training's ``eval_report.json`` (the policy's, so not
    read for a bot that ``searches``) and ``samloc eval`` run folders (``*/result.json``, their
    ``by_table``).  Several reports of one table are pooled, each weighted by its deals: the mean over
    every deal measured, not the luckiest report."""
    pooled: dict[tuple[str, int], tuple[float, float]] = {}  # table -> (sum of mean × deals, deals)

    def add(key: tuple[str, int], mean: Any, deals: Any) -> None:
        w = float(deals) if isinstance(deals, (int, float)) and deals > 0 else 1.0
        total, n = pooled.get(key, (0.0, 0.0))
        pooled[key] = (total + float(mean) * w, n + w)

    rep = None if searches else _read_json(folder / "eval_report.json")
    heur = ((rep or {}).get("results") or {}).get("heuristic") or {}
    if "mean_score" in heur and "players" in rep:
        add((_rules_key(RuleSet.parse(rep.get("rules") or "hoi_quan_bai")), int(rep["players"])),
            heur["mean_score"], heur.get("deals"))
    for path in sorted(folder.glob("*/result.json")):
        res = _read_json(path) or {}
        if res.get("agent") != name or res.get("opponents") != "heuristic":
            continue
        for r in (res.get("by_table") or {res.get("rules"): res}).values():
            try:
                add((_rules_key(RuleSet.parse(r["rules"])), int(r["players"])), r["mean_score"], r.get("deals"))
            except (KeyError, TypeError, ValueError):
                continue
    return {key: total / n for key, (total, n) in pooled.items()}


def _read_json(path: Path) -> dict[str, Any] | None:
    """A report's JSON object, or None where there is none to read (reports are optional)."""
    try:
        value = read_json_file(path)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _rules_key(rules: RuleSet) -> str:
    return json.dumps(rules.to_record(), sort_keys=True)


class Bot:
    """The served agent, behind one method: ``decide(game, seat, key)``.

    ``key`` identifies the request; every random choice is seeded by
    (seed, key), which is what makes answers reproducible.
    """

    def __init__(self, spec: str | None = None, *, seed: int = 0, temperature: float = 0.0,
                 deadline_ms: int = DEADLINE_MS):
        """``deadline_ms``: the time bound of a searched decision where the spec gives none (0: none)."""
        if not temperature >= 0.0:
            raise ValueError(f"temperature must be 0 (greedy) or positive, not {temperature}")
        self.seed, self.temperature, self.deadline_ms = seed, float(temperature), deadline_ms
        self.onnx: Any = None           # an OnnxAgent: we sample from its probabilities ourselves
        self.agent: Any = None          # one agent instance for every request
        self.per_request = False        # a cheap built-in agent made afresh, seeded, per request
        self.checkpoint: str | None = None
        self.note = ""
        if spec is None:
            spec, self.note = "heuristic", "no shipped bot in checkpoints/: serving the heuristic player"
        self.spec = spec
        self._parsed = parse_spec(spec)  # the registry's grammar; a bad spec fails here, in one line
        self.searches = self._parsed.kind == "search"  # its decisions have a time bound (deadline_ms)
        self._load(self._parsed)
        if temperature and not self.onnx and self.checkpoint is None:
            raise ValueError(f"--temperature applies to neural bots, not to {spec!r}")
        played = self.onnx or self.agent
        self.name = str(getattr(played, "name", "") or spec)
        tables = played.trained_tables if played is not None else None
        #: the tables its network was trained for (the checkpoint's metadata), None: any table
        self.tables: set[tuple[str, int]] | None = None
        if tables is not None:
            self.tables = {(_rules_key(t.rules), t.players) for t in tables}
            self._rules = {_rules_key(t.rules): t.rules for t in tables}
        folder = Path(self.checkpoint) if self.checkpoint else None
        if folder is not None and folder.suffix == ".onnx":
            folder = folder.parent
        self.strength = (measured_strength(folder, self.name, self.searches)
                         if folder is not None and folder.is_dir() else {})

    def _load(self, spec: AgentSpec) -> None:
        """Build the agent through the registry.  A checkpoint folder with an exported model
        is served from its ONNX file (no PyTorch); a built-in player is only checked here."""
        t = self.temperature
        if spec.kind == "checkpoint":
            folder = Path(spec.target)
            models = sorted(folder.glob("*.onnx"))
            if models:
                spec = parse_spec(str(models[0]))
            elif not self.note:
                self.note = f"no ONNX file in {folder}: serving it with PyTorch (samloc export {folder})"
        if spec.kind == "onnx":
            self.onnx = make_agent(spec, seed=self.seed, temperature=t)
            self.checkpoint = str(Path(spec.target))
            if self._parsed.kind == "checkpoint":  # standing in for the folder: exported from its weights
                self.onnx.check_exported_from(Path(self._parsed.target))
        elif spec.kind == "checkpoint":
            self.agent = make_agent(spec, seed=self.seed, **({"temperature": t} if t else {}))
            self.checkpoint = str(Path(spec.target))
        elif spec.kind == "search":  # play-time search: PyTorch, one instance
            if t:
                raise ValueError(f"--temperature applies to the plain policy, not to search ({self.spec!r})")
            self.agent = make_agent(spec, seed=self.seed, deadline_ms=self.deadline_ms)
            self.checkpoint = spec.target
        elif spec.kind == "http":
            self.agent = make_agent(spec, seed=self.seed)
        else:
            make_agent(spec, seed=self.seed)  # checks it builds now, not at the first request
            self.per_request = True

    # ---- what it plays -----------------------------------------------------------
    def plays(self, rules: RuleSet, players: int) -> bool:
        return self.tables is None or (_rules_key(rules), players) in self.tables

    def supports_json(self) -> list[dict[str, Any]]:
        """``[{rules, players: [...]}]``: what it was trained for (every preset table for a rule-based bot)."""
        if self.tables is None:
            return [{"rules": n, "players": list(range(2, RuleSet.preset(n).max_players + 1))}
                    for n in PRESET_NAMES]
        by: dict[str, list[int]] = {}
        for key, p in sorted(self.tables):
            by.setdefault(key, []).append(p)
        return [{"rules": self._rules[k].to_record(), "players": ps} for k, ps in by.items()]

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "agent": self.spec, "checkpoint": self.checkpoint,
                "supports": self.supports_json(), "any_rule_overrides": self.tables is None,
                "settings": getattr(self.agent, "settings", {}) if self.agent is not None else {}}

    # ---- one decision ------------------------------------------------------------------
    def decide(self, game: Game, seat: int, key: int) -> tuple[int, dict[str, Any] | None]:
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, key])
        info: dict[str, Any] | None = None
        if self.onnx is not None:
            from agents.onnx_agent import choose_action
            probs, value, mask = self.onnx.policy(game, seat)
            a = choose_action(probs, mask, self.temperature, rng)
            legal = np.flatnonzero(mask)
            best = legal[np.argsort(-probs[legal], kind="stable")][:3]
            info = {"value": round(value, 4),
                    "top": [{"move": ACTION_NAMES[int(b)], "p": round(float(probs[b]), 4)} for b in best]}
        elif self.per_request:
            a = make_agent(self._parsed, seed=int(rng.integers(2**31 - 1))).act(game, seat)
        else:
            a = self.agent.act(game, seat)
        return int(a), info


class Bots:
    """The bots a server loads, and which one plays each table.

    A table goes to the bot measured strongest there (the mean lá against the
    heuristic in the evaluation reports shipped with each checkpoint), then to
    bots trained for it without a measurement, in the order given, then to a
    rule-based bot, which plays any table.  A table no bot plays is refused."""

    def __init__(self, bots: list[Bot], note: str = ""):
        if not bots:
            raise ValueError("no bot to serve")
        self.bots, self.note = bots, note
        self._routes: dict[tuple[str, int], Bot | None] = {}  # decided once per table, not per request
        searched = [b.agent.deadline_ms for b in bots if b.searches]
        #: the bound on a searched decision, ms (0: some search has none); None where no bot searches
        self.deadline_ms = (0 if 0 in searched else max(searched)) if searched else None

    @classmethod
    def load(cls, specs: list[str] | None, *, seed: int = 0, temperature: float = 0.0,
             deadline_ms: int = DEADLINE_MS) -> "Bots":
        """The bots ``specs`` name; none: every shipped bot under checkpoints/ (else the heuristic)."""
        note = ""
        if not specs:
            specs = [str(p) for p in shipped_models()]
            note = ("serving the shipped bots " + ", ".join(specs) if specs
                    else "no shipped bot in checkpoints/: serving the heuristic player")
        return cls([Bot(s, seed=seed, temperature=temperature, deadline_ms=deadline_ms)
                    for s in specs or [None]], note)

    @property
    def seed(self) -> int:
        return self.bots[0].seed

    def route(self, rules: RuleSet, players: int) -> Bot | None:
        """The bot that plays this table, or None."""
        key = (_rules_key(rules), players)
        if key not in self._routes:
            if len(self._routes) >= 1024:  # clients may name any house rules: keep the memo bounded
                self._routes.clear()
            ranked = sorted((b for b in self.bots if b.plays(rules, players)),
                            key=lambda b: (b.tables is None, -b.strength.get(key, float("-inf"))))
            self._routes[key] = ranked[0] if ranked else None
        return self._routes[key]

    def for_table(self, rules: RuleSet, players: int) -> Bot:
        bot = self.route(rules, players)
        if bot is None:
            raise RequestError(f"no bot here plays {rules.name} with {players} players; this server plays "
                               + "; ".join(f"{_name(s['rules'])} with {', '.join(map(str, s['players']))}"
                                           for s in self.supports_json()))
        return bot

    def supports_json(self) -> list[dict[str, Any]]:
        """Every table one of the bots plays, merged by rule set."""
        if any(b.tables is None for b in self.bots):
            return next(b for b in self.bots if b.tables is None).supports_json()
        by: dict[str, tuple[Any, set[int]]] = {}
        for b in self.bots:
            for s in b.supports_json():
                by.setdefault(json.dumps(s["rules"], sort_keys=True), (s["rules"], set()))[1].update(s["players"])
        return [{"rules": r, "players": sorted(ps)} for r, ps in by.values()]

    def info(self) -> dict[str, Any]:
        sup = self.supports_json()
        routes = []
        for s in sup:
            rs = RuleSet.parse(s["rules"])
            for p in s["players"]:
                b = self.route(rs, p)
                assert b is not None
                routes.append({"rules": s["rules"], "players": p, "bot": b.name,
                               "mean_vs_heuristic": b.strength.get((_rules_key(rs), p))})
        first = self.bots[0]
        onnx = next((b.onnx for b in self.bots if b.onnx is not None), None)
        return {"name": " + ".join(b.name for b in self.bots), "agent": first.spec, "checkpoint": first.checkpoint,
                "rules": [s["rules"] for s in sup], "players": sorted({p for s in sup for p in s["players"]}),
                "supports": sup, "any_rule_overrides": any(b.tables is None for b in self.bots),
                "bots": [b.info() for b in self.bots], "routes": routes,
                "format": FORMAT, "action_table_version": ACTION_TABLE_VERSION,
                "obs_version": onnx.metadata.get("obs_version") if onnx is not None else None,
                "temperature": first.temperature, "deterministic": not self.deadline_ms,
                "deadline_ms": self.deadline_ms}


def _name(rules: Any) -> str:
    return RuleSet.parse(rules).name


def view_key(game: Game, seat: int) -> int:
    """A 63-bit digest of a seat's view: equal views, equal keys (hand order ignored)."""
    blob = json.dumps([game.rules.to_record(), game.players, game.opener, seat,
                       game.hand(seat), game.events], sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "little") >> 1


def decide_event(bot: Bot, view: Game, seat: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The bot's decision on a seat's view, as a record event (checked legal by the engine)."""
    a, info = bot.decide(view, seat, view_key(view, seat))
    if a not in view.legal_actions():  # a bug in an agent: refuse to answer rather than guess
        raise AgentFailure(f"agent {bot.name} chose {ACTION_NAMES[a] if 0 <= a < len(ACTION_NAMES) else a},"
                           " which is not legal here")
    return view.copy().apply(a), info


# ---- the request body of /v1/act ---------------------------------------------------------
class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class EventIn(Strict):
    seat: int
    type: Literal["sam", "pass", "play"]
    declare: bool | None = None
    cards: list[str] | None = None


class ActRequest(Strict):
    format: Literal["samloc/1"]
    rules: str | dict[str, Any]
    players: int
    opener: int
    seat: int
    hand: list[str] = Field(max_length=10)
    events: list[EventIn] = Field(max_length=1000)


def build_view(req: ActRequest, bots: Bots) -> tuple[Game, Bot]:
    """The seat's view of the game and the bot that plays its table, or RequestError naming what is
    wrong with the request."""
    try:
        rules = RuleSet.parse(req.rules)
        rules.check_players(req.players)
        bot = bots.for_table(rules, req.players)
        events = [e.model_dump(exclude_unset=True) for e in req.events]  # a null field given is refused
        view = Game.from_view(rules, req.players, req.opener, req.seat, req.hand, events)
    except (GameError, CardError, RulesError) as exc:
        raise RequestError(str(exc)) from None
    if view.finished:
        raise RequestError(f"the game is already over ({view.result.end if view.result else 'finished'})")
    if view.to_act != req.seat:
        raise RequestError(f"it is seat {view.to_act}'s turn, not seat {req.seat}'s")
    return view, bot


def _validation_message(errors: list[Any]) -> str:
    """The first of pydantic's complaints about a body, as one sentence naming the field."""
    if not errors:
        return "invalid request"
    e = errors[0]
    loc = list(e.get("loc", ()))
    where = "".join(f"[{x}]" if isinstance(x, int) else (f".{x}" if i else str(x)) for i, x in enumerate(loc))
    kind = e.get("type", "")
    if kind == "extra_forbidden":
        *parent, field = loc or ["?"]
        at = "".join(f"[{x}]" if isinstance(x, int) else (f".{x}" if i else str(x))
                     for i, x in enumerate(parent))
        return f"unknown field {field!r}" + (f" in {at}" if at else "")
    if kind == "missing":
        return f"missing field {where!r}"
    if kind in ("model_type", "model_attributes_type", "dict_type") and not loc:
        return "the body must be a JSON object"
    return f"{where or 'body'}: {e.get('msg', 'invalid')}"


def _no_constant(name: str) -> object:
    raise RequestError(f"the body is not valid JSON ({name} is not a JSON number)")


def _finite(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise RequestError("the body has a number too large to read: "
                           + (text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"))
    return x


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)  # Python reads NaN; JSON not


def parse_json_body(raw: bytes, content_type: str) -> Any:
    """The one JSON value a request body holds; RequestError names the real problem when it holds none."""
    media = content_type.split(";")[0].strip().lower()
    if media != "application/json":
        raise RequestError("send the body as JSON, with Content-Type: application/json"
                           + (f" (not {media[:40]!r})" if media else ""))
    if not raw.strip():
        raise RequestError("the body is empty: send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the body is not valid JSON (not UTF-8 text: byte {exc.start + 1})") from None
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise RequestError(f"the body is not valid JSON ({exc.msg} at line {exc.lineno}"
                           f" column {exc.colno})") from None
    except RecursionError:
        raise RequestError("the body nests JSON arrays or objects too deeply") from None
    except ValueError as exc:  # Python refuses to convert integers of more than 4,300 digits
        if "integer string conversion" not in str(exc):
            raise
        raise RequestError(f"the body has a number of more than {sys.get_int_max_str_digits()}"
                           " digits") from None


BodyModel = TypeVar("BodyModel", bound=BaseModel)


async def read_body(request: Request, model: type[BodyModel]) -> BodyModel:
    """The request's body as ``model``, parsed here rather than by FastAPI, whose messages for an
    empty, deep or huge body do not name the problem."""
    value = parse_json_body(await request.body(), request.headers.get("content-type", ""))
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise RequestError(_validation_message(exc.errors())) from None


# ---- the play page: server-side sessions -----------------------------------------------
class NewSession(Strict):
    rules: str | dict[str, Any] = "hoi_quan_bai"
    players: int = 4
    seat: int = 0
    seed: int | None = None


class HumanMove(Strict):
    move: Literal["pass", "sam", "no_sam"] | None = None
    cards: list[str] | None = Field(default=None, max_length=10)


class PlaySession:
    """A person at a table of bots, game after game, with a running total.

    What the session store keeps of it is :meth:`to_json`: the table, the seed of its deals
    (the server's secret), the results so far and the events of the game in play; the
    constructor rebuilds the rest by replaying those events on the same deal."""

    def __init__(self, bot: Bot, rules: RuleSet, players: int, seat: int, seed: int,
                 stand_in: bool = False, *, sid: str | None = None,
                 history: list[dict[str, Any]] | None = None, game: int = 1, opener: int | None = None,
                 events: list[dict[str, Any]] | None = None):
        """A new session by default (its first game dealt and played up to the person's turn), or
        the stored one ``to_json`` described."""
        self.id = sid or secrets.token_urlsafe(16)
        self.bot, self.rules, self.players, self.seat, self.seed = bot, rules, players, seat, seed
        self.stand_in = stand_in  # the heuristic, sitting in where no served bot was trained
        self.history: list[dict[str, Any]] = list(history or [])
        self.game_no = game
        self._deal(opener)
        for ev in events or []:
            self._apply(ev)
        self.play_bots()

    @classmethod
    def from_json(cls, state: dict[str, Any], bot: Bot, stand_in: bool, sid: str) -> "PlaySession":
        return cls(bot, RuleSet.parse(state["rules"]), state["players"], state["seat"], state["seed"],
                   stand_in, sid=sid, history=state["history"], game=state["game"], opener=state["opener"],
                   events=state["events"])

    def to_json(self) -> dict[str, Any]:
        return {"rules": self.rules.to_record(), "players": self.players, "seat": self.seat,
                "seed": self.seed, "history": self.history, "game": self.game_no, "opener": self.game.opener,
                "events": self.game.events}

    @property
    def totals(self) -> list[int]:
        return [sum(h["scores"][s] for h in self.history) for s in range(self.players)]

    def new_game(self) -> None:
        """Deal the next game: the previous winner opens it (the same opener after a draw)."""
        last = self.history[-1]
        self.game_no += 1
        self._deal(last["opener"] if last["winner"] is None else last["winner"])
        self.play_bots()

    def _deal(self, opener: int | None) -> None:
        seed = int(np.random.SeedSequence([self.seed, self.game_no]).generate_state(1)[0])
        self.game = Game.new(self.rules, self.players, seed=seed, opener=opener)
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
            view = Game.from_view(self.rules, self.players, g.opener, s, g.hand(s) or [], g.events)
            ev, _ = decide_event(self.bot, view, s)
            self._apply(ev)
        if g.finished and len(self.history) < self.game_no:
            res = g.result
            assert res is not None
            self.history.append({"game": self.game_no, "opener": g.opener, **res.to_json()})

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
        n = self.players
        entry.update(i=len(self.log), top=self.top,
                     sizes=[g.hand_size(s) for s in range(n)],
                     passed=[bool(st[core.O_PASSED + s]) for s in range(n)],
                     scores=[int(x) for x in st[core.O_SCORE:core.O_SCORE + n]],
                     settled=[{"from": int(st[core.O_CHOPS + 3 * i]), "to": int(st[core.O_CHOPS + 3 * i + 1]),
                               "amount": int(st[core.O_CHOPS + 3 * i + 2])}
                              for i in range(chops_before, int(st[core.O_NCHOPS]))])
        self.log.append(entry)

    def state(self) -> dict[str, Any]:
        g, n = self.game, self.players
        hand = g.hand(self.seat) or []
        mine = not g.finished and g.to_act == self.seat
        res = g.result
        return {
            "session": self.id, "game": self.game_no, "rules": self.rules.name, "players": n,
            "seat": self.seat, "opener": g.opener, "phase": g.phase, "to_act": g.to_act,
            "your_turn": mine, "declarer": g.declarer,
            "hand": cards_str(hand), "sizes": [g.hand_size(s) for s in range(n)],
            "events": self.log, "top": self.top,
            "legal": ([{"move": ACTION_NAMES[a], "cards": cards_str(cards_for(hand, a))}
                       for a in g.legal_actions()] if mine else []),
            "result": None if res is None else res.to_json(),
            "totals": self.totals, "history": self.history,
            "bot": self.bot.name + (" (stand-in: no trained bot for this table)" if self.stand_in else ""),
            "reveal": [cards_str(g.hand(s) or []) for s in range(n)] if g.finished else None,
        }


class SessionStore:
    """The play page's sessions, in one SQLite file that every worker process shares
    (``samloc serve --workers N``: any worker continues any session).

    Bounded and fair: at most ``limit`` sessions in all and ``per_client`` for one client
    address.  A client starting one more than its share loses its own least recently used
    session.  When the store is full, the session idle longest makes room, provided it has been
    idle ``min_idle_s`` at least; otherwise the new session is refused (503, try again later).
    So no client, however fast, pushes out a game another person is playing.  The state is the
    server's (:meth:`PlaySession.to_json`, the deals' seed included): a client holds only the id.
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

    def get(self, sid: str) -> tuple[dict[str, Any], int]:
        """A session's state and version (a look counts as use); 404 for an unknown one."""
        with self._transaction():
            row = self.db.execute("SELECT state, version FROM sessions WHERE id = ?", (sid,)).fetchone()
            if row is None:
                raise StarletteHTTPException(404, "unknown or expired session: start a new game")
            self.db.execute("UPDATE sessions SET touched = ? WHERE id = ?", (self.clock(), sid))
        return json.loads(row[0]), row[1]

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


# ---- the app -----------------------------------------------------------------------------
class _Edge:
    """The outermost layer, between uvicorn and the app: what every request and answer shares.

    - A body over ``max_bytes`` is refused with 413, and one that takes longer than
      ``body_timeout_s`` to arrive with 408, before the app reads it; both answers close the
      connection, since the rest of the body is not read.
    - Every answer carries :data:`SECURITY_HEADERS`.
    - An error the app raises after its 500 answer went out (Starlette re-raises it) is logged
      here: passed on, uvicorn would drop the connection under the client's feet.
    """

    def __init__(self, app: Any, max_bytes: int, body_timeout_s: float):
        self.app, self.max_bytes, self.body_timeout_s = app, max_bytes, body_timeout_s

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_secured(msg: dict) -> None:
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
                msg = {**msg, "headers": [*msg.get("headers", []), *SECURITY_HEADERS]}
            await send(msg)

        body = await self._body(scope, receive, send_secured)
        if body is None:
            return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            await self.app(scope, replay, send_secured)
        except Exception:
            if not started:
                raise
            _LOG.exception("error in %s %s after its 500 answer", scope.get("method"), scope.get("path"))

    async def _body(self, scope: dict, receive: Any, send: Any) -> bytes | None:
        """The whole body, or None when it was refused (the refusal is sent)."""
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            await _refuse(send, 413, f"the request body is larger than {self.max_bytes} bytes")
            return None
        chunks, size, more = [], 0, True
        deadline = time.monotonic() + self.body_timeout_s
        while more:
            try:
                msg = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                await _refuse(send, 408, f"the request body did not arrive within {self.body_timeout_s:g} s")
                return None
            if msg["type"] != "http.request":
                break
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            more = msg.get("more_body", False)
            if size > self.max_bytes:
                await _refuse(send, 413, f"the request body is larger than {self.max_bytes} bytes")
                return None
        return b"".join(chunks)


async def _refuse(send: Any, status: int, error: str) -> None:
    """A refusal sent before the app saw the request; the connection closes after it."""
    body = json.dumps({"error": error}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def create_app(agent_spec: str | list[str] | None = None, *, seed: int = 0, temperature: float = 0.0,
               deadline_ms: int = DEADLINE_MS, bot: "Bot | Bots | None" = None,
               allow_client_seed: bool = False, sessions: str | None = None) -> FastAPI:
    """The server.  The bots are loaded once, in the lifespan (or passed in as ``bot``).
    ``deadline_ms``: the time bound of a searched decision whose spec gives none (0: none);
    ``allow_client_seed``: /play/api/new may choose the deals' seed (tests and demos only);
    ``sessions``: the play sessions' SQLite file, shared by worker processes (default: a private one)."""
    specs = [agent_spec] if isinstance(agent_spec, str) else agent_spec

    def load() -> Bots:
        if bot is not None:
            return bot if isinstance(bot, Bots) else Bots([bot])
        return Bots.load(specs, seed=seed, temperature=temperature, deadline_ms=deadline_ms)

    app = _new_app(load, sessions)
    _add_protocol_routes(app)
    _add_play_routes(app, allow_client_seed)
    _add_error_handlers(app)
    return _wrap(app)


def _new_app(load_bots: Callable[[], Bots], sessions: str | None) -> FastAPI:
    """The bare app; its lifespan loads the bots once, before the first request, and opens the
    play sessions' store (``sessions``, a file shared by worker processes; else a private one)."""
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.bots = load_bots()
        with _session_file(sessions) as path:
            app.state.sessions = SessionStore(path)
            gc.freeze()  # the loaded model and engine are permanent: keep them out of GC pauses
            try:
                yield
            finally:
                app.state.sessions.close()

    # no /docs or /openapi.json: the protocol is PROTOCOL §4, and bodies are read by read_body
    return FastAPI(title="samloc bot", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                   openapi_url=None,
                   description="A Sâm lốc bot: PROTOCOL §4, and a page to play it at /play.")


@contextmanager
def _session_file(path: str | None) -> Iterator[str]:
    """``path``, or a private file that is removed afterwards."""
    if path is not None:
        yield path
        return
    folder = tempfile.mkdtemp(prefix="samloc-play-")
    try:
        yield os.path.join(folder, "sessions.db")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _add_protocol_routes(app: FastAPI) -> None:
    """PROTOCOL §4: ``POST /v1/act``, ``GET /v1/health``, ``GET /v1/info``."""
    @app.post("/v1/act")
    async def act(request: Request) -> JSONResponse:
        t0 = time.perf_counter()
        req = await read_body(request, ActRequest)
        view, b = build_view(req, request.app.state.bots)
        event, info = decide_event(b, view, req.seat)
        out: dict[str, Any] = {"event": event}
        if info:
            out["info"] = info
        ms = (time.perf_counter() - t0) * 1000
        return JSONResponse(out, headers={"Server-Timing": f"decide;dur={ms:.3f}"})

    @app.get("/v1/health")
    async def health() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/v1/info")
    async def info(request: Request) -> dict[str, Any]:
        return request.app.state.bots.info()


def _play_bot(request: Request, rules: RuleSet, players: int) -> tuple[Bot, bool]:
    """The bot that plays this table, or the heuristic where no served bot was trained for it
    (``True``: a stand-in, and the page says so)."""
    bots: Bots = request.app.state.bots
    b = bots.route(rules, players)
    if b is not None:
        return b, False
    if getattr(request.app.state, "fallback", None) is None:
        request.app.state.fallback = Bot("heuristic", seed=bots.seed)
    return request.app.state.fallback, True


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


def _add_play_routes(app: FastAPI, allow_client_seed: bool) -> None:
    """The play page and its API; the sessions live in the app's :class:`SessionStore`."""
    def stored(request: Request, sid: str) -> tuple[PlaySession, int]:
        state, version = request.app.state.sessions.get(sid)
        b, stand_in = _play_bot(request, RuleSet.parse(state["rules"]), state["players"])
        return PlaySession.from_json(state, b, stand_in, sid), version

    def store(request: Request, s: PlaySession, version: int) -> dict[str, Any]:
        request.app.state.sessions.put(s.id, s.to_json(), version)
        return s.state()

    @app.get("/play", include_in_schema=False)
    async def play_page() -> FileResponse:
        return FileResponse(STATIC / "play.html", media_type="text/html")

    app.mount("/play/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/play/api/options")
    async def options(request: Request) -> dict[str, Any]:
        bots: Bots = request.app.state.bots
        # every preset table can be played: the heuristic sits in where no served bot was trained
        every = [{"rules": n, "players": list(range(2, RuleSet.preset(n).max_players + 1))} for n in PRESET_NAMES]
        return {"bot": " + ".join(b.name for b in bots.bots), "supports": every,
                "model_supports": bots.supports_json()}

    @app.post("/play/api/new")
    async def new_session(request: Request) -> dict[str, Any]:
        body = await read_body(request, NewSession)
        try:
            rules = RuleSet.parse(body.rules)
            rules.check_players(body.players)
        except RulesError as exc:
            raise RequestError(str(exc)) from None
        b, stand_in = _play_bot(request, rules, body.players)
        if not 0 <= body.seat < body.players:
            raise RequestError(f"seat must be from 0 to {body.players - 1}")
        s = PlaySession(b, rules, body.players, body.seat, deal_seed(body.seed, allow_client_seed), stand_in)
        request.app.state.sessions.add(s.id, request.client.host if request.client else "", s.to_json())
        return s.state()

    @app.get("/play/api/{sid}")
    async def get_state(sid: str, request: Request) -> dict[str, Any]:
        return stored(request, sid)[0].state()

    @app.post("/play/api/{sid}/move")
    async def move(sid: str, request: Request) -> dict[str, Any]:
        body = await read_body(request, HumanMove)
        s, version = stored(request, sid)
        s.human(body)
        return store(request, s, version)

    @app.post("/play/api/{sid}/again")
    async def again(sid: str, request: Request) -> dict[str, Any]:
        s, version = stored(request, sid)
        if not s.game.finished:
            raise RequestError("finish this game first")
        s.new_game()
        return store(request, s, version)


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal and failure answers ``{"error": "..."}``: 422 for a request we refuse, 503 for
    a bot that cannot answer it soundly (a damaged model), the status itself otherwise, 500 for a bug."""
    @app.exception_handler(RequestError)
    async def _refused(_: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=422)

    @app.exception_handler(AgentFailure)
    async def _unanswerable(_: Request, exc: AgentFailure) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=503)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:  # logged by uvicorn; tests assert none
        return JSONResponse({"error": f"internal error ({type(exc).__name__})"}, status_code=500)


def _wrap(app: FastAPI) -> FastAPI:
    """Put :class:`_Edge` outside everything else (FastAPI would turn its refusals into 400s)."""
    inner = app.build_middleware_stack()
    app.middleware_stack = _Edge(inner, MAX_BODY, BODY_TIMEOUT_S)  # what Starlette calls; built once
    return app


# ---- the HTTP server ---------------------------------------------------------------------
class _H11(H11Protocol):
    """uvicorn's HTTP/1.1, with a bound on the time a request's headers take to arrive.

    uvicorn has none: a client that connects and sends nothing, or trickles its headers a
    byte at a time, would hold its connection open for ever (each byte also cancels the
    keep-alive timer).  The timer runs from the connection (or the previous answer) until
    the request's headers are complete; then the connection is closed."""

    header_timeout_s = HEADER_TIMEOUT_S
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request line and headers are in
            self._headers_in()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._expect_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_in()
        super().connection_lost(exc)

    def _expect_headers(self) -> None:
        self._headers_in()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _headers_in(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def serve_options(host: str, port: int, log_level: str = "warning") -> dict[str, Any]:
    """uvicorn's settings for ``samloc serve``: the limits a slow or greedy client meets
    (docs/serving.md, "Slow clients")."""
    return {"host": host, "port": port, "log_level": log_level, "http": _H11,
            "timeout_keep_alive": KEEP_ALIVE_S, "limit_concurrency": MAX_CONCURRENCY,
            "h11_max_incomplete_event_size": MAX_HEADER_BYTES}


# ---- the command ---------------------------------------------------------------------------
def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="samloc serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--agent", action="append", default=None,
                   help="random, heuristic, a checkpoint directory (DIR+search: with play-time search),"
                        " an .onnx file or http://...; repeat it to serve several bots, each table played by"
                        " the one measured strongest there; default: every shipped bot in checkpoints/"
                        " (their .onnx), else heuristic")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--temperature", type=float, default=0.0,
                   help="0 = greedy (default); T > 0 samples from p^(1/T), still reproducible per request")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    p.add_argument("--deadline-ms", type=_non_negative, default=DEADLINE_MS,
                   help="time bound of a searched decision (DIR+search) where its spec gives none: the best"
                        f" move found by then is played (default {DEADLINE_MS}; 0: none, answers then"
                        " independent of the machine's speed)")
    p.add_argument("--allow-client-seed", action="store_true",
                   help="let /play/api/new choose the seed of the deals (tests and demos: whoever knows it"
                        " can compute every bot's hand)")
    p.add_argument("--workers", type=_positive, default=1,
                   help="processes answering on the port, each with its own copy of the bots and its own"
                        " socket (the kernel spreads the connections); the play page's sessions are shared"
                        " (default 1)")
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:  # every model is loaded and checked here, before a port is opened or a worker started
        bots = Bots.load(args.agent, seed=args.seed, temperature=args.temperature,
                         deadline_ms=args.deadline_ms)
    except (ValueError, OSError, ImportError) as exc:
        print(f"samloc serve: {exc}", file=sys.stderr)
        return 2
    for note in [bots.note] + [b.note for b in bots.bots]:
        if note:
            print(f"samloc serve: {note}")
    try:
        socks = listening_sockets(args.host, args.port, args.workers)
    except OSError as exc:
        print(f"samloc serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    for b in bots.bots:
        print(f"samloc serve: agent {b.name} ({b.spec})")
    print(f"samloc serve: http://{args.host}:{args.port}/play to play, POST /v1/act for bots"
          + (f"; {args.workers} worker processes" if args.workers > 1 else ""))
    return _serve(args, bots, socks)


def _serve(args: argparse.Namespace, bots: Bots, socks: list[socket.socket]) -> int:
    """Answer on ``socks`` until stopped: here with the bots loaded, or in a worker process per socket,
    each loading its own; every process shares the play sessions' file."""
    options = serve_options(args.host, args.port, args.log_level)
    with _session_file(None) as sessions:
        SessionStore(sessions).close()  # the table exists before workers open it together
        settings = {"allow_client_seed": args.allow_client_seed, "sessions": sessions}
        if len(socks) == 1:
            uvicorn.Server(uvicorn.Config(create_app(bot=bots, **settings), **options)).run(sockets=socks)
            return 0
        del bots
        loaded_there = {"agent_spec": args.agent, "seed": args.seed, "temperature": args.temperature,
                        "deadline_ms": args.deadline_ms}
        return _run_workers(socks, {**loaded_there, **settings}, options)


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` sockets bound to one port, one per worker process.  Each has its own queue
    (SO_REUSEPORT), so the kernel spreads new connections evenly over the workers; with one
    socket shared, as uvicorn's ``--workers`` has it, the process that wakes first takes most
    of them (41 of 50 here) and its clients wait.  Made with IPPROTO_TCP, so asyncio sets
    TCP_NODELAY on every connection (uvicorn's own socket has proto 0, and then each
    keep-alive request waited ~40 ms on a delayed ACK: uvicorn issue #3149)."""
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                      proto=socket.IPPROTO_TCP)[0]
    out: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, kind, proto)
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if count > 1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(addr)
            addr = sock.getsockname()  # --port 0: the others take the port the first one got
    except OSError:
        for sock in out:
            sock.close()
        raise
    return out


def _run_workers(socks: list[socket.socket], settings: dict[str, Any], options: dict[str, Any]) -> int:
    """A worker process per socket, until SIGTERM or SIGINT stops them all (status 0) or one of
    them ends (the others are stopped, status 1: a service manager restarts the whole server)."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_serve_worker, args=(sock, settings, options), name=f"samloc-serve-{i}")
             for i, sock in enumerate(socks)]
    stopping = False

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True
        for proc in procs:
            if proc.is_alive():
                proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for proc in procs:
        proc.start()
    multiprocessing.connection.wait([proc.sentinel for proc in procs])
    ended_alone = not stopping
    stop()
    for proc in procs:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    return 1 if ended_alone else 0


def _serve_worker(sock: socket.socket, settings: dict[str, Any], options: dict[str, Any]) -> None:
    """One worker process: its own copy of the bots, loaded in its lifespan, answering on its socket."""
    uvicorn.Server(uvicorn.Config(create_app(**settings), **options)).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
