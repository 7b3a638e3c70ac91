"""The server's edge under a real uvicorn (``serve_options``): slow and greedy clients, a
connection that survives a bug's 500 answer, and ``samloc serve --workers 2``.

Timeouts are shortened to a second here; the checks allow several seconds of slack, since the
machine may be busy.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agents.serving.edge as edge
from conftest import live_server
from agents.serving.app import create_app
from agents.serving.edge import listening_sockets, serve_options
from sam_env.cards import card_str
from sam_env.game import Game

pytestmark = pytest.mark.slow  # live servers

ROOT = Path(__file__).resolve().parent.parent
SHORT = 1.0    # the shortened header and body timeouts, in seconds
SLACK = 8.0    # a busy machine's allowance on top
LIMIT = 8      # the connections, and the requests in progress, of the live server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[int, Any]]:
    """(port, app) of a heuristic server with one-second header and body timeouts and room for
    16 connections and eight requests in progress at once."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(edge, "BODY_TIMEOUT_S", SHORT)
        mp.setattr(edge, "MAX_IN_FLIGHT", LIMIT)
        mp.setattr(edge.H11, "header_timeout_s", SHORT)
        mp.setattr(edge.H11, "max_connections", 2 * LIMIT)
        app = create_app("heuristic")
        with live_server(app, serve_options) as url:
            yield int(url.rsplit(":", 1)[1]), app


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=SHORT + SLACK)
    return s


def _read_all(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def _closed_within(s: socket.socket, seconds: float) -> float:
    """Seconds until the server closed the connection (it must, within ``seconds``)."""
    t0 = time.monotonic()
    s.settimeout(seconds)
    try:
        rest = _read_all(s)
    except ConnectionResetError:
        rest = b""
    assert rest == b"", rest
    return time.monotonic() - t0


def test_a_silent_connection_is_closed(live: tuple[int, Any]) -> None:
    with _connect(live[0]) as s:
        assert SHORT * 0.9 <= _closed_within(s, SHORT + SLACK) <= SHORT + SLACK


def test_headers_trickled_in_are_cut_off(live: tuple[int, Any]) -> None:
    with _connect(live[0]) as s:
        t0 = time.monotonic()
        s.sendall(b"GET /v1/health HTTP/1.1\r\n")
        closed = False
        for byte in b"Host: 127.0.0.1\r\nX-Slow: " + b"a" * 200:
            try:
                s.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.1)
            s.settimeout(0.01)
            try:
                if s.recv(1) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
        assert closed, "the server kept a connection whose headers never ended"
        assert time.monotonic() - t0 <= SHORT + SLACK


def test_a_body_trickled_in_is_refused_with_408(live: tuple[int, Any]) -> None:
    with _connect(live[0]) as s:
        s.sendall(b"POST /v1/act HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{")
        t0 = time.monotonic()
        answer = b""
        s.settimeout(0.2)
        while time.monotonic() - t0 < SHORT + SLACK:
            try:
                s.sendall(b" ")
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if not chunk:
                break
            answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer
        assert b"connection: close" in head.lower()
        assert json.loads(body) == {"error": f"the request body did not arrive within {SHORT:g} s"}
        assert time.monotonic() - t0 <= SHORT + SLACK


def test_headers_growing_past_the_limit_are_refused(live: tuple[int, Any]) -> None:
    with _connect(live[0]) as s:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (edge.MAX_HEADER_BYTES + 1024))
        assert _read_all(s).startswith(b"HTTP/1.1 400")


def _half_open(port: int) -> socket.socket:
    """A connection that sends a request line and one header, and then nothing."""
    s = _connect(port)
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
    return s


def _health(port: int) -> tuple[int, bytes, Any]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=SHORT + SLACK)
    c.request("GET", "/v1/health")
    r = c.getresponse()
    out = (r.status, r.read(), r.headers)
    c.close()
    return out


def test_idle_connections_past_the_limit_make_room_for_newcomers(live: tuple[int, Any]) -> None:
    """600 half-open connections locked everyone out (uvicorn's limit_concurrency counts them): every
    request, health included, got a bare 503 for as long as they were held.  Now the oldest
    connection still waiting for its headers is closed to make room, again and again."""
    held = [_half_open(live[0]) for _ in range(4 * LIMIT)]
    try:
        for _ in range(3):
            assert _health(live[0])[:2] == (200, b'{"ok":true}')
            held += [_half_open(live[0]) for _ in range(2 * LIMIT)]
        assert _closed_within(held[0], SLACK) <= SLACK, "the oldest half-open connection was not closed"
    finally:
        for s in held:
            s.close()


def _raw(port: int, data: bytes) -> tuple[bytes, dict[str, str], Any]:
    """Send ``data`` on a new connection; the status line, headers and JSON body of the one answer,
    which must close the connection."""
    with _connect(port) as s:
        s.sendall(data)
        answer = _read_all(s)
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines)}
    assert headers["connection"] == "close" and headers["x-frame-options"] == "DENY", answer
    assert headers["content-security-policy"].startswith("default-src 'self'"), answer
    return status.encode(), headers, json.loads(body)


def test_requests_in_progress_past_the_limit_are_answered_503_in_json(live: tuple[int, Any]) -> None:
    """Bodies that trickle in hold requests in progress; past the limit a request is refused with the
    server's JSON and security headers (uvicorn's own 503 had neither), and health is still answered."""
    held = []
    try:
        for _ in range(LIMIT):
            held.append(_connect(live[0]))
            held[-1].sendall(b"POST /v1/act HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 100\r\n\r\n{")
        time.sleep(0.3)  # each is in progress, waiting for the rest of its body
        status, headers, body = _raw(live[0],
                                     b"POST /v1/act HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        assert (status, headers["retry-after"], body) == (
            b"HTTP/1.1 503 Service Unavailable", "1",
            {"error": f"the server has {LIMIT} requests in progress; try again in a second"})
        assert _health(live[0])[:2] == (200, b'{"ok":true}')
    finally:
        for s in held:
            s.close()


PREFIX = b"POST /v1/act HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"


@pytest.mark.parametrize("data,status,error", [
    # RFC 9112 section 6.3: both framings is the shape of request smuggling; the request after it,
    # on the same connection, was answered
    (PREFIX + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
     b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 400 Bad Request",
     "a request may not have both Content-Length and Transfer-Encoding (RFC 9112 section 6.3)"),
    (PREFIX + b"Transfer-Encoding: chunked\r\n\r\n" + b"9" * 20 + b"\r\n{}",
     b"HTTP/1.1 413 Request Entity Too Large",
     f"the request body is larger than {edge.MAX_BODY} bytes"),  # was answered only by the body timeout
    (PREFIX + b"Transfer-Encoding: chunked\r\n\r\n" + b"9" * 21 + b"\r\n{}", b"HTTP/1.1 400 Bad Request",
     "the request is not valid HTTP/1.1 (RFC 9112)"),  # was uvicorn's bare text
    (b"GET /v1/health HTTP/1.1\r\nHost x\r\n\r\n", b"HTTP/1.1 400 Bad Request",
     "the request is not valid HTTP/1.1 (RFC 9112)"),
    (b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
     b"HTTP/1.1 431 Request Header Fields Too Large",
     f"the request line and headers are larger than {edge.MAX_HEADER_BYTES} bytes"),  # was answered 200
])
def test_bad_framing_is_refused_in_json_and_the_connection_closed(live: tuple[int, Any], data: bytes,
                                                                   status: bytes, error: str) -> None:
    got_status, _, body = _raw(live[0], data)
    assert (got_status, body) == (status, {"error": error})


def test_a_bugs_500_leaves_the_connection_open(live: tuple[int, Any]) -> None:
    """Starlette re-raises an error after its 500 answer; uvicorn would then drop the connection."""
    port, app = live
    bot = app.state.bots.bots[0]

    def boom(*_: Any) -> Any:
        raise RuntimeError("a bug")

    g = Game.new("hoi_quan_bai", 4, seed=3)
    body = json.dumps({"format": "samloc/1", "rules": "hoi_quan_bai", "players": 4, "opener": g.opener,
                       "seat": g.to_act, "hand": [card_str(c) for c in g.hand(g.to_act)], "events": []})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=SLACK)
    bot.decide = boom
    try:
        c.request("POST", "/v1/act", body=body, headers={"content-type": "application/json"})
        r = c.getresponse()
        assert r.status == 500 and json.loads(r.read()) == {"error": "internal error (RuntimeError)"}
    finally:
        del bot.decide
    sock = c.sock
    c.request("GET", "/v1/health")
    r = c.getresponse()
    assert r.status == 200 and json.loads(r.read()) == {"ok": True}
    assert c.sock is sock, "the connection was dropped after the 500"
    c.close()


# ---- several worker processes ------------------------------------------------------------------------
def test_worker_processes_share_the_play_sessions(tmp_path: Path) -> None:
    """``samloc serve --workers 2``: a game on the page goes on whichever process answers (each
    request on a new connection, so both take part)."""
    port = _free_port()
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "samloc", "serve", "--agent", "heuristic",
                             "--port", str(port), "--workers", "2"],
                            cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        t0 = time.time()
        while True:
            assert proc.poll() is None and time.time() - t0 < 120, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(url + "/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        rng = random.Random(4)
        for game in range(3):
            st = httpx.post(url + "/play/api/new", json={"rules": "online", "players": 3, "seat": 1}).json()
            while st["result"] is None:
                legal = st["legal"]
                m = next((x for x in legal if x["move"] == "no_sam"), None) or rng.choice(legal)
                body = {"move": m["move"]} if m["move"] in ("pass", "no_sam") else {"cards": m["cards"]}
                r = httpx.post(f"{url}/play/api/{st['session']}/move", json=body)
                assert r.status_code == 200, r.text
                st = r.json()
            assert httpx.get(f"{url}/play/api/{st['session']}").json()["result"] == st["result"]
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()


def test_workers_must_be_at_least_one() -> None:
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--workers", "0"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "--workers: must be 1 or more, not 0" in r.stderr


@pytest.mark.parametrize("args,line", [
    (["--port", "84336"], "samloc serve: argument --port: a port is 0 to 65535, not 84336"),
    (["--port", "-1"], "samloc serve: argument --port: a port is 0 to 65535, not -1"),
    (["--seed", "-5"], "samloc serve: argument --seed: must be 0 or more, not -5"),
    (["--temperature", "inf"], "samloc serve: argument --temperature: must be 0 (greedy) or a finite number"
                               " above it, not 'inf'"),
    (["--temperature", "-0.5"], "samloc serve: argument --temperature: must be 0 (greedy) or a finite number"
                                " above it, not '-0.5'"),
])
def test_out_of_range_values_are_refused_naming_the_option(args: list[str], line: str) -> None:
    """84336 was taken modulo 65536 (it listened on 18800), a negative seed's error did not name
    --seed, and an infinite temperature was served."""
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--agent", "heuristic", *args],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (r.returncode, r.stderr, r.stdout) == (2, line + "\n", "")


def test_connections_on_the_servers_sockets_get_tcp_nodelay() -> None:
    """samloc serve makes its own sockets (one per worker), with IPPROTO_TCP, so asyncio sets
    TCP_NODELAY; uvicorn's own --workers socket has proto 0 and left Nagle's algorithm on, so each
    keep-alive request waited ~40 ms on a delayed ACK (uvicorn issue #3149)."""
    socks = listening_sockets("127.0.0.1", 0, 2)
    port = socks[0].getsockname()[1]
    assert [s.getsockname()[1] for s in socks] == [port, port]
    assert all(s.proto == socket.IPPROTO_TCP for s in socks)
    srv = uvicorn.Server(uvicorn.Config(create_app("heuristic"), **serve_options("127.0.0.1", port)))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": socks[:1]}, daemon=True)
    thread.start()
    t0 = time.time()
    while not srv.started:
        assert time.time() - t0 < 60 and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=SLACK)
        c.request("GET", "/v1/health")
        assert c.getresponse().read() == b'{"ok":true}'
        (conn,) = srv.server_state.connections
        assert conn.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        c.close()
    finally:
        srv.should_exit = True
        thread.join(10)
        socks[1].close()


# ---- an http:// upstream that fails ------------------------------------------------------------------
def _act_body(seed: int = 3) -> str:
    g = Game.new("hoi_quan_bai", 4, seed=seed)
    return json.dumps({"format": "samloc/1", "rules": "hoi_quan_bai", "players": 4, "opener": g.opener,
                       "seat": g.to_act, "hand": [card_str(c) for c in g.hand(g.to_act)], "events": []})


def test_an_unreachable_upstream_is_a_503_naming_it() -> None:
    """It was a 500 "internal error (AgentError)" with a traceback in the log."""
    port = _free_port()  # nothing listens there
    from fastapi.testclient import TestClient

    with TestClient(create_app(f"http://127.0.0.1:{port}")) as client:
        r = client.post("/v1/act", content=_act_body(), headers={"content-type": "application/json"})
    assert r.status_code == 503
    assert r.json()["error"].startswith(f"cannot reach http://127.0.0.1:{port}/v1/act: ")


def test_a_hung_upstream_times_out_and_blocks_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    """An upstream that accepts and never answers: /v1/health took 9.8 s, as the call blocked the
    event loop.  Now health is answered while the call waits, and the call ends in a 503."""
    import agents.serving.bots as bots

    monkeypatch.setattr(bots, "UPSTREAM_TIMEOUT_S", 5.0)
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)  # accepted by the kernel, never read or answered
    upstream = f"http://127.0.0.1:{hung.getsockname()[1]}"
    answer: dict[str, Any] = {}
    try:
        with live_server(create_app(upstream), serve_options) as url:
            def act() -> None:
                r = httpx.post(url + "/v1/act", content=_act_body(), timeout=60,
                               headers={"content-type": "application/json"})
                answer.update(status=r.status_code, body=r.json())
            caller = threading.Thread(target=act)
            caller.start()
            time.sleep(0.5)  # the call is in flight
            health = httpx.get(url + "/v1/health", timeout=60)
            assert health.json() == {"ok": True} and not answer, "health waited for the hung upstream"
            caller.join(60)
    finally:
        hung.close()
    assert answer == {"status": 503, "body": {"error": f"{upstream}/v1/act did not answer within 5 s"}}


@pytest.mark.parametrize("host,url", [("127.0.0.1", "http://127.0.0.1:{port}"), ("127.0.0.1", "http://localhost:{port}/"),
                                      ("0.0.0.0", "http://127.0.0.1:{port}")])
def test_a_loop_onto_the_server_itself_is_refused_at_start(host: str, url: str) -> None:
    """It took 10 s per decision, then answered 500."""
    port = _free_port()
    spec = url.format(port=port)
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--agent", spec, "--host", host,
                        "--port", str(port)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (r.returncode, r.stderr) == (2,
                                        f"samloc serve: --agent {spec} is this server itself ({host}:{port}):"
                                           " it would ask itself for every decision\n")


FRAMING_LINES = st.sampled_from([b"Content-Length: 2", b"Content-Length: 7", b"Content-Length: -1",
                                  b"Content-Length: 99999999999999999999", b"Content-Length: 2, 2",
                                  b"Transfer-Encoding: chunked", b"Transfer-Encoding: gzip, chunked",
                                  b"Transfer-Encoding: identity", b"Transfer-Encoding:  chunked ",
                                  b"Transfer-Encoding: chunked, chunked", b"Expect: 100-continue",
                                  b"Connection: close", b"Host: y", b"X-A: " + b"b" * 9000])
CHUNKS = st.lists(st.tuples(st.text("0123456789abcdefABCDEF", min_size=1, max_size=24),
                            st.binary(max_size=12)),
                  max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(FRAMING_LINES, max_size=4), chunks=CHUNKS, end=st.booleans())
def test_any_framing_gets_an_answer_that_is_not_a_5xx(live: tuple[int, Any], lines: list[bytes],
                                                      chunks: list[tuple[str, bytes]], end: bool) -> None:
    """Whatever the framing headers and chunks, the first answer is a 2xx or 4xx of the server's own
    (its security headers on it), never a 5xx or a silent close (a 20-digit chunk was one)."""
    body = (b"".join(size.encode() + b"\r\n" + data + b"\r\n" for size, data in chunks)
            + (b"0\r\n\r\n" if end else b""))
    with _connect(live[0]) as s:
        s.sendall(PREFIX + b"".join(line + b"\r\n" for line in lines) + b"\r\n" + body)
        s.settimeout(SHORT + SLACK)
        try:
            answer = s.recv(65536)
        except ConnectionResetError:
            answer = b""
    status = answer[9:12]
    assert answer.startswith(b"HTTP/1.1 ") and status[:1] in (b"1", b"2", b"4"), answer[:200]
    assert b"content-security-policy: default-src 'self'" in answer.lower() or status == b"100", answer[:400]


# ---- the served-latency benchmark ---------------------------------------------------------------
def test_bench_serve_reports_each_phase() -> None:
    r = subprocess.run([sys.executable, "-m", "samloc", "bench", "--serve", "--agent", "heuristic",
                        "--requests", "30",
                        "--warmup", "5", "--clients", "1,3", "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.splitlines()[-1])
    assert [(p["workers"], p["clients"], p["requests"], p["ok"], p["errors"]) for p in res["phases"]] == [
        (1, 1, 30, 30, {}), (1, 3, 30, 30, {})]
    assert set(res["phases"][0]["latency_ms"]) == {"p50", "p90", "p99", "max"}


@pytest.mark.parametrize("args,line", [
    (["--url", "http://example.com:8000"], "samloc bench: only loopback servers may be load tested"),
    (["--clients", "0,4"],
     "samloc bench: argument --clients: must be integers of 1 or more, separated by commas,"
                           " not '0,4'"),
])
def test_bench_serve_refuses_bad_input_in_one_line(args: list[str], line: str) -> None:
    r = subprocess.run([sys.executable, "-m", "samloc", "bench", "--serve", *args],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (r.returncode, r.stderr) == (2, line + "\n")
