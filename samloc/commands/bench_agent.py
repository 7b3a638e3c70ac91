"""`samloc bench --agent SPEC`: an agent's match throughput against itself on duplicate deals
(:func:`agents.bench.bench_agent`); every other `samloc bench` form is measured elsewhere."""

from __future__ import annotations

import json
import sys

from agents.bench import bench_agent
from sam_env.rules import DEFAULT_PRESET, RuleSet, RulesError

from .args import Parser, parse


def _parser() -> Parser:
    ap = Parser(prog="samloc bench", description="An agent's match throughput against itself (duplicate deals).")
    ap.add_argument("--agent", metavar="SPEC", required=True,
                    help="benchmark matches of this agent against itself (e.g. heuristic) over --games deals")
    ap.add_argument("--rules", default=DEFAULT_PRESET, help=f"preset name (default {DEFAULT_PRESET})")
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--games", type=int, default=200_000, help="deals played (each once per seat)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    return ap


def main(argv: list[str]) -> int:
    args = parse(_parser().parse_args, argv)
    if isinstance(args, int):
        return args
    try:
        rules = RuleSet.parse(args.rules)
        rules.check_players(args.players)
        if args.games < 1:
            raise RulesError("--games must be positive")
        res = bench_agent(args.agent, rules, args.players, args.games, args.seed)
    except (RulesError, ValueError) as exc:
        print(f"samloc bench: {exc}", file=sys.stderr)
        return 2
    if not args.json:
        print(f"{args.rules}, {args.players} players: " + ", ".join(f"{k} {v}" for k, v in res.items()))
    print(json.dumps(res))
    return 0
