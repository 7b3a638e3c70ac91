"""The bot server's app: a bot over HTTP (PROTOCOL §4) and a page to play against it.

One FastAPI app; its bots are loaded once, in the lifespan.  Several can be
served together (``--agent`` repeated; by default every shipped bot): each
table is played by the bot measured strongest there (:class:`~agents.serving.bots.Bots`).

- ``POST /v1/act`` rebuilds the asking seat's view with the engine
  (:meth:`Game.from_view`), refuses anything malformed or inconsistent with
  ``422 {"error": ...}`` (``413`` for a body over 64 KiB), and answers one
  legal decision as a record event, plus ``info`` (for a neural bot, its value
  estimate and its three most probable moves).
- ``GET /v1/health``, ``GET /v1/info``.
- ``GET /play``: a page (plain HTML/JS/CSS in ``static/``, package data) where a person
  plays whole sessions against the bot; the server is the game master and the
  bots see only their own seat's view, built exactly as for ``/v1/act``.

Answers are reproducible: the decision for a request depends only on the
request and the server's ``--seed`` (and, for a searched decision that runs
into its ``--deadline-ms``, on how far the search got).  A neural bot is
greedy by default; ``--temperature T`` samples from ``p^(1/T)`` with a random
stream seeded by (seed, request), so the same request still gets the same
answer.  A model is checked before it serves (:mod:`agents.players.onnx_agent`), and
an answer it cannot give soundly is a 503 naming why, never a guess.

Clients meet limits (docs/serving.md): headers and bodies must arrive in
time, bodies are at most 64 KiB, connections per process are bounded, the
play page keeps a bounded, fair number of sessions (:class:`~agents.serving.sessions.SessionStore`,
shared by the ``--workers N`` processes), and every answer carries a
Content-Security-Policy.

The agent is built by ``agents.make_agent`` from a spec the registry parses
(:func:`agents.registry.parse_spec`).  The server imports neither torch nor
gymnasium unless a checkpoint is served without its ONNX file, or with
play-time search (``DIR+search``, see :mod:`agents.players.search`).
"""

from __future__ import annotations

import gc
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from agents.base import AgentFailure
from agents.players.http_agent import LOOP_STATUS, UpstreamLoop
from sam_env.game import Game, GameError
from sam_env.cards import CardError
from sam_env.rules import PRESET_NAMES, RuleSet, RulesError
from sam_env.table import Table

from .bots import DEADLINE_MS, Bot, Bots, decide_event
from .edge import ARRIVED, wrap
from .protocol import ActRequest, HumanMove, NewSession, RequestError, read_body, read_hops
from .sessions import LiveSessions, PlaySession, SessionStore, client_key, deal_seed, session_file

STATIC = Path(__file__).resolve().parent / "static"  # package data: the play page


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
    return wrap(app)


def _new_app(load_bots: Callable[[], Bots], sessions: str | None) -> FastAPI:
    """The bare app; its lifespan loads the bots once, before the first request, and opens the
    play sessions' store (``sessions``, a file shared by worker processes; else a private one)."""
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.bots = load_bots()
        with session_file(sessions) as path:
            app.state.sessions = SessionStore(path)
            app.state.live = LiveSessions()
            gc.freeze()  # the loaded model and engine are permanent: keep them out of GC pauses
            try:
                yield
            finally:
                app.state.sessions.close()

    # no /docs or /openapi.json: the protocol is PROTOCOL §4, and bodies are read by read_body
    return FastAPI(title="samloc bot", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                   openapi_url=None,
                   description="A Sâm lốc bot: PROTOCOL §4, and a page to play it at /play.")


def _add_protocol_routes(app: FastAPI) -> None:
    """PROTOCOL §4: ``POST /v1/act``, ``GET /v1/health``, ``GET /v1/info``."""
    @app.post("/v1/act")
    async def act(request: Request) -> JSONResponse:
        t0 = request.scope[ARRIVED]  # before its body was read
        hops = read_hops(request)
        req = await read_body(request, ActRequest)
        view, b = build_view(req, request.app.state.bots)
        # a search's deadline counts from t0
        event, info = await b.run(decide_event, b, view, req.seat, t0, hops)
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


def _play_bot(request: Request, table: Table) -> tuple[Bot, bool]:
    """The bot that plays this table, or the heuristic where no served bot was trained for it
    (``True``: a stand-in, and the page says so)."""
    bots: Bots = request.app.state.bots
    b = bots.route(table)
    if b is not None:
        return b, False
    if getattr(request.app.state, "fallback", None) is None:
        request.app.state.fallback = Bot("heuristic", seed=bots.seed)
    return request.app.state.fallback, True


def _add_play_routes(app: FastAPI, allow_client_seed: bool) -> None:
    """The play page and its API; the sessions live in the app's :class:`SessionStore`, and those
    this process holds at their stored version in its :class:`LiveSessions` (not read again)."""
    def stored(request: Request, sid: str) -> tuple[PlaySession, int]:
        live: LiveSessions = request.app.state.live
        state, version = request.app.state.sessions.get(sid, live.version(sid))
        held = live.take(sid, version)
        if held is not None:
            return held, version
        assert state is not None
        table = Table(RuleSet.parse(state["rules"]), state["players"])
        b, stand_in = _play_bot(request, table)
        return PlaySession.from_json(state, table, b, stand_in, sid), version

    def store(request: Request, s: PlaySession, version: int) -> dict[str, Any]:
        request.app.state.sessions.put(s.id, s.to_json(), version)
        request.app.state.live.keep(s, version + 1)
        return s.state()

    @app.get("/play", include_in_schema=False)
    async def play_page() -> FileResponse:
        return FileResponse(STATIC / "play.html", media_type="text/html")

    app.mount("/play/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/play/api/options")
    async def options(request: Request) -> dict[str, Any]:
        bots: Bots = request.app.state.bots
        # every preset table can be played: the heuristic sits in where no served bot was trained
        every = [{"rules": n, "players": list(RuleSet.preset(n).player_counts)} for n in PRESET_NAMES]
        return {"bot": " + ".join(b.name for b in bots.bots), "supports": every,
                "model_supports": bots.supports_json()}

    @app.post("/play/api/new")
    async def new_session(request: Request) -> dict[str, Any]:
        body = await read_body(request, NewSession)
        try:
            table = Table(RuleSet.parse(body.rules), body.players)
            b, stand_in = _play_bot(request, table)
        except RulesError as exc:
            raise RequestError(str(exc)) from None
        if not 0 <= body.seat < body.players:
            raise RequestError(f"seat must be from 0 to {body.players - 1}")
        s = await b.run(PlaySession, b, table, body.seat, deal_seed(body.seed, allow_client_seed), stand_in)
        client = client_key(request.client.host if request.client else "")
        request.app.state.sessions.add(s.id, client, s.to_json())
        request.app.state.live.keep(s, 0)
        return s.state()

    @app.get("/play/api/{sid}")
    async def get_state(sid: str, request: Request) -> dict[str, Any]:
        s, version = stored(request, sid)
        request.app.state.live.keep(s, version)
        return s.state()

    @app.post("/play/api/{sid}/move")
    async def move(sid: str, request: Request) -> dict[str, Any]:
        body = await read_body(request, HumanMove)
        s, version = stored(request, sid)
        await s.bot.run(s.human, body)
        return store(request, s, version)

    @app.post("/play/api/{sid}/again")
    async def again(sid: str, request: Request) -> dict[str, Any]:
        s, version = stored(request, sid)
        if not s.game.finished:
            request.app.state.live.keep(s, version)  # unchanged: still held
            raise RequestError("finish this game first")
        await s.bot.run(s.new_game)
        return store(request, s, version)


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal and failure answers ``{"error": "..."}``: 422 for a request we refuse, 503 for
    a bot that cannot answer it soundly (a damaged model, an upstream that failed), 508 for bots that
    ask each other in a loop, the status itself otherwise, 500 for a bug."""
    @app.exception_handler(RequestError)
    async def _refused(_: Request, exc: RequestError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=422)

    @app.exception_handler(AgentFailure)
    async def _unanswerable(_: Request, exc: AgentFailure) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=503)

    @app.exception_handler(UpstreamLoop)
    async def _loop(_: Request, exc: UpstreamLoop) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=LOOP_STATUS)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:  # logged by uvicorn; tests assert none
        return JSONResponse({"error": f"internal error ({type(exc).__name__})"}, status_code=500)


def build_view(req: ActRequest, bots: Bots) -> tuple[Game, Bot]:
    """The seat's view of the game and the bot that plays its table, or RequestError naming what is
    wrong with the request."""
    try:
        rules = RuleSet.parse(req.rules)
        bot = bots.for_table(Table(rules, req.players))
        events = [e.model_dump(exclude_unset=True) for e in req.events]  # a null field given is refused
        view = Game.from_view(rules, req.players, req.opener, req.seat, req.hand, events)
    except (GameError, CardError, RulesError) as exc:
        raise RequestError(str(exc)) from None
    if view.finished:
        raise RequestError(f"the game is already over ({view.result.end if view.result else 'finished'})")
    if view.to_act != req.seat:
        raise RequestError(f"it is seat {view.to_act}'s turn, not seat {req.seat}'s")
    return view, bot
