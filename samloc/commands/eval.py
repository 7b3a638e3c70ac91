"""`samloc eval`: duplicate-deal evaluation of an agent against opponents
(:mod:`agents.evaluation.evaluate`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from agents.base import Agent
from agents.evaluation.eval_chunks import CHUNKS, not_resumable
from agents.evaluation.eval_report import write_report
from agents.evaluation.evaluate import evaluate, evaluate_tables, off_tables, safe_name
from agents.evaluation.matches import IllegalMoveError
from agents.registry import make_agent, shown_spec
from sam_env.atomic import check_folder, check_target
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.rules import DEFAULT_PRESET, RulesError
from sam_env.table import Table

from ..cli import unavailable
from .args import Parser, agent_spec, non_negative, nonempty, parse, parse_tables, path, positive

LINE_EVERY_S = 30.0  # a progress line this often when stderr is not a terminal


def _parser() -> Parser:
    ap = Parser(prog="samloc eval",
                description="Duplicate-deal evaluation: each seeded deal is played with the agent in every "
                            "seat and the opponents in the others, so the cards' luck cancels.")
    ap.add_argument("--agent", type=agent_spec, default="heuristic",
                    help="agent spec (default heuristic): random, "
                    "heuristic[:variant], a checkpoint directory, a .onnx file, http://host:port")
    ap.add_argument("--opponents", type=agent_spec, default="random",
                    help="spec of the other seats (default random)")
    ap.add_argument("--tables", type=nonempty,
                    help="RULES/PLAYERS,... or all (every preset at every allowed player count)")
    ap.add_argument("--rules", type=nonempty,
                    help="preset name(s), comma-separated (default: the agent's own tables if it "
                    f"is a trained network, else {DEFAULT_PRESET})")
    ap.add_argument("--players", type=nonempty,
                    help="player count(s), comma-separated (default: as --rules, else "
                    f"{DEFAULT_PLAYERS})")
    ap.add_argument("--off-table", action="store_true",
                    help="allow tables the agent's network was not trained for"
                    " (reported as out of distribution)")
    ap.add_argument("--deals", type=positive, default=1000, help="deals per table (default 1000)")
    ap.add_argument("--seed", type=non_negative, default=0)
    ap.add_argument("--json", action="store_true", help="end with the result as one JSON line")
    ap.add_argument("--out", type=path, help="run folder for result.json, report.md and scores.png "
                    "(default runs/eval/AGENT_vs_OPP__TIME)")
    ap.add_argument("--save-games", type=path, metavar="FILE.jsonl",
                    help="write every game as samloc/1 JSON Lines")
    ap.add_argument("--workers", type=positive, default=1,
                    help="processes that play the chunks of 512 deals side by side (default 1; at most one"
                    " per core): the same result, sooner.  Replayable agents only")
    ap.add_argument("--resume", action="store_true",
                    help="continue an interrupted run: the same command with the same --out takes the chunks"
                    " of 512 deals it finished (kept in OUT/chunks until the run completes)")
    return ap


@dataclass
class _Plan:
    """What the command will run, its arguments checked."""
    agent: Agent
    tables: list[Table]
    off: list[str]          # the tables out of the agent's training distribution
    out: Path
    store: Path | None      # where finished chunks are kept, None: the run cannot be resumed


def _plan(args: argparse.Namespace) -> _Plan:
    """The run ``args`` ask for; RulesError or ValueError naming what is wrong."""
    tables = parse_tables(args.tables, args.rules, args.players)
    agent = make_agent(args.agent, seed=args.seed)
    opponents = make_agent(args.opponents)
    opponents.close()
    why = not_resumable((agent, opponents), None) if args.workers > 1 else None
    if why is not None:
        raise ValueError(f"--workers plays the chunks apart, which this run cannot: {why}")
    if args.resume and not args.out:
        raise ValueError("--resume continues the run in --out: give the --out folder of the interrupted run")
    if args.save_games is not None:
        check_target(args.save_games)  # UnsafeTarget (a ValueError) now, not after the games
    if args.out is not None:
        check_folder(args.out)
    own = agent.trained_tables
    if tables is None:
        tables = list(own) if own else [Table.default()]
        if own and not args.json:
            print(f"tables: the ones {args.agent} was trained for: "
                  + ", ".join(t.name for t in tables), file=sys.stderr)
    off = [t.name for t in off_tables(own, tables)]
    if off and not args.off_table:
        raise ValueError(f"{args.agent} was trained for {', '.join(t.name for t in own or ())}, not "
                         f"{', '.join(off)}; add --off-table to evaluate it there "
                         "(out of training distribution)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = (Path(args.out) if args.out
           else Path("runs") / "eval" / f"{safe_name(agent.name)}_vs_{safe_name(opponents.name)}__{stamp}")
    store = _chunk_folder(out, agent, opponents, args.resume, args.save_games)
    if args.resume and store is not None and not store.exists():
        print(f"samloc eval: {out} holds no interrupted run; starting at the first deal", file=sys.stderr)
    return _Plan(agent, tables, off, out, store)


def _chunk_folder(out: Path, agent: Agent, opponents: Agent, resume: bool,
                  save_games: str | None) -> Path | None:
    """Where the run keeps its finished chunks (``OUT/chunks``), or None when it cannot be resumed; an
    interrupted run's chunks are taken only with ``--resume`` (ValueError otherwise, and for a
    ``--resume`` that cannot be)."""
    folder = out / CHUNKS
    why = not_resumable((agent, opponents), save_games)
    if why is not None:
        if resume:
            raise ValueError(f"--resume cannot continue this run: {why}")
        return None
    if folder.exists() and not resume:
        raise ValueError(f"{out} holds an interrupted evaluation ({folder}): add --resume to continue it,"
                         " or choose another --out")
    return folder


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _announce(args: argparse.Namespace, plan: _Plan) -> None:
    """Before the run: how many games it plays, and roughly how long that takes, from one deal of the
    first table timed (a fresh agent, so the run plays as it would have without it) after one played to
    warm up: the first compiles the engine's kernels on a cold cache, which the run does not do again."""
    games = args.deals * sum(t.players for t in plan.tables)
    first = plan.tables[0]
    warm, one = (evaluate(args.agent, args.opponents, first, deals=1, seed=args.seed)
                 for _ in range(2))  # the first compiles and loads; the second is what a deal costs
    per_game = one["seconds"] / one["games"]
    print(f"samloc eval: {len(plan.tables)} table{'s' * (len(plan.tables) > 1)} x {args.deals} deals, each"
          f" deal in every seat: {games} games; roughly {_duration(games * per_game / args.workers)}"
          f" (one deal of {first.name}: {one['seconds']:.2f} s for {one['games']} games"
          + (f"; the first, compiling, {warm['seconds']:.0f} s" if warm["seconds"] > 1 + 3 * one["seconds"]
             else "") + ")", file=sys.stderr, flush=True)


class _Lines:
    """Progress as plain lines on stderr, one every :data:`LINE_EVERY_S` and one per table finished:
    for a log that is not a terminal, where rich's bars are drawn only once, at the end."""

    def __init__(self, tables: list[str]):
        self.tables, self.t0 = tables, time.monotonic()
        self.last = self.t0

    def update(self, name: str, done: float, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < LINE_EVERY_S:
            return
        self.last = now
        i = self.tables.index(name)
        part = (i + done / total) / len(self.tables)
        left = f", about {_duration((now - self.t0) * (1 - part) / part)} left" if 0 < part < 1 else ""
        print(f"samloc eval: {name} {int(done)}/{total} deals (table {i + 1} of {len(self.tables)});"
              f" {_duration(now - self.t0)} so far{left}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace, plan: _Plan) -> dict[str, Any]:
    """The evaluation, with a progress bar per table on a terminal, else periodic lines (:class:`_Lines`)."""
    names = [t.name for t in plan.tables]
    with contextlib.ExitStack() as stack:
        if sys.stderr.isatty():
            prog = stack.enter_context(Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("deals"), TimeRemainingColumn(), console=Console(stderr=True),
                transient=args.json))
            tasks = {name: prog.add_task(name, total=args.deals) for name in names}
            progress = lambda k, d, t: prog.update(tasks[k], completed=d)  # noqa: E731
        else:
            progress = _Lines(names).update
        return evaluate_tables(args.agent if args.workers > 1 else plan.agent, args.opponents, plan.tables,
                               args.deals, args.seed, save_games=args.save_games, progress=progress,
                               store=plan.store, workers=args.workers, agent_spec=args.agent)


def _print(res: dict[str, Any], out: Path, as_json: bool) -> None:
    if not as_json:
        for name, r in res["by_table"].items():
            print(f"{name}, {r['deals']} deals ({r['games']} games): "
                  f"{res['agent']} vs {res['opponents']}: mean {r['mean_score']:+.3f} lá "
                  f"[{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}], win rate {r['win_rate']:.3f} "
                  f"(equal play {r['equal_play_win_rate']:.3f}), Sâm {r['sam_declared']} "
                  f"({r['sam_success_rate']:.0%} success), {r['games_per_s']} games/s"
                  + (f" in each of {r['workers']} processes ({r['wall_seconds']:.0f} s)" if "workers" in r
                     else "")
                  + ("  [out of training distribution]" if r["out_of_distribution"] else ""))
        print(f"report: {out / 'report.md'}")
    print(json.dumps({k: v for k, v in res.items() if k not in ("by_table", "score_hist")} |
                     {"by_table": {k: {kk: vv for kk, vv in v.items() if kk != "score_hist"}
                                   for k, v in res["by_table"].items()}}, ensure_ascii=False))


def main(argv: list[str]) -> int:
    args = parse(_parser().parse_args, argv)
    if isinstance(args, int):
        return args
    missing = unavailable("eval", "matplotlib", "the report's scores.png")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    try:
        plan = _plan(args)
    except (RulesError, ValueError) as exc:
        print(f"samloc eval: {exc}", file=sys.stderr)
        return 2
    try:
        _announce(args, plan)
        res = _run(args, plan)
    except (IllegalMoveError, RuntimeError, OSError, ValueError) as exc:
        print(f"samloc eval: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        kept = (f"; the finished chunks are kept in {plan.store}: the same command with --resume continues it"
                if plan.store is not None and plan.store.exists() else "")
        print(f"samloc eval: interrupted{kept}", file=sys.stderr)
        return 130
    for name, r in res["by_table"].items():
        r["out_of_distribution"] = name in plan.off
    res["out_of_distribution"] = plan.off
    # what made the report, to make it again (an upstream's password shown as ***)
    res["command"] = shlex.join(["samloc", "eval", *map(shown_spec, argv)])
    try:
        write_report(res, plan.out)
    except OSError as exc:
        print(f"samloc eval: cannot write the report to {plan.out}: {exc}", file=sys.stderr)
        return 1
    if plan.store is not None:
        shutil.rmtree(plan.store, ignore_errors=True)  # the report holds it all now
    res["report_dir"] = str(plan.out)
    _print(res, plan.out, args.json)
    return 0
