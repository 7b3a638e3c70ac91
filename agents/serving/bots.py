"""The served bots, and which one plays each table.

:class:`Bot` is one agent behind ``decide(game, seat, key)``, its answers reproducible per request;
:class:`Bots` routes each table to the bot measured strongest there, from the evaluation reports
shipped in the checkpoint folders (:func:`measured_strength`).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit

import numpy as np

from agents.base import AgentFailure
from agents.nets.format import read_json_file, resolve
from agents.players.onnx_agent import choose_action
from agents.registry import AgentSpec, exported_agent, make_agent, parse_spec, shown_spec
from sam_env.actions import ACTION_NAMES, ACTION_TABLE_VERSION
from sam_env.game import Game
from sam_env.rules import DEFAULT_PRESET, RuleSet
from sam_env.table import Table, preset_tables

from .protocol import FORMAT, RequestError
from .shipped import shipped_models

#: A rule set a bot plays, as the protocol shows it (a preset's name or the rules record), and its
#: player counts.
Supported = tuple[RuleSet, Any, list[int]]
DEADLINE_MS = 200             # a searched decision's time bound (agents.players.search: the best move
                              # found by then)
UPSTREAM_TIMEOUT_S = 5.0      # an http:// bot's whole answer (connecting, head, body); then 503
UPSTREAM_CALLS = 8            # calls in flight to one http:// bot; more wait their turn
T = TypeVar("T")


def measured_strength(folder: Path, name: str, searches: bool = False) -> dict[tuple[str, int], float]:
    """Mean lá per game against ``heuristic`` of the agent ``name`` at each table, from the evaluation
    reports shipped in its checkpoint folder: the training's ``eval_report.json`` (the policy's, so not
    read for a bot that ``searches``) and ``samloc eval`` run folders (``*/result.json``, their
    ``by_table``).  Several reports of one table are pooled, each weighted by its deals: the mean over
    every deal measured, not the luckiest report."""
    pooled: dict[tuple[str, int], tuple[float, float]] = {}  # Table.key -> (sum of mean × deals, deals)

    def add(r: dict[str, Any], mean: Any, deals: Any) -> None:
        try:
            key = Table.from_record({"rules": r.get("rules") or DEFAULT_PRESET, "players": r["players"]}).key
            w = float(deals) if isinstance(deals, (int, float)) and deals > 0 else 1.0
            total, n = pooled.get(key, (0.0, 0.0))
            pooled[key] = (total + float(mean) * w, n + w)
        except (KeyError, TypeError, ValueError):  # a report this bot cannot read is no measurement
            return

    rep = None if searches else _read_json(folder / "eval_report.json")
    heur = ((rep or {}).get("results") or {}).get("heuristic") or {}
    if "mean_score" in heur and "players" in rep:
        add(rep, heur["mean_score"], heur.get("deals"))
    for path in sorted(folder.glob("*/result.json")):
        res = _read_json(path) or {}
        if res.get("agent") != name or res.get("opponents") != "heuristic":
            continue
        for r in (res.get("by_table") or {res.get("rules"): res}).values():
            if isinstance(r, dict) and "rules" in r and "mean_score" in r:
                add(r, r["mean_score"], r.get("deals"))
    return {key: total / n for key, (total, n) in pooled.items()}


def _read_json(path: Path) -> dict[str, Any] | None:
    """A report's JSON object, or None where there is none to read (reports are optional)."""
    try:
        value = read_json_file(path)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class Bot:
    """The served agent, behind one method: ``decide(game, seat, key)``.

    ``key`` identifies the request; every random choice is seeded by
    (seed, key), which is what makes answers reproducible.  A search's or an http:// bot's
    decisions run in its own thread (:meth:`run`), one at a time in arrival order (an upstream's
    calls several at once), so the event loop stays free for other requests meanwhile.
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
        self.shown = shown_spec(spec)  # the spec as logs, /v1/info and the page show it: no password
        # the registry's grammar (a bad spec fails here, in one line); a run folder: its newest checkpoint
        self._parsed = _resolved(parse_spec(spec))
        self.searches = self._parsed.kind == "search"  # its decisions have a time bound (deadline_ms)
        self._load(self._parsed)
        if temperature and not self.onnx and self.checkpoint is None:
            raise ValueError(f"--temperature applies to neural bots, not to {self.shown!r}")
        played = self.onnx or self.agent
        self.name = str(getattr(played, "name", "") or self.shown)
        tables = played.trained_tables if played is not None else None
        #: the tables its network was trained for (the checkpoint's metadata), None: any table
        self.tables: tuple[Table, ...] | None = tables
        self._keys = {t.key for t in tables or ()}
        folder = Path(self.checkpoint) if self.checkpoint else None
        if folder is not None and folder.suffix == ".onnx":
            folder = folder.parent
        self.strength = (measured_strength(folder, self.name, self.searches)
                         if folder is not None and folder.is_dir() else {})
        calls = UPSTREAM_CALLS if self._parsed.kind == "http" else 1
        #: a bot that may take long (a search, an upstream) decides in its own thread; a policy pass of
        #: a millisecond or a built-in player costs less than the hand-over, and decides inline
        self._thread = (ThreadPoolExecutor(calls, thread_name_prefix=f"bot-{self.name}"[:15])
                        if self.searches or self._parsed.kind == "http" else None)
        self._waiting, self._waiting_lock = 0, threading.Lock()  # calls queued for the bot's thread
        if self.searches:  # before the first request, which would otherwise pay seconds for it
            self.agent.warm(seed=seed)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` (anything that makes this bot decide) in the bot's thread, or inline."""
        if self._thread is None:
            return fn(*args)
        with self._waiting_lock:
            self._waiting += 1

        def started() -> T:
            with self._waiting_lock:
                self._waiting -= 1
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self._thread, started)

    def _until(self, arrived: float) -> float:
        """When a searched decision of a request that arrived at ``arrived`` must stop: its deadline,
        less the time the requests queued behind it (whose deadlines are no earlier) need to be
        answered unsearched, at twice the policy pass each (the view and the answer as much again)."""
        return arrived + self.agent.deadline_ms / 1000 - self._waiting * 2 * self.agent.policy_s

    def _load(self, spec: AgentSpec) -> None:
        """Build the agent through the registry.  A checkpoint folder with an exported model
        is served from its ONNX file (no PyTorch); a built-in player is only checked here."""
        t = self.temperature
        if spec.kind == "checkpoint":
            self.onnx = exported_agent(spec.target, seed=self.seed, temperature=t)
            if self.onnx is not None:
                self.checkpoint = str(self.onnx.path)
                return
            if not self.note:
                self.note = (f"no ONNX file in {spec.target}: serving it with PyTorch"
                             f" (samloc export {spec.target})")
        if spec.kind == "onnx":
            self.onnx = make_agent(spec, seed=self.seed, temperature=t)
            self.checkpoint = str(Path(spec.target))
        elif spec.kind == "checkpoint":
            self.agent = make_agent(spec, seed=self.seed, **({"temperature": t} if t else {}))
            self.checkpoint = str(Path(spec.target))
        elif spec.kind == "search":  # play-time search: PyTorch, one instance
            if t:
                raise ValueError(f"--temperature applies to the plain policy, not to search ({self.spec!r})")
            self.agent = make_agent(spec, seed=self.seed, deadline_ms=self.deadline_ms)
            self.checkpoint = spec.target
        elif spec.kind == "http":
            self.agent = make_agent(spec, seed=self.seed, timeout=UPSTREAM_TIMEOUT_S)
        else:
            make_agent(spec, seed=self.seed)  # checks it builds now, not at the first request
            self.per_request = True

    # ---- what it plays -----------------------------------------------------------
    def plays(self, table: Table) -> bool:
        return self.tables is None or table.key in self._keys

    def supported(self) -> list[Supported]:
        """What it was trained for (every preset table for a rule-based bot), by rule set."""
        tables = (preset_tables() if self.tables is None
                  else [t for _, t in sorted({t.key: t for t in self.tables}.items())])
        by: dict[str, tuple[RuleSet, list[int]]] = {}
        for t in tables:
            by.setdefault(t.key[0], (t.rules, []))[1].append(t.players)
        return [(rs, rs.to_record(), ps) for rs, ps in by.values()]

    def supports_json(self) -> list[dict[str, Any]]:
        """``[{rules, players: [...]}]``: :meth:`supported` as the protocol shows it."""
        return _as_json(self.supported())

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "agent": self.shown, "checkpoint": self.checkpoint,
                "supports": self.supports_json(), "any_rule_overrides": self.tables is None,
                "settings": getattr(self.agent, "settings", {}) if self.agent is not None else {}}

    # ---- one decision ------------------------------------------------------------------
    def decide(self, game: Game, seat: int, key: int, arrived: float | None = None,
               hops: int = 0) -> tuple[int, dict[str, Any] | None]:
        """The action and its ``info``; ``arrived``: the request's ``time.perf_counter()`` reading, from
        which a searched decision's deadline counts (default: from now); ``hops``: the bot servers the
        request passed through before this one (an http:// bot is told one more)."""
        rng = np.random.default_rng([self.seed & 0xFFFFFFFF, key])
        info: dict[str, Any] | None = None
        if self.onnx is not None:
            probs, value, mask = self.onnx.policy(game, seat)
            a = choose_action(probs, mask, self.temperature, rng)
            legal = np.flatnonzero(mask)
            best = legal[np.argsort(-probs[legal], kind="stable")][:3]
            info = {"value": round(value, 4),
                    "top": [{"move": ACTION_NAMES[int(b)], "p": round(float(probs[b]), 4)} for b in best]}
        elif self.per_request:
            a = make_agent(self._parsed, seed=int(rng.integers(2**31 - 1))).act(game, seat)
        elif self._parsed.kind == "http":
            a = self.agent.act(game, seat, hops=hops + 1)
        elif self.searches and arrived is not None and self.agent.deadline_ms:
            a = self.agent.act(game, seat, until=self._until(arrived))
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

    def route(self, table: Table) -> Bot | None:
        """The bot that plays this table, or None."""
        key = table.key
        if key not in self._routes:
            if len(self._routes) >= 1024:  # clients may name any house rules: keep the memo bounded
                self._routes.clear()
            ranked = sorted((b for b in self.bots if b.plays(table)),
                            key=lambda b: (b.tables is None, -b.strength.get(key, float("-inf"))))
            self._routes[key] = ranked[0] if ranked else None
        return self._routes[key]

    def for_table(self, table: Table) -> Bot:
        bot = self.route(table)
        if bot is None:
            plays = "; ".join(f"{rs.name} with {', '.join(map(str, ps))}" for rs, _, ps in self.supported())
            raise RequestError(f"no bot here plays {table.rules.name} with {table.players} players;"
                               f" this server plays {plays}")
        return bot

    def supported(self) -> list[Supported]:
        """Every table one of the bots plays, merged by rule set."""
        if any(b.tables is None for b in self.bots):
            return next(b for b in self.bots if b.tables is None).supported()
        by: dict[str, tuple[RuleSet, Any, set[int]]] = {}
        for b in self.bots:
            for rs, shown, ps in b.supported():
                by.setdefault(json.dumps(shown, sort_keys=True), (rs, shown, set()))[2].update(ps)
        return [(rs, shown, sorted(ps)) for rs, shown, ps in by.values()]

    def supports_json(self) -> list[dict[str, Any]]:
        return _as_json(self.supported())

    def info(self) -> dict[str, Any]:
        routes, chosen = [], []
        for rs, shown, ps in self.supported():
            for p in ps:
                table = Table(rs, p)
                b = self.route(table)
                assert b is not None
                chosen.append(b)
                routes.append({"rules": shown, "players": p, "bot": b.name,
                               "mean_vs_heuristic": b.strength.get(table.key)})
        sup = self.supports_json()
        # PROTOCOL §4's one model and checkpoint: the bot that plays the most tables (the first on a tie)
        main = max(self.bots, key=lambda b: sum(c is b for c in chosen))
        onnx = next((b.onnx for b in self.bots if b.onnx is not None), None)
        return {"name": " + ".join(b.name for b in self.bots),
                "agent": main.shown, "checkpoint": main.checkpoint,
                "rules": [s["rules"] for s in sup], "players": sorted({p for s in sup for p in s["players"]}),
                "supports": sup, "any_rule_overrides": any(b.tables is None for b in self.bots),
                "bots": [b.info() for b in self.bots], "routes": routes,
                "format": FORMAT, "action_table_version": ACTION_TABLE_VERSION,
                "obs_version": onnx.metadata.get("obs_version") if onnx is not None else None,
                "temperature": main.temperature, "deterministic": not self.deadline_ms,
                "deadline_ms": self.deadline_ms}


def _resolved(spec: AgentSpec) -> AgentSpec:
    """A checkpoint or searched spec whose folder is a run folder names the run's newest good
    checkpoint instead (:func:`agents.nets.format.resolve`, as eval and league read it): its exported
    model, reports and belief are there."""
    if spec.kind not in ("checkpoint", "search"):
        return spec
    return AgentSpec(spec.kind, str(resolve(spec.target)), spec.option)


def _as_json(supported: list[Supported]) -> list[dict[str, Any]]:
    return [{"rules": shown, "players": ps} for _, shown, ps in supported]


def view_key(game: Game, seat: int) -> int:
    """A 63-bit digest of a seat's view: equal views, equal keys (hand order ignored)."""
    blob = json.dumps([game.rules.to_record(), game.players, game.opener, seat,
                       game.hand(seat), game.events], sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "little") >> 1


def decide_event(bot: Bot, view: Game, seat: int, arrived: float | None = None,
                 hops: int = 0) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The bot's decision on a seat's view, as a record event (checked legal by the engine);
    ``arrived`` and ``hops`` as in :meth:`Bot.decide`."""
    a, info = bot.decide(view, seat, view_key(view, seat), arrived, hops)
    if a not in view.legal_actions():  # a bug in an agent: refuse to answer rather than guess
        raise AgentFailure(f"agent {bot.name} chose {ACTION_NAMES[a] if 0 <= a < len(ACTION_NAMES) else a},"
                           " which is not legal here")
    return view.copy().apply(a), info


def refuse_loop(specs: list[str] | None, host: str, port: int) -> None:
    """ValueError when an ``http://`` bot is this server itself (``host``:``port``), which would
    call itself for every decision until each call timed out."""
    mine = _addresses(host)
    for spec in specs or []:
        if parse_spec(spec).kind != "http":
            continue
        url = urlsplit(spec)
        if port == 0 or (url.port or (443 if url.scheme == "https" else 80)) != port:
            continue
        theirs = _addresses(url.hostname or "")
        this_machine = (any(a.is_loopback or a.is_unspecified for a in theirs)
                        or theirs & _addresses(socket.gethostname()))
        if theirs & mine or (this_machine and any(a.is_unspecified for a in mine)):  # 0.0.0.0 takes them all
            raise ValueError(f"--agent {shown_spec(spec)} is this server itself ({host}:{port}): it would ask"
                             " itself for every decision")


def _addresses(host: str) -> set[Any]:
    """The IP addresses ``host`` names (none where it does not resolve)."""
    try:
        return {ipaddress.ip_address(a[4][0].split("%")[0]) for a in socket.getaddrinfo(host, None)}
    except (OSError, ValueError):
        return set()
