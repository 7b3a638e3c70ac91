"""`samloc league`: every pair of agents on duplicate deals, one rating each on the lá scale
(:mod:`agents.evaluation.league`)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from agents.evaluation.evaluate import off_tables
from agents.evaluation.league import Entry, expand, rate_league, write_report
from agents.evaluation.matches import IllegalMoveError
from agents.registry import make_agent, shown_spec
from sam_env.atomic import check_folder
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.rules import DEFAULT_PRESET, RulesError
from sam_env.table import Table

from ..cli import unavailable
from .args import Parser, agent_spec, integer, non_negative, nonempty, parse, parse_tables, path


def _parser() -> Parser:
    ap = Parser(prog="samloc league",
                description="Every ordered pair of agents on the same duplicate deals "
                            "(one seat A, the others B), then one rating per agent on the lá scale: "
                            "score(A vs B) ≈ r_A − r_B.")
    ap.add_argument("agents", nargs="+", type=agent_spec, metavar="AGENT",
                    help="agent specs (as samloc eval's); a run folder stands for its last checkpoint")
    ap.add_argument("--all-checkpoints", action="store_true",
                    help="a run folder stands for every checkpoint it kept, oldest first (how its training"
                         " went: ratings.png draws rating against decisions trained)")
    ap.add_argument("--rules", type=nonempty, help=f"preset name (default {DEFAULT_PRESET})")
    ap.add_argument("--players", type=nonempty, help=f"player count (default {DEFAULT_PLAYERS})")
    ap.add_argument("--deals", type=integer(2), default=1000,
                    help="deals per ordered pair, at least 2: the intervals resample deals (default 1000)")
    ap.add_argument("--seed", type=non_negative, default=0, help="the deals' seed, and the bootstrap's")
    ap.add_argument("--pin", type=nonempty,
                    help="the agent rated 0 (default random if it plays, else the first agent)")
    ap.add_argument("--bootstrap", type=integer(100, 1_000_000), default=1000,
                    help="bootstrap resamples of the deals, 100 to 1,000,000 (default 1000)")
    ap.add_argument("--off-table", action="store_true",
                    help="allow a network at a table it was not trained for "
                         "(reported as out of distribution)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    ap.add_argument("--out", type=path, help="run folder (default runs/league/RULES_P__TIME)")
    return ap


def _plan(args: argparse.Namespace) -> tuple[Table, list[Entry], str, list[str]]:
    """The table, the agents, the one pinned at 0 and those out of their training distribution here;
    RulesError or ValueError naming what is wrong."""
    tables = parse_tables(None, args.rules, args.players) or [Table.default()]
    if len(tables) != 1:
        raise ValueError("a league plays one table: give one rule set and one player count")
    here = tables[0]
    entries = expand(args.agents, warn=lambda m: print(f"samloc league: {m}", file=sys.stderr),
                     all_checkpoints=args.all_checkpoints)
    names = [e.name for e in entries]
    pin = args.pin if args.pin is not None else ("random" if "random" in names else names[0])
    if pin not in names:
        raise ValueError(f"--pin {pin}: not in the league ({', '.join(names)})")
    off = []
    for e in entries:
        agent = make_agent(e.spec, seed=args.seed)
        own = agent.trained_tables
        agent.close()
        if off_tables(own, [here]):
            if not args.off_table:
                raise ValueError(f"{e.name} was trained for {', '.join(t.name for t in own or ())}, "
                                 f"not {here.name}; add --off-table to play it there "
                                 "(out of training distribution)")
            off.append(e.name)
    return here, entries, pin, off


def _print(res: dict[str, Any], out: Path, as_json: bool) -> None:
    if not as_json:
        rt = res["ratings"]
        for n in sorted((a["name"] for a in res["agents"]), key=lambda n: -rt[n]["rating"]):
            print(f"{rt[n]['rating']:+8.2f} [{rt[n]['ci95'][0]:+.2f}, {rt[n]['ci95'][1]:+.2f}]  {n}")
        for q in res["misfits"]:
            print(f"misfit: {q['a']} vs {q['b']}: matchup score {q['score']:+.2f} lá, r_A − r_B "
                  f"{q['predicted']:+.2f} (z {q['z']:+.1f})")
        print(f"report: {out / 'league.md'}")
    print(json.dumps(res, ensure_ascii=False))


def main(argv: list[str]) -> int:
    args = parse(_parser().parse_args, argv)
    if isinstance(args, int):
        return args
    missing = unavailable("league", "matplotlib", "the report's ratings.png")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    try:
        table, entries, pin, off = _plan(args)
        if args.out is not None:
            check_folder(args.out)  # UnsafeTarget (a ValueError) now, not after the games
    except (RulesError, ValueError) as exc:
        print(f"samloc league: {exc}", file=sys.stderr)
        return 2
    n_pairs = len(entries) * (len(entries) - 1)
    t0 = time.perf_counter()
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("deals"), TimeRemainingColumn(), console=Console(stderr=True),
                      transient=args.json) as prog:
            task = prog.add_task(f"{n_pairs} pairs", total=n_pairs * args.deals)
            fitted, evaluations = rate_league(
                entries, table, args.deals, args.seed, pin=pin, reps=args.bootstrap,
                progress=lambda done, what: prog.update(task, completed=done, description=what[-60:]))
    except (IllegalMoveError, RuntimeError, OSError, ValueError) as exc:
        print(f"samloc league: {exc}", file=sys.stderr)
        return 1
    res = {"command": shlex.join(["samloc", "league", *map(shown_spec, argv)]), "table": table.name,
           "rules": table.rules.name, "players": table.players, "deals": args.deals, "seed": args.seed,
           "agents": [{"name": e.name, "spec": shown_spec(e.spec), "run": e.run,
                       "decisions_trained": e.decisions_trained,
                       "out_of_distribution": e.name in off} for e in entries],
           **fitted, "seconds": round(time.perf_counter() - t0, 1)}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = (Path(args.out) if args.out
           else Path("runs") / "league" / f"{table.rules.name}_{table.players}__{stamp}")
    try:
        write_report(res | {"evaluations": evaluations}, out)
    except OSError as exc:
        print(f"samloc league: cannot write the report to {out}: {exc}", file=sys.stderr)
        return 1
    res["report_dir"] = str(out)
    _print(res, out, args.json)
    return 0
