"""Bots that call bots (``samloc serve --agent http://...``): loops end, and an upstream's answer
has a deadline and a size limit.

Every server here is on 127.0.0.1 (real uvicorn servers on free ports, or ``samloc serve``
processes); the hostile upstreams are small raw-socket servers whose every loop is bounded.  A
bound on time is checked only where the time is the defect (an answer dripped for minutes), with
several seconds of slack for a busy machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow  # several live servers asking each other

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import agents.serving.bots as bots
from agents.players.http_agent import HOPS_HEADER, MAX_ANSWER_BYTES, MAX_HOPS
from agents.serving.app import create_app
from agents.serving.edge import serve_options
from conftest import free_port, live_server
from sam_env.cards import card_str
from sam_env.game import Game

ROOT = Path(__file__).resolve().parent.parent
SLACK = 8.0  # a busy machine's allowance on top of a deadline
JSON = {"content-type": "application/json"}


def _act_body(seed: int = 3) -> str:
    g = Game.new("hoi_quan_bai", 4, seed=seed)
    return json.dumps({"format": "samloc/1", "rules": "hoi_quan_bai", "players": 4, "opener": g.opener,
                       "seat": g.to_act, "hand": [card_str(c) for c in g.hand(g.to_act)], "events": []})


def _loop_message(next_port: int, servers: int = MAX_HOPS + 1) -> str:
    return (f"not asking http://127.0.0.1:{next_port}/v1/act: the request has passed through {servers} bot"
            f" servers ({HOPS_HEADER}), more than {MAX_HOPS}: bots that ask each other in a loop?")


@contextlib.contextmanager
def _ring(size: int) -> Iterator[list[int]]:
    """``size`` live servers on loopback, each with the next one as its bot (the last the first's)."""
    ports = [free_port() for _ in range(size)]
    with contextlib.ExitStack() as stack:
        for i, port in enumerate(ports):
            app = create_app(f"http://127.0.0.1:{ports[(i + 1) % size]}", allow_client_seed=True)
            stack.enter_context(live_server(app, serve_options, port=port))
        yield ports


# ---- loops ---------------------------------------------------------------------------------------------
def test_two_servers_asking_each_other_end_with_508_at_once() -> None:
    """Two servers pointing at each other turned one request into a loop still running after 3.5
    minutes.  Now the fifth server on the way (A B A B A) refuses, and every one before it passes
    the 508 on; a request that arrives with hops already counted is refused sooner."""
    with _ring(2) as (a, b):
        r = httpx.post(f"http://127.0.0.1:{a}/v1/act", content=_act_body(), headers=JSON, timeout=60)
        assert (r.status_code, r.json()) == (508, {"error": _loop_message(b)})
        r = httpx.post(f"http://127.0.0.1:{a}/v1/act", content=_act_body(), timeout=60,
                       headers={**JSON, HOPS_HEADER: str(MAX_HOPS)})
        assert (r.status_code, r.json()) == (508, {"error": _loop_message(b)})
        r = httpx.post(f"http://127.0.0.1:{a}/v1/act", content=_act_body(), timeout=60,
                       headers={**JSON, HOPS_HEADER: str(MAX_HOPS - 1)})  # A, then B refuses to ask A
        assert (r.status_code, r.json()) == (508, {"error": _loop_message(a)})
        # the play page's bots ask the same way: a game whose first decisions are the bots' meets it too
        statuses = set()
        for seed in range(8):
            r = httpx.post(f"http://127.0.0.1:{a}/play/api/new", timeout=60,
                           json={"rules": "hoi_quan_bai", "players": 4, "seat": 0, "seed": seed})
            statuses.add(r.status_code)
            if r.status_code != 200:
                assert (r.status_code, r.json()) == (508, {"error": _loop_message(b)})
        assert 508 in statuses
        health = httpx.get(f"http://127.0.0.1:{b}/v1/health", timeout=60)
        assert health.json() == {"ok": True}


def test_three_servers_in_a_loop_end_with_508() -> None:
    """A → B → C → A → B: B is the fifth server on the way and does not ask C."""
    with _ring(3) as (a, b, c):
        for _ in range(3):  # and again: nothing is left over from the first
            r = httpx.post(f"http://127.0.0.1:{a}/v1/act", content=_act_body(), headers=JSON, timeout=60)
            assert (r.status_code, r.json()) == (508, {"error": _loop_message(c)})


@contextlib.contextmanager
def _serve(args: list[str], log: Path) -> Iterator[subprocess.Popen]:
    """``samloc serve ARGS`` until the block ends (then stopped, and it must exit 0)."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "samloc", "serve", *args], cwd=ROOT,
                                env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=out,
                                stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            proc.terminate()
            proc.wait(30)
    assert proc.returncode == 0, log.read_text()


def _wait_healthy(port: int, procs: list[subprocess.Popen], log: Path) -> None:
    t0 = time.time()
    while True:
        assert all(p.poll() is None for p in procs) and time.time() - t0 < 120, log.read_text()
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)


def test_a_loop_between_servers_with_two_workers_each_ends(tmp_path: Path) -> None:
    """``samloc serve --workers 2`` both ways: the count travels with the request, so it holds
    whichever process answers (each request on a new connection, so every worker takes part)."""
    a, b = free_port(), free_port()
    with _serve(["--agent", f"http://127.0.0.1:{b}", "--port", str(a), "--workers", "2"],
                tmp_path / "a.log") as pa, \
            _serve(["--agent", f"http://127.0.0.1:{a}", "--port", str(b), "--workers", "2"],
                   tmp_path / "b.log") as pb:
        _wait_healthy(a, [pa, pb], tmp_path / "a.log")
        _wait_healthy(b, [pa, pb], tmp_path / "b.log")
        for seed in range(6):
            port, other = (a, b) if seed % 2 == 0 else (b, a)
            r = httpx.post(f"http://127.0.0.1:{port}/v1/act", content=_act_body(seed),
                           headers=JSON, timeout=60)
            assert (r.status_code, r.json()) == (508, {"error": _loop_message(other)})


# ---- what an upstream answers: in time, and of bounded size --------------------------------------------
@contextlib.contextmanager
def _raw_upstream(answer: Callable[[socket.socket], None]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A one-connection loopback server that reads a request's head and body, then runs
    ``answer(conn)`` until it returns or the client closes; yields its URL and what happened
    (``closed``: the client closed the connection before the answer was all sent)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    seen: dict[str, Any] = {"closed": False}

    def run() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(60)
            data = b""
            while b"\r\n\r\n" not in data and len(data) < 1 << 20:
                data += conn.recv(65536) or b"\r\n\r\n"
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                          if k.strip().lower() == b"content-length")
            while len(body) < length:
                body += conn.recv(65536) or b"x" * length
            seen["headers"] = head.decode("latin-1")
            try:
                answer(conn)
            except OSError:  # the client closed the connection
                seen["closed"] = True

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}", seen
    finally:
        srv.close()
        thread.join(60)
        assert not thread.is_alive(), "the upstream was never released"


def _drip(head: bytes, body: bytes, every: float) -> Callable[[socket.socket], None]:
    """Send ``head`` and then ``body`` one byte every ``every`` seconds (a bounded loop)."""
    def answer(conn: socket.socket) -> None:
        for i in range(len(head) + len(body)):
            conn.sendall((head + body)[i:i + 1])
            time.sleep(every)
    return answer


def _ask(upstream: str) -> tuple[httpx.Response, float]:
    with TestClient(create_app(upstream), raise_server_exceptions=False) as client:
        t0 = time.monotonic()
        r = client.post("/v1/act", content=_act_body(), headers=JSON)
        return r, time.monotonic() - t0


@pytest.mark.parametrize("where", ["body", "head"])
def test_an_upstream_dripping_its_answer_is_cut_off_at_the_deadline(where: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An upstream that sent its head and then a body byte every 2 s held a request for 194 s: the
    5 s bound applied to each read.  Now it bounds the whole answer (here 1 s; the drip, a byte every
    0.3 s, would take minutes), head included, and the connection is closed."""
    monkeypatch.setattr(bots, "UPSTREAM_TIMEOUT_S", 1.0)
    body = b" " * 400 + b"{}"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    drip = _drip(b"", head + body, 0.3) if where == "head" else _drip(head, body, 0.3)
    with _raw_upstream(drip) as (url, seen):
        r, took = _ask(url)
    assert (r.status_code, r.json()) == (503, {"error": f"{url}/v1/act did not answer within 1 s"})
    assert took < 1 + SLACK and seen["closed"]
    assert f"{HOPS_HEADER}: 1\r\n" in seen["headers"] + "\r\n"


def test_an_oversized_chunked_answer_is_refused_without_reading_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2 GB chunked answer took the server from about 200 MB to 2.2 GB.  Now reading stops past
    the limit and the connection is closed: the upstream gets to send only what the sockets' buffers
    hold beyond it."""
    monkeypatch.setattr(bots, "UPSTREAM_TIMEOUT_S", 30.0)
    sent = [0]

    def flood(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                     b"chunked\r\n\r\n")
        chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
        for _ in range(2**31 // 0x10000):  # 2 GiB, unless the client closes first
            conn.sendall(chunk)
            sent[0] += 0x10000
    with _raw_upstream(flood) as (url, seen):
        r, _ = _ask(url)
    assert (r.status_code, r.json()) == (503, {"error": f"{url}/v1/act answered with more than"
                                                        f" {MAX_ANSWER_BYTES} bytes"})
    assert seen["closed"] and sent[0] < 64 << 20, sent[0]


def test_an_answer_declared_too_large_is_refused_before_its_body() -> None:
    def declare(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     b"2147483648\r\n\r\n")
        conn.recv(1)  # returns when the client goes (in a minute at most)
    with _raw_upstream(declare) as (url, _):
        r, _ = _ask(url)
    assert (r.status_code, r.json()) == (503, {"error": f"{url}/v1/act answered with a body of 2147483648"
                                                        f" bytes, more than {MAX_ANSWER_BYTES}"})


DEAD_PORT = free_port()  # nothing listens there


@settings(max_examples=60, deadline=None)
@given(hops=st.integers(0, 3 * MAX_HOPS))
def test_the_hop_count_decides_whether_an_upstream_is_asked(hops: int) -> None:
    """Nothing listens on the upstream's port: below the limit it is asked (and cannot be reached,
    503); at the limit it is not asked at all (508)."""
    with TestClient(create_app(f"http://127.0.0.1:{DEAD_PORT}"), raise_server_exceptions=False) as client:
        r = client.post("/v1/act", content=_act_body(hops), headers={**JSON, HOPS_HEADER: str(hops)})
    if hops >= MAX_HOPS:
        assert (r.status_code, r.json()) == (508, {"error": _loop_message(DEAD_PORT, hops + 1)})
    else:
        assert r.status_code == 503 and r.json()["error"].startswith(f"cannot reach http://127.0.0.1:{DEAD_PORT}")



# ---- bad specs fail at once ------------------------------------------------------------------------------
@pytest.mark.parametrize("command,spec,line", [
    ("serve", "http://", "samloc serve: the agent URL 'http://' has no host (expected http://host:port)"),
    ("serve", "https://:8000", "samloc serve: the agent URL 'https://:8000' has no host (expected http://host:port)"),
    ("serve", "http://h:99999", "samloc serve: bad agent URL 'http://h:99999': Port out of range 0-65535"),
    ("serve", "http://h:1/?x=1", "samloc serve: bad agent URL 'http://h:1/?x=1' (expected http://host:port[/path],"
                                 " without spaces, a query or a fragment, and a port from 1 to 65535)"),
    ("eval", "http://", "samloc eval: the agent URL 'http://' has no host (expected http://host:port)"),
    ("opponent", "http://", "samloc eval: the agent URL 'http://' has no host (expected http://host:port)"),
])
def test_an_agent_url_without_a_host_is_refused_at_once(command: str, spec: str, line: str) -> None:
    """``serve --agent http://`` started, then answered every decision with 503."""
    args = {"serve": ["serve", "--agent", spec, "--port", "0"],
            "eval": ["eval", "--agent", spec, "--opponents", "heuristic", "--deals", "2"],
            "opponent": ["eval", "--agent", "heuristic", "--opponents", spec, "--deals", "2"]}[command]
    r = subprocess.run([sys.executable, "-m", "samloc", *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert (r.returncode, r.stderr, r.stdout) == (2, line + "\n", "")


def test_search_settings_past_their_memory_are_refused_at_once(tmp_path: Path) -> None:
    """``worlds=100000000`` died in a MemoryError traceback; now it is one line, before anything loads."""
    spec = f"{tmp_path}+search:worlds=100000000"
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--agent", spec, "--port", "0"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("samloc serve: search worlds=100,000,000 with candidates=10 would hold 1,000,000,000"
                        " rollout positions at once (976.0 GiB), more than 1 GiB: at most worlds=102,456 with"
                        " candidates=10\n")
