"""`samloc bench --agent SPEC`: an agent's match throughput against itself on duplicate deals
(:func:`agents.evaluation.bench.bench_agent`); every other `samloc bench` form is measured elsewhere."""

from __future__ import annotations

import json
import sys

from agents.evaluation.bench import bench_agent
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.rules import DEFAULT_PRESET, RulesError

from .args import Parser, agent_spec, non_negative, nonempty, parse, players, positive, table


def _parser() -> Parser:
    ap = Parser(prog="samloc bench",
                description="An agent's match throughput against itself (duplicate deals).")
    ap.add_argument("--agent", metavar="SPEC", required=True, type=agent_spec,
                    help="benchmark matches of this agent against itself (e.g. heuristic) over --deals"
                         " duplicate deals")
    ap.add_argument("--rules", type=nonempty, default=DEFAULT_PRESET,
                    help=f"preset name (default {DEFAULT_PRESET})")
    ap.add_argument("--players", type=players, default=DEFAULT_PLAYERS)
    ap.add_argument("--deals", "--games", dest="deals", type=positive, default=200_000,
                    help="duplicate deals played, each once per seat: deals x players games (default 200,000;"
                         " --games is its old name)")
    ap.add_argument("--seed", type=non_negative, default=0)
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    return ap


def main(argv: list[str]) -> int:
    args = parse(_parser().parse_args, argv)
    if isinstance(args, int):
        return args
    try:
        res = bench_agent(args.agent, table(args.rules, args.players), args.deals, args.seed)
    except (RulesError, ValueError) as exc:
        print(f"samloc bench: {exc}", file=sys.stderr)
        return 2
    if not args.json:
        print(f"{args.rules}, {args.players} players: " + ", ".join(f"{k} {v}" for k, v in res.items()))
    print(json.dumps(res))
    return 0
