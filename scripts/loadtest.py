#!/usr/bin/env python
"""Load test of the bot server (PROTOCOL §4): latency per decision and concurrent clients.

Starts ``samloc serve`` on a free loopback port (or targets ``--url``), builds
real requests from seeded random games (every seat's view at every
decision), then runs two bounded phases:

1. ``sequential``: one client, one request at a time: the latency of a decision;
2. ``concurrent``: ``--clients`` clients (default 50) sending together.

For each phase it reports the client-side latency (p50/p90/p99/max), the
server-side decision time from the ``Server-Timing`` header (what the bot
itself spends: view rebuild + policy + answer), requests per second, and every
non-200 answer or transport error.  Only loopback addresses are allowed.

    .venv/bin/python scripts/loadtest.py --agent heuristic --requests 2000 --clients 50
    .venv/bin/python scripts/loadtest.py --agent heuristic --workers 2
    .venv/bin/python scripts/loadtest.py --url http://127.0.0.1:8000 --json

Exit status 1 if any request failed or the p99 decision time is over --p99-ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from sam_env.cards import card_str
from sam_env.game import Game
from sam_env.rules import DEFAULT_PRESET

ROOT = Path(__file__).resolve().parent.parent


def make_requests(rules: str, players: int, count: int, seed: int) -> list[dict]:
    """``count`` valid /v1/act bodies: the seat to act at every decision of seeded random games."""
    rng = random.Random(seed)
    out: list[dict] = []
    game_seed = seed
    while len(out) < count:
        g = Game.new(rules, players, seed=game_seed)
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


def start_server(agent: str | None, port: int, workers: int = 1) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "samloc", "serve", "--port", str(port), "--host", "127.0.0.1",
           "--workers", str(workers)]
    if agent:
        cmd += ["--agent", agent]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_healthy(url: str, proc: subprocess.Popen | None, timeout: float = 120.0) -> None:
    import httpx  # the serve extra

    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the server exited early:\n{proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(url + "/v1/health", timeout=1.0).json() == {"ok": True}:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    raise SystemExit(f"no healthy server at {url} after {timeout:.0f} s")


async def run_phase(url: str, bodies: list[dict], clients: int) -> dict:
    """Send every body once, ``clients`` at a time; latencies in ms (aiohttp: a light client)."""
    import aiohttp

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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=None, help="a running server (loopback only); default: start one")
    p.add_argument("--agent", default="heuristic", help="agent spec for the started server (default heuristic)")
    p.add_argument("--workers", type=int, default=1,
                   help="worker processes of the started server (default 1)")
    p.add_argument("--rules", default=DEFAULT_PRESET)
    p.add_argument("--players", type=int, default=4)
    p.add_argument("--requests", type=int, default=2000, help="requests per phase (at most 20000)")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--p99-ms", type=float, default=10.0, help="the bar for the p99 decision time")
    p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = p.parse_args(argv)
    if not 1 <= args.requests <= 20000 or not 1 <= args.clients <= 500 or not 1 <= args.workers <= 16:
        print("loadtest: --requests must be 1..20000, --clients 1..500 and --workers 1..16", file=sys.stderr)
        return 2
    proc = None
    if args.url:
        url = args.url.rstrip("/")
        if urlparse(url).hostname not in ("127.0.0.1", "localhost", "::1"):
            print("loadtest: only loopback servers may be load tested", file=sys.stderr)
            return 2
    else:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = start_server(args.agent, port, args.workers)
    try:
        wait_healthy(url, proc)
        import httpx  # the serve extra
        info = httpx.get(url + "/v1/info").json()
        bodies = make_requests(args.rules, args.players, args.requests + args.warmup, args.seed)
        asyncio.run(run_phase(url, bodies[:args.warmup], 4))
        work = bodies[args.warmup:]
        report = {"agent": info.get("name"), "url": url, "rules": args.rules, "players": args.players,
                  "cpus": os.cpu_count(), "workers": args.workers if proc is not None else None,
                  "sequential": asyncio.run(run_phase(url, work, 1)),
                  "concurrent": asyncio.run(run_phase(url, work, args.clients)),
                  "load_average": os.getloadavg()}  # 1, 5, 15 minutes: how busy the machine was
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    failed = sum(sum(report[k]["errors"].values()) for k in ("sequential", "concurrent"))
    worst = max(report[k]["decision_ms"].get("p99", 0.0) for k in ("sequential", "concurrent"))
    report["pass"] = failed == 0 and worst <= args.p99_ms
    if not args.json:
        for k in ("sequential", "concurrent"):
            r = report[k]
            print(f"{k:>10}: {r['clients']:>3} clients, {r['requests']} requests, {r['requests_per_s']}/s,"
                  f" errors {r['errors'] or 0}; latency ms {r['latency_ms']}; decision ms {r['decision_ms']}")
        print(f"agent {report['agent']}: {'PASS' if report['pass'] else 'FAIL'}"
              f" (p99 decision {worst} ms, bar {args.p99_ms} ms; {failed} failed requests)")
    print(json.dumps(report) if args.json else "", end="\n" if args.json else "")
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
