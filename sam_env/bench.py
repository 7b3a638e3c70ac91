"""``samloc bench``: engine throughput on one core, uniformly random legal play.

Every seat answers ``no_sam``, then picks uniformly among its legal moves;
every move is checked for legality.  The last output line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .batch import play_random
from .rules import RuleSet, RulesError


def bench_engine(rules: str, players: int, games: int, seed: int, batch: int) -> dict:
    play_random(rules, players, games=min(games, 200), seed=seed + 1, batch=batch)  # compile / warm up
    t0 = time.perf_counter()
    out = play_random(rules, players, games=games, seed=seed, batch=batch)
    dt = time.perf_counter() - t0
    if out["illegal"]:
        raise RuntimeError(f"{out['illegal']} illegal moves were generated")
    return {"games": out["games"], "decisions": out["decisions"], "seconds": round(dt, 4),
            "decisions_per_s": round(out["decisions"] / dt), "games_per_s": round(out["games"] / dt)}


def bench_agent(spec: str, rules: str, players: int, deals: int, seed: int) -> dict:
    """Agent-only matches through the evaluation harness (duplicate deals, batched engine)."""
    from agents.evaluate import evaluate
    evaluate(spec, spec, rules, players, 20, seed=seed + 1)  # compile / warm up
    t0, c0 = time.perf_counter(), time.process_time()
    r = evaluate(spec, spec, rules, players, deals, seed=seed)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"agent": spec, "games": r["games"], "seconds": round(dt, 4), "games_per_s": round(r["games"] / dt),
            "games_per_cpu_s": round(r["games"] / cpu)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="samloc bench", description=__doc__)
    ap.add_argument("--rules", default="hoi_quan_bai", help="preset name (default hoi_quan_bai)")
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--games", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1024, help="games stepped together")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--env", action="store_true", help="benchmark the self-play environment batch instead")
    ap.add_argument("--num-envs", type=int, default=1024,
                    help="with --env: games in the self-play batch; 1 benchmarks one SamLoc-v0 env")
    ap.add_argument("--steps", type=int, default=None,
                    help="with --env: agent steps to take (default 2000000; 200000 with --num-envs 1)")
    ap.add_argument("--agent", metavar="SPEC",
                    help="benchmark matches of this agent against itself (e.g. heuristic) over --games deals")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        RuleSet.parse(args.rules).check_players(args.players)
        if args.games < 1 or args.batch < 1:
            raise RulesError("--games and --batch must be positive")
        if args.agent:
            res = bench_agent(args.agent, args.rules, args.players, args.games, args.seed)
        elif args.env:
            from .vector import bench_env
            steps = args.steps if args.steps is not None else (200_000 if args.num_envs == 1 else 2_000_000)
            res = bench_env(args.rules, args.players, args.num_envs, steps, args.seed)
        else:
            res = bench_engine(args.rules, args.players, args.games, args.seed, args.batch)
    except (RulesError, ValueError) as exc:
        print(f"samloc bench: {exc}", file=sys.stderr)
        return 2
    if not args.json:
        print(f"{args.rules}, {args.players} players: " + ", ".join(f"{k} {v}" for k, v in res.items()))
    print(json.dumps(res))
    return 0
