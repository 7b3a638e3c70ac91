"""The served latency (``samloc bench --serve``): a bot server under 1 to 50 clients.

Starts ``samloc serve`` on a free loopback port per ``--workers`` count (or targets a running
loopback server), builds real requests from seeded random games (every seat's view at every
decision), warms it, then sends ``requests`` requests with each number of concurrent clients.  Each
phase reports requests per second, the client-side latency (p50/p90/p99/max: what a caller waits,
queueing included), the server-side decision time from the ``Server-Timing`` header, and every
non-200 answer or transport error.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from urllib.parse import urlparse

import httpx
import numpy as np

from sam_env.cards import card_str
from sam_env.game import Game
from sam_env.table import Table



def make_requests(table: Table, count: int, seed: int) -> list[dict]:
    """``count`` valid /v1/act bodies: the seat to act at every decision of seeded random games at
    ``table``."""
    rules, players = table.rules.to_record(), table.players  # as the protocol writes a table
    rng = random.Random(seed)
    out: list[dict] = []
    game_seed = seed
    while len(out) < count:
        g = Game.new(table.rules, players, seed=game_seed)
        game_seed += 1
        while not g.finished and len(out) < count:
            s = g.to_act
            assert s is not None
            out.append({"format": "samloc/1", "rules": rules, "players": players, "opener": g.opener,
                        "seat": s, "hand": [card_str(c) for c in g.hand(s) or []], "events": list(g.events)})
            legal = g.legal_actions()
            g.apply(2 if 2 in legal else rng.choice(legal))  # nobody declares Sâm: whole games
    rng.shuffle(out)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(agent: str | None, port: int, workers: int = 1,
                 extra: list[str] | None = None) -> subprocess.Popen:
    """``samloc serve`` on ``port`` (its output kept for the error where it ends early)."""
    cmd = [sys.executable, "-m", "samloc", "serve", "--port", str(port), "--host", "127.0.0.1",
           "--workers", str(workers), *(extra or [])]
    if agent:
        cmd += ["--agent", agent]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout: float = 300.0) -> None:
    """Until ``url`` answers its health (a searched bot warms before it listens); RuntimeError if
    the server ends first or never answers."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            out = (proc.stdout.read() if proc.stdout else "").strip().splitlines()
            raise RuntimeError(f"the server ended before it answered: {out[-1] if out else proc.returncode}")
        try:
            if httpx.get(url + "/v1/health", timeout=1.0).json() == {"ok": True}:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"no healthy server at {url} after {timeout:.0f} s")


async def run_phase(url: str, bodies: list[dict], clients: int) -> dict:
    """Send every body once, ``clients`` at a time; latencies in ms."""
    import aiohttp  # a light client for many at once; installed with ray, not by the serve extra

    lat: list[float] = []
    server: list[float] = []
    errors: dict[str, int] = {}
    queue = [json.dumps(b).encode() for b in reversed(bodies)]
    headers = {"content-type": "application/json"}
    conn = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(url, connector=conn, timeout=aiohttp.ClientTimeout(total=30)) as client:
        async def worker() -> None:
            while queue:
                body = queue.pop()
                t0 = time.perf_counter()
                try:
                    async with client.post("/v1/act", data=body, headers=headers) as r:
                        await r.read()
                        status, timing = r.status, r.headers.get("server-timing", "")
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                    continue
                lat.append((time.perf_counter() - t0) * 1000)
                if status != 200:
                    errors[str(status)] = errors.get(str(status), 0) + 1
                    continue
                if "dur=" in timing:
                    server.append(float(timing.split("dur=")[1].split(",")[0]))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0

    def pct(xs: list[float]) -> dict:
        if not xs:
            return {}
        a = np.array(xs)
        return {k: round(float(np.percentile(a, q)), 3) for k, q in
                (("p50", 50), ("p90", 90), ("p99", 99))} | {"max": round(float(a.max()), 3)}

    return {"clients": clients, "requests": len(bodies), "ok": len(server), "errors": errors,
            "seconds": round(wall, 3), "requests_per_s": round(len(bodies) / wall, 1),
            "latency_ms": pct(lat), "decision_ms": pct(server)}


def bench_serve(agent: str | None, workers: list[int], clients: list[int], requests: int, *,
                url: str | None = None, table: Table = Table.default(), warmup: int = 50, seed: int = 0,
                serve_args: list[str] | None = None) -> dict:
    """One phase per (workers, clients): a server started per ``workers`` count (``url``: that
    running loopback server instead), warmed with ``warmup`` requests, then ``requests`` requests
    at ``table`` with ``clients`` concurrent clients each.  ValueError for a server that is not loopback."""
    if url is not None and urlparse(url).hostname not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError("only loopback servers may be load tested")
    bodies = make_requests(table, requests + warmup, seed)
    phases = []
    for count in ([None] if url else workers):
        proc, base = None, (url or "").rstrip("/")
        if count is not None:
            port = free_port()
            base, proc = f"http://127.0.0.1:{port}", start_server(agent, port, count, serve_args)
        try:
            wait_healthy(base, proc)
            info = httpx.get(base + "/v1/info", timeout=30).json()
            if warmup:
                asyncio.run(run_phase(base, bodies[:warmup], 4))
            for n in clients:
                phase = asyncio.run(run_phase(base, bodies[warmup:], n))
                phases.append({"agent": info.get("name"), "workers": count,
                               "deadline_ms": info.get("deadline_ms"), **phase})
        finally:
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    return {"rules": table.rules.name, "players": table.players, "cpus": os.cpu_count(), "phases": phases,
            "load_average": os.getloadavg()}  # 1, 5, 15 minutes: how busy the machine was
