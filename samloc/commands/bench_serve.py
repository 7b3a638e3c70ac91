"""`samloc bench --serve`: the served latency of a bot, 1 to 50 clients, with and without
``--workers`` (:func:`agents.serving.loadtest.bench_serve`); exit 1 when any request failed."""

from __future__ import annotations

import argparse
import json

from agents.serving.bots import DEADLINE_MS
from agents.serving.loadtest import bench_serve
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.rules import DEFAULT_PRESET, RulesError

from .args import (Parser, agent_spec, command, deadline_ms, fail, non_negative, nonempty, players, positive,
                   positive_list, table)


def _parser() -> Parser:
    ap = Parser(prog="samloc bench",
                description="The served latency of a bot: req/s, p50, p99 and max per phase.")
    ap.add_argument("--serve", action="store_true", required=True,
                    help="start `samloc serve` on a free loopback port (per --workers count) and load it")
    ap.add_argument("--agent", metavar="SPEC", type=agent_spec, default=None,
                    help="the served bot (default: serve's own default, the shipped bots)")
    ap.add_argument("--url", default=None, help="load this running loopback server instead of starting one")
    ap.add_argument("--workers", type=positive_list, default=[1],
                    help="worker processes of the started server; a list runs one server each (default 1)")
    ap.add_argument("--clients", type=positive_list, default=[1, 4, 16, 50],
                    help="concurrent clients, one phase each (default 1,4,16,50)")
    ap.add_argument("--requests", type=positive, default=500, help="requests per phase (default 500)")
    ap.add_argument("--warmup", type=non_negative, default=50,
                    help="requests sent first, not measured (default 50)")
    ap.add_argument("--deadline-ms", type=deadline_ms, default=DEADLINE_MS,
                    help=f"the started server's --deadline-ms (default {DEADLINE_MS})")
    ap.add_argument("--rules", type=nonempty, default=DEFAULT_PRESET,
                    help=f"preset of the requests (default {DEFAULT_PRESET})")
    ap.add_argument("--players", type=players, default=DEFAULT_PLAYERS)
    ap.add_argument("--seed", type=non_negative, default=0, help="seed of the requests' games")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    return ap


@command(_parser)
def main(args: argparse.Namespace) -> int:
    try:
        res = bench_serve(args.agent, args.workers, args.clients, args.requests, url=args.url,
                          table=table(args.rules, args.players), warmup=args.warmup, seed=args.seed,
                          serve_args=["--deadline-ms", str(args.deadline_ms)])
    except (RulesError, ValueError, RuntimeError, ImportError) as exc:
        return fail("samloc bench", exc)
    if not args.json:
        for p in res["phases"]:
            lat = p["latency_ms"]
            print(f"{p['agent']}, workers {p['workers']}, {p['clients']:>2} clients:"
                  f" {p['requests_per_s']} req/s, p50 {lat.get('p50')} ms, p99 {lat.get('p99')} ms,"
                  f" max {lat.get('max')} ms, errors {p['errors'] or 0}")
    print(json.dumps(res))
    return 1 if any(p["errors"] for p in res["phases"]) else 0
