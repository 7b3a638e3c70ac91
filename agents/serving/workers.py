"""Serving until stopped: in this process, or in a worker process per socket (``samloc serve
--workers N``), each loading its own copy of the bots; every process shares the play sessions' file,
which SIGTERM removes as SIGINT does (it holds every session's deal seed)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import socket
from typing import Any

import uvicorn

from .app import create_app
from .bots import Bots
from .edge import serve_options
from .sessions import SessionStore, session_file


class Terminated(Exception):
    """SIGTERM, raised where the process is so that the session file's cleanup runs."""


def _terminate(*_: Any) -> None:
    raise Terminated


def serve(bots: Bots, socks: list[socket.socket], *, host: str, port: int, log_level: str = "warning",
          allow_client_seed: bool = False, specs: list[str] | None = None,
          trusted_proxies: list[str] | None = None) -> int:
    """Answer on ``socks`` until stopped: here with ``bots``, or (several sockets) in a worker process
    per socket, each loading the bots ``specs`` name with the settings ``bots`` were loaded with;
    ``trusted_proxies``: whose ``X-Forwarded-For`` names the client (:func:`serve_options`).
    Returns the exit status: 0 when stopped (SIGTERM or SIGINT), 1 when a worker ended by itself."""
    # uvicorn stops on SIGTERM, then raises it again for the handler it found: the default one
    # would end the process before the session file is removed
    before = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _serve(bots, socks, serve_options(host, port, log_level, trusted_proxies),
                      allow_client_seed, specs)
    except Terminated:
        return 0
    finally:
        signal.signal(signal.SIGTERM, before)


def _serve(bots: Bots, socks: list[socket.socket], options: dict[str, Any], allow_client_seed: bool,
           specs: list[str] | None) -> int:
    """:func:`serve`'s work, inside its SIGTERM handler."""
    with session_file(None) as sessions:
        SessionStore(sessions).close()  # the table exists before workers open it together
        settings = {"allow_client_seed": allow_client_seed, "sessions": sessions}
        if len(socks) == 1:
            uvicorn.Server(uvicorn.Config(create_app(bot=bots, **settings), **options)).run(sockets=socks)
            return 0
        first = bots.bots[0]
        loaded_there = {"agent_spec": specs, "seed": first.seed, "temperature": first.temperature,
                        "deadline_ms": first.deadline_ms}
        return _run_workers(socks, {**loaded_there, **settings}, options)


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

