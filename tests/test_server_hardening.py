"""The server's hardening of issue 62: per-client quotas no header can forge, sessions of bounded
size read once per process, SIGTERM's cleanup, and upstream credentials never shown."""

from __future__ import annotations

import base64
import http.server
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

with warnings.catch_warnings():  # Starlette's notice about httpx, at import
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import agents.serving.sessions as sessions  # noqa: E402
from agents.players.http_agent import AgentError, HttpAgent  # noqa: E402
from agents.registry import parse_spec, shown_spec  # noqa: E402
from agents.serving.app import create_app  # noqa: E402
from agents.serving.edge import serve_options  # noqa: E402
from agents.serving.sessions import SESSIONS_PER_CLIENT, PlaySession, client_key  # noqa: E402
from conftest import free_port, live_server  # noqa: E402
from sam_env.game import Game  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SECRET = "s3cr3t-pw"


# ---- per-client quotas -----------------------------------------------------------------------------------
def _new(url: str, forwarded: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return httpx.post(url + "/play/api/new", json={"rules": "online", "players": 3, "seat": 0},
                      headers=headers, timeout=120)


def test_forwarded_headers_from_an_untrusted_peer_count_as_that_peer() -> None:
    """uvicorn trusts 127.0.0.1's X-Forwarded-For on its own: 520 forged values took every table.
    Without --trusted-proxy the peer is the client, so one source holds at most its share."""
    app = create_app("heuristic")
    with live_server(app, serve_options) as url:
        first = _new(url).json()["session"]
        for i in range(3 * SESSIONS_PER_CLIENT):
            assert _new(url, f"10.1.{i // 250}.{i % 250}").status_code == 200
        store = app.state.sessions
        assert store.count() == store.count("127.0.0.1") == SESSIONS_PER_CLIENT
        assert store.count("10.1.0.0") == 0
        assert httpx.get(f"{url}/play/api/{first}").status_code == 404  # its own oldest made room


def test_a_trusted_proxy_names_the_client_and_a_forged_prefix_does_not() -> None:
    """With --trusted-proxy the nearest untrusted address of X-Forwarded-For is the client: a value
    the client sent itself, ahead of the one the proxy appended, chooses nothing."""
    app = create_app("heuristic")

    def options(host: str, port: int) -> dict[str, Any]:
        return serve_options(host, port, trusted_proxies=["127.0.0.1/32"])
    with live_server(app, options) as url:
        for i in range(3):
            assert _new(url, f"203.0.113.{i}").status_code == 200
        for i in range(2 * SESSIONS_PER_CLIENT):
            assert _new(url, f"198.51.100.{i}, 203.0.113.9").status_code == 200
        store = app.state.sessions
        assert [store.count(f"203.0.113.{i}") for i in range(3)] == [1, 1, 1]
        assert store.count("203.0.113.9") == SESSIONS_PER_CLIENT and store.count("127.0.0.1") == 0
        assert store.count() == 3 + SESSIONS_PER_CLIENT


def test_serve_options_trust_no_forwarded_header_by_default() -> None:
    assert serve_options("127.0.0.1", 8000)["proxy_headers"] is False
    opts = serve_options("127.0.0.1", 8000, trusted_proxies=["10.0.0.0/8", "::1/128"])
    assert opts["proxy_headers"] is True and opts["forwarded_allow_ips"] == ["10.0.0.0/8", "::1/128"]


@pytest.mark.slow
@pytest.mark.parametrize("value,line", [
    ("*", "expected IP addresses or networks separated by commas, not '*'"),
    ("10.0.0.1,nginx", "expected IP addresses or networks separated by commas, not 'nginx'"),
])
def test_a_trusted_proxy_must_be_addresses(value: str, line: str) -> None:
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--agent", "heuristic", "--trusted-proxy",
                        value], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"samloc serve: argument --trusted-proxy: {line}\n"


def test_one_source_is_one_client_key() -> None:
    """An IPv6 source holds a whole /64: counted as one client, as an IPv4-mapped address is its IPv4."""
    assert client_key("2001:db8:1:2::1") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:10.0.0.7") == client_key("10.0.0.7") == "10.0.0.7"
    assert client_key("testclient") == "testclient"


def test_the_nginx_example_sets_the_forwarded_header_and_serve_trusts_it() -> None:
    doc = (ROOT / "docs" / "serving.md").read_text()
    nginx = doc.split("```nginx", 1)[1].split("```", 1)[0]
    locations = [line for line in nginx.splitlines() if line.strip().startswith("location")]
    assert locations and all("proxy_pass" in line for line in locations)
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in nginx
    assert nginx.index("proxy_set_header X-Forwarded-For") < nginx.index("location")  # for every location
    assert "samloc serve --trusted-proxy 127.0.0.1" in doc


# ---- session size, and sessions read once per process -----------------------------------------------------
def _play_out(c: TestClient, st: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    while st["result"] is None:
        m = next((x for x in st["legal"] if x["move"] == "no_sam"), None) or rng.choice(st["legal"])
        body = {"move": m["move"]} if m["move"] in ("pass", "no_sam") else {"cards": m["cards"]}
        r = c.post(f"/play/api/{st['session']}/move", json=body)
        assert r.status_code == 200, r.text
        st = r.json()
    return st


def test_a_sessions_history_rolls_over_and_its_totals_count_every_game(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """2,077 games made 228 KB answers: a session keeps the latest HISTORY_KEPT results (here 2) and
    running totals of all of them, so its answers stop growing."""
    monkeypatch.setattr(sessions, "HISTORY_KEPT", 2)
    rng, totals, sizes = random.Random(5), [0, 0, 0], []
    with TestClient(create_app("heuristic", allow_client_seed=True), raise_server_exceptions=False) as c:
        st = c.post("/play/api/new", json={"rules": "online", "players": 3, "seat": 1, "seed": 3}).json()
        for game_no in range(1, 6):
            st = _play_out(c, st, rng)
            totals = [t + x for t, x in zip(totals, st["result"]["scores"])]
            assert st["played"] == game_no and st["totals"] == totals
            assert [h["game"] for h in st["history"]] == list(range(max(1, game_no - 1), game_no + 1))
            stored = c.app.state.sessions.db.execute("SELECT state FROM sessions").fetchone()[0]
            sizes.append(len(stored) - len(json.dumps(json.loads(stored)["events"])))
            st = c.post(f"/play/api/{st['session']}/again").json()
        assert c.get(f"/play/api/{st['session']}").json()["played"] == 5
    assert max(sizes[2:]) - min(sizes[2:]) < 40  # what is kept besides the game in play: no growth


def test_a_session_is_not_read_again_by_the_process_that_holds_it(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request used to parse and replay the whole stored state.  A process now reads a session
    only when another changed it (two apps on one file stand for two worker processes)."""
    reads = []
    real = PlaySession.from_json.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(PlaySession, "from_json",
                        classmethod(lambda cls, *a, **k: reads.append(1) or real(cls, *a, **k)))
    db, rng = str(tmp_path / "sessions.db"), random.Random(2)
    with TestClient(create_app("heuristic", sessions=db), raise_server_exceptions=False) as a, \
            TestClient(create_app("heuristic", sessions=db), raise_server_exceptions=False) as b:
        st = a.post("/play/api/new", json={"rules": "hoi_quan_bai", "players": 4, "seat": 0}).json()
        sid = st["session"]
        for _ in range(4):
            assert a.get(f"/play/api/{sid}").json() == st
            st = _move(a, st, rng)
        assert reads == []
        st = _move(b, st, rng)      # b reads it once, then holds it
        assert b.get(f"/play/api/{sid}").json() == st and len(reads) == 1
        assert a.get(f"/play/api/{sid}").json() == st and len(reads) == 2  # a sees b's move


def _move(c: TestClient, st: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One move of the person (a new game when this one is over)."""
    if st["result"] is not None:
        return c.post(f"/play/api/{st['session']}/again").json()
    m = next((x for x in st["legal"] if x["move"] == "no_sam"), None) or rng.choice(st["legal"])
    body = {"move": m["move"]} if m["move"] in ("pass", "no_sam") else {"cards": m["cards"]}
    r = c.post(f"/play/api/{st['session']}/move", json=body)
    assert r.status_code == 200, r.text
    return r.json()


# ---- SIGTERM ---------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("sig,workers,status", [(signal.SIGTERM, 1, (0,)), (signal.SIGINT, 1, (130, 0)),
                                                (signal.SIGTERM, 2, (0,))])
def test_stopping_the_server_removes_its_session_file(tmp_path: Path, sig: int, workers: int,
                                                      status: tuple[int, ...]) -> None:
    """SIGTERM left samloc-play-*/sessions.db, with every session's deal seed, in the temporary folder.
    (SIGINT: 130, or 0 where the test runs in the background, which ignores SIGINT.)"""
    port, tmp = free_port(), tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "samloc", "serve", "--agent", "heuristic",
                             "--port", str(port), "--workers", str(workers)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, TMPDIR=str(tmp), OMP_NUM_THREADS="1"))
    try:
        t0 = time.time()
        while True:
            assert proc.poll() is None and time.time() - t0 < 120, proc.stdout.read() if proc.stdout else ""
            try:
                if _new(f"http://127.0.0.1:{port}").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert [p.name for p in tmp.glob("samloc-play-*/sessions.db")] == ["sessions.db"]
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in status, out
    assert list(tmp.iterdir()) == []


# ---- credentials -----------------------------------------------------------------------------------------
def test_shown_spec_hides_the_password() -> None:
    assert shown_spec("http://bob:hunter2@h:81/bot") == "http://bob:***@h:81/bot"
    assert shown_spec("https://TOKEN@h") == "https://***@h"
    assert shown_spec("http://h:81") == "http://h:81" and shown_spec("heuristic") == "heuristic"
    with pytest.raises(ValueError) as err:
        parse_spec(f"http://bob:{SECRET}@h:99999")
    assert SECRET not in str(err.value) and "http://bob:***@h:99999" in str(err.value)


@pytest.fixture()
def upstream() -> Iterator[str]:
    """A heuristic bot server on loopback."""
    with live_server(create_app("heuristic")) as url:
        yield url


def test_an_upstreams_credentials_are_never_shown(upstream: str) -> None:
    """/v1/info, the play page's API and errors showed http://user:password@... verbatim."""
    spec = upstream.replace("http://", f"http://bob:{SECRET}@")
    dead = f"http://bob:{SECRET}@127.0.0.1:{free_port()}"
    with TestClient(create_app([spec]), raise_server_exceptions=False) as c:
        info = c.get("/v1/info").text
        opts = c.get("/play/api/options").text
        st = c.post("/play/api/new", json={"rules": "hoi_quan_bai", "players": 4, "seat": 1})
    assert st.status_code == 200, st.text
    for text in (info, opts, st.text):
        assert SECRET not in text and "bob:***@127.0.0.1" in text
    with TestClient(create_app([dead]), raise_server_exceptions=False) as c:
        g = Game.new("hoi_quan_bai", 4, seed=1)
        from agents.players.http_agent import view_request
        r = c.post("/v1/act", json=view_request(g, g.to_act))
    assert r.status_code == 503 and SECRET not in r.text and re.match(r"cannot reach http://127\.0\.0\.1:\d+/v1/act",
                                                                       r.json()["error"])


def test_the_serve_command_does_not_print_the_password() -> None:
    port = free_port()
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--agent", f"http://bob:{SECRET}@127.0.0.1:{port}",
                        "--port", str(port)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and SECRET not in r.stderr + r.stdout
    assert r.stderr.startswith(f"samloc serve: --agent http://bob:***@127.0.0.1:{port} is this server itself")


def test_credentials_in_the_url_are_sent_as_basic_authentication() -> None:
    """What the operator wrote in the URL reaches the upstream (httpcore alone dropped it)."""
    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            seen.append(self.headers.get("Authorization"))
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"error": "no"}'
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        agent = HttpAgent(f"http://bob:{SECRET}@127.0.0.1:{server.server_port}", timeout=10)
        g = Game.new("hoi_quan_bai", 4, seed=1)
        with pytest.raises(AgentError) as err:
            agent.act(g, g.to_act)
    finally:
        server.shutdown()
    assert seen == ["Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode()]
    assert str(err.value) == f"http://127.0.0.1:{server.server_port}/v1/act answered 401: no"
    assert agent.name == f"http://bob:***@127.0.0.1:{server.server_port}"


def test_a_league_report_shows_no_upstream_password(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """league.json records the command that made it and each agent's spec: an upstream's password as ***."""
    from agents.evaluation.league import Entry
    from samloc.commands import league as league_cmd
    from sam_env.table import Table
    secret = "http://bob:hunter2@127.0.0.1:9"
    entries = [Entry("up", secret), Entry("random", "random")]
    monkeypatch.setattr(league_cmd, "_plan", lambda args: (Table.default(), entries, "random", []))
    monkeypatch.setattr(league_cmd, "rate_league", lambda *a, **k: ({"ratings": {}}, []))
    written: dict = {}
    monkeypatch.setattr(league_cmd, "write_report", lambda res, out: written.update(res))
    monkeypatch.setattr(league_cmd, "_print", lambda *a: None)
    assert league_cmd.main([secret, "random", "--deals", "2", "--out", str(tmp_path / "l")]) == 0
    text = json.dumps(written)
    assert "hunter2" not in text and "http://bob:***@127.0.0.1:9" in written["command"]
    assert [a["spec"] for a in written["agents"]] == ["http://bob:***@127.0.0.1:9", "random"]
