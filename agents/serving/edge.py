"""The HTTP edge: what every connection, request and answer meets before the app sees it.

:class:`Edge` refuses ambiguous framing and oversized heads, bounds the requests in progress,
bounds and times the request body, and adds the security headers to every answer; :class:`H11`
bounds the time a request's headers take and the connections held open, and answers what uvicorn
would answer bare (a malformed request) in the same JSON with the same headers;
:func:`serve_options` gives uvicorn the limits a slow or greedy client meets (docs/serving.md,
"Slow clients"); :func:`listening_sockets` makes a socket per worker process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import socket
import time
from http import HTTPStatus
from typing import Any

import h11
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_BODY = 64 * 1024          # a whole game's events are a few KiB
# Slow and greedy clients (docs/serving.md): each holds a connection, and there are only so many.
HEADER_TIMEOUT_S = 10.0       # a request's headers must be in this long after the connection or last answer
BODY_TIMEOUT_S = 10.0         # and its body this long after that
KEEP_ALIVE_S = 5              # an idle keep-alive connection is closed after this
MAX_HEADER_BYTES = 16 * 1024  # a request line and headers larger than this are refused (431, or 400 while
                              # incomplete)
MAX_IN_FLIGHT = 256           # requests in progress per process (health aside); more are answered 503
#: Open connections per process: past it, the oldest still waiting for its headers is closed to make
#: room (idle sockets cannot lock anyone out), and a newcomer only when none waits.  Below the
#: process's file limit, which would otherwise stop accept() itself.
MAX_CONNECTIONS = max(64, min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 128))
NO_LIMIT = frozenset({"/v1/health"})  # answered even when MAX_IN_FLIGHT are in progress
ARRIVED = "samloc.arrived"    # the scope's key for the request's arrival at the Edge (time.perf_counter())
#: Sent with every answer: the page runs only its own scripts and styles and is never framed.
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; object-src 'none';"
                                 b" base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
_LOG = logging.getLogger("uvicorn.error")


class Edge:
    """The outermost layer, between uvicorn and the app: what every request and answer shares.

    - A request with both Content-Length and Transfer-Encoding is refused with 400 and its
      connection closed (RFC 9112 §6.3: the shape of request smuggling); a request line and headers
      over ``MAX_HEADER_BYTES`` with 431 (h11 bounds only a head that is still incomplete).
    - Past :data:`MAX_IN_FLIGHT` requests in progress, 503 with Retry-After (health excepted).
    - A body over ``max_bytes`` is refused with 413, and one that takes longer than
      ``body_timeout_s`` to arrive with 408, before the app reads it; both answers close the
      connection, since the rest of the body is not read.
    - Every answer carries :data:`SECURITY_HEADERS`.
    - An error the app raises after its 500 answer went out (Starlette re-raises it) is logged
      here: passed on, uvicorn would drop the connection under the client's feet.
    """

    def __init__(self, app: Any, max_bytes: int, body_timeout_s: float, max_in_flight: int):
        self.app, self.max_bytes, self.body_timeout_s = app, max_bytes, body_timeout_s
        self.max_in_flight, self.in_flight = max_in_flight, 0

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

        scope[ARRIVED] = time.perf_counter()  # a searched decision's deadline counts from here
        problem = _framing_problem(scope)
        if problem:
            await _refuse(send_secured, *problem)
            return
        if scope["path"] not in NO_LIMIT and self.in_flight >= self.max_in_flight:
            await _refuse(send_secured, 503, f"the server has {self.max_in_flight} requests in progress;"
                                              " try again in a second", [(b"retry-after", b"1")])
            return
        self.in_flight += 1
        try:
            await self._answer(scope, receive, send_secured, lambda: started)
        finally:
            self.in_flight -= 1

    async def _answer(self, scope: dict, receive: Any, send_secured: Any, started: Any) -> None:
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
            if not started():
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


def _framing_problem(scope: dict) -> tuple[int, str] | None:
    """(status, error) for a request whose head is refused before its body is read, else None."""
    headers = scope.get("headers") or []
    names = {k for k, _ in headers}
    if b"content-length" in names and b"transfer-encoding" in names:
        return 400, "a request may not have both Content-Length and Transfer-Encoding (RFC 9112 section 6.3)"
    size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + 16
    if size + sum(len(k) + len(v) + 4 for k, v in headers) > MAX_HEADER_BYTES:
        return 431, f"the request line and headers are larger than {MAX_HEADER_BYTES} bytes"
    return None


def _refusal(error: str) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """A refusal's JSON body and headers (the security headers are the caller's)."""
    body = json.dumps({"error": error}).encode()
    return body, [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                  (b"connection", b"close")]


async def _refuse(send: Any, status: int, error: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """A refusal sent before the app saw the request; the connection closes after it."""
    body, headers = _refusal(error)
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


def refusal_bytes(status: int, error: str) -> bytes:
    """A whole HTTP/1.1 refusal, written straight to a connection that is closed after it (where
    uvicorn would answer bare, or no request was read): the same JSON and headers as every answer."""
    body, headers = _refusal(error)
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode()]
    head += [k + b": " + v for k, v in headers + SECURITY_HEADERS]
    return b"\r\n".join(head) + b"\r\n\r\n" + body



class H11(H11Protocol):
    """uvicorn's HTTP/1.1, with a bound on the time a request's headers take to arrive and on the
    connections held open, and its bare answers given in the server's JSON and headers.

    - uvicorn has no header timeout: a client that connects and sends nothing, or trickles its
      headers a byte at a time, would hold its connection open for ever (each byte also cancels
      the keep-alive timer).  The timer runs from the connection (or the previous answer) until
      the request's headers are complete; then the connection is closed.
    - uvicorn's ``limit_concurrency`` counts idle connections: 600 half-open ones locked every
      newcomer out, health included, with a bare 503.  Here a connection past
      ``max_connections`` closes the oldest one still waiting for its headers (a newcomer is
      refused only when every connection has a request in progress), as nginx and Apache's
      event MPM drop idle keep-alive connections under pressure.
    - A malformed request (uvicorn's bare text 400) and a chunk bigger than the body limit
      (h11 takes any of up to 20 hex digits, then waits for it) are answered at once."""

    header_timeout_s = HEADER_TIMEOUT_S
    max_connections = MAX_CONNECTIONS
    _header_timer: asyncio.TimerHandle | None = None
    _waiting_since = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._expect_headers()
        if len(self.connections) > self.max_connections:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the request line and headers are in
            self._headers_in()
        # h11 keeps the size of the chunk it reads in a private field: where it is gone, the
        # body timeout still ends such a request (408)
        if getattr(getattr(self.conn, "_reader", None), "_bytes_in_chunk", 0) > MAX_BODY:
            self._refuse_now(413, f"the request body is larger than {MAX_BODY} bytes")

    def send_400_response(self, msg: str) -> None:
        self._refuse_now(400, "the request is not valid HTTP/1.1 (RFC 9112)")

    def _refuse_now(self, status: int, error: str, before_request: bool = False) -> None:
        """Answer and close; ``before_request``: only our side is closed, so that the request the
        client is sending does not reset the connection before it reads the answer (the header
        timer closes the rest)."""
        if not self.transport.is_closing():
            self.transport.write(refusal_bytes(status, error))
            self.transport.write_eof() if before_request else self.transport.close()

    def _make_room(self) -> None:
        waiting = [c for c in self.connections
                   if c is not self and getattr(c, "_header_timer", None) is not None]
        if waiting:
            min(waiting, key=lambda c: c._waiting_since).transport.close()
        else:
            self._refuse_now(503, f"the server holds {self.max_connections} connections, each with a request"
                                  " in progress; try again in a second", before_request=True)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._expect_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_in()
        super().connection_lost(exc)

    def _expect_headers(self) -> None:
        self._headers_in()
        self._waiting_since = time.monotonic()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _headers_in(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def serve_options(host: str, port: int, log_level: str = "warning",
                  trusted_proxies: list[str] | None = None) -> dict[str, Any]:
    """uvicorn's settings for ``samloc serve``: the limits a slow or greedy client meets
    (docs/serving.md, "Slow clients"), and whose ``X-Forwarded-For`` names the client.

    A request's client (the play page's quotas are per client) is the socket's peer, unless the
    peer is one of ``trusted_proxies`` (addresses or networks, ``--trusted-proxy``): then it is the
    nearest untrusted address in ``X-Forwarded-For`` (uvicorn's ``forwarded_allow_ips``).  uvicorn
    on its own trusts 127.0.0.1, so any local process could forge a new client per request."""
    return {"host": host, "port": port, "log_level": log_level, "http": H11,
            "timeout_keep_alive": KEEP_ALIVE_S, "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
            "proxy_headers": bool(trusted_proxies), "forwarded_allow_ips": list(trusted_proxies or [])}


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


def wrap(app: FastAPI) -> FastAPI:
    """Put :class:`Edge` outside everything else (FastAPI would turn its refusals into 400s)."""
    inner = app.build_middleware_stack()
    # what Starlette calls; built once
    app.middleware_stack = Edge(inner, MAX_BODY, BODY_TIMEOUT_S, MAX_IN_FLIGHT)
    return app
