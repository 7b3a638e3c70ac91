"""``samloc bench``: engine and environment throughput on one core, uniformly random legal play.

Every seat answers ``no_sam``, then picks uniformly among its legal moves;
every move is checked for legality.  The last output line is JSON.
The agents', the server's and the trainer's benches (``--agent``, ``--serve``; ``--learner``,
``--rollout``, ``--search``, ``--to-strength``) are their own command modules.
"""

from __future__ import annotations

import argparse
import importlib
import json

from sam_env.bench import bench_engine, bench_env
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.machine import measured
from sam_env.rules import DEFAULT_PRESET, RulesError

from .args import Parser, command, fail, non_negative, nonempty, players, positive, table

#: ``samloc bench`` options measured by the layer above the engine's (this module takes the rest).
BENCH_BY_OPTION = {"--learner": "samloc.commands.bench_training",
                   "--rollout": "samloc.commands.bench_training",
                   "--search": "samloc.commands.bench_training",
                   "--agent": "samloc.commands.bench_agent",
                   "--to-strength": "samloc.commands.bench_strength",
                   "--serve": "samloc.commands.bench_serve"}


OTHER_BENCHES = """other measurements, each with its own --help (e.g. samloc bench --serve --help):
  --agent SPEC             an agent's match throughput against itself over --deals duplicate deals
  --serve [--agent SPEC]   the served latency of a bot (samloc serve), 1 to 50 clients
  --learner | --rollout | --search   the trainer's learner, one rollout worker, one search worker
  --to-strength            training minutes to a strength against the heuristic (the benchmark)"""


def module_for(argv: list[str]) -> str:
    """The module that measures what ``argv`` asks for: ``--serve`` (whose ``--agent`` is the served
    bot), else the first option that names a layer."""
    if "--serve" in argv:
        return BENCH_BY_OPTION["--serve"]
    for a in argv:
        if a.split("=", 1)[0] in BENCH_BY_OPTION:
            return BENCH_BY_OPTION[a.split("=", 1)[0]]
    return __name__


def parser() -> Parser:
    ap = Parser(prog="samloc bench", description=__doc__.replace("``", ""),
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=OTHER_BENCHES)
    ap.add_argument("--rules", type=nonempty, default=DEFAULT_PRESET,
                    help=f"preset name (default {DEFAULT_PRESET})")
    ap.add_argument("--players", type=players, default=DEFAULT_PLAYERS)
    ap.add_argument("--games", type=positive, default=200_000)
    ap.add_argument("--batch", type=positive, default=1024, help="games stepped together")
    ap.add_argument("--seed", type=non_negative, default=0)
    ap.add_argument("--env", action="store_true", help="benchmark the self-play environment batch instead")
    ap.add_argument("--num-envs", type=positive, default=1024,
                    help="with --env: games in the self-play batch; 1 benchmarks one SamLoc-v0 env")
    ap.add_argument("--steps", type=positive, default=None,
                    help="with --env: agent steps to take (default 2000000; 200000 with --num-envs 1)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    return ap


def main(argv: list[str]) -> int:
    other = module_for(argv)
    return int(importlib.import_module(other).main(argv) or 0) if other != __name__ else engine(argv)


@command(parser)
def engine(args: argparse.Namespace) -> int:
    """The engine's and the environments' throughput."""
    try:
        t = table(args.rules, args.players)
        if args.env:
            steps = args.steps if args.steps is not None else (200_000 if args.num_envs == 1 else 2_000_000)
            res = measured(lambda: bench_env(t.rules, t.players, args.num_envs, steps, args.seed))
        else:
            res = measured(lambda: bench_engine(t.rules, t.players, args.games, args.seed, args.batch))
    except (RulesError, ValueError) as exc:
        return fail("samloc bench", exc)
    if not args.json:
        print(f"{args.rules}, {args.players} players: "
              + ", ".join(f"{k} {v}" for k, v in res.items() if k != "machine"))
    print(json.dumps(res))
    return 0
