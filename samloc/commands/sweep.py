"""``samloc sweep``: the command line of :mod:`training.tools.sweep`, whose docstring is its ``--help``.

    samloc sweep --config quick --grid ppo.lr=1e-4,3e-4 [--grid KEY=V,...] [--random KEY=LO:HI --samples N]
                 --seeds 0,1 (--minutes M [--asha] | --decisions N) --deals D --out DIR [key=value ...]
    samloc sweep --resume DIR [--workers N] [--ray-address HOST:PORT]

Exit 2 on a bad command line or config (checked for every trial before anything trains), 1 when no trial
trained, 130 on Ctrl-C (the unfinished trials are marked in DIR/sweep.json; --resume DIR goes on).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

from training.tools import sweep
from training.config import ConfigError
from training.tools.sweep import SweepPlan, parse_grid, parse_random, read_plan, run_sweep
from training.tools.sweep_report import SETTINGS_HEAD, TRIALS_HEAD, settings_rows, trial_rows

from .args import (Parser, count_arg, fail, minutes_arg, non_negative, nonempty, parse, path, positive,
                   seed_list)
from .bench_strength import add_scoring_args, trained


def _typed(parse_one: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a library parser: its ConfigError is the one-line usage error."""
    def convert(text: str) -> Any:
        try:
            return parse_one(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = Parser(prog="samloc sweep", description=__doc__ + "\n" + (sweep.__doc__ or ""),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=path, help="training config, a name or a YAML file")
    ap.add_argument("--grid", type=_typed(parse_grid), action="append", default=[], metavar="KEY=V1,V2,...",
                    help="a config key and its values, each a trial (repeat: their product)")
    ap.add_argument("--random", type=_typed(parse_random), action="append", default=[],
                    metavar="KEY=LO:HI[:log]",
                    help="a config key drawn uniformly (log: log-uniformly) per sample")
    ap.add_argument("--samples", type=positive, default=1,
                    help="random draws, each crossed with the grid (default 1)")
    ap.add_argument("--sample-seed", type=non_negative, default=0,
                    help="seed of the random draws (default 0)")
    ap.add_argument("--seeds", type=seed_list, default=[0], metavar="S,S,...",
                    help="training seeds, each setting trained with each (default 0)")
    budget = ap.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=minutes_arg,
                        help="training wall time per trial, Ray's start included")
    budget.add_argument("--decisions", type=count_arg, help="decisions trained per trial")
    ap.add_argument("--asha", action="store_true", help="with --minutes: Ray Tune's ASHA stops the trailing"
                                                        " trials at each rung (the better half goes on)")
    ap.add_argument("--every-minutes", type=minutes_arg, default=None,
                    help="with --asha: an evaluation against the heuristic (eval.deals deals) and a"
                         " checkpoint every this many minutes; the first rung (default minutes/4)")
    add_scoring_args(ap, "trial")
    ap.add_argument("--workers", type=positive, default=1, help="trials scored side by side, after training")
    ap.add_argument("--ray-address", type=nonempty, metavar="HOST:PORT",
                    help="run the trials on this Ray cluster")
    ap.add_argument("--out", type=path, help="the sweep's folder, new or empty")
    ap.add_argument("--resume", type=path, metavar="DIR",
                    help="continue the interrupted sweep in DIR (Ray Tune's Tuner.restore): its own plan,"
                         " the trials it finished kept")
    ap.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for every trial")
    return ap.parse_intermixed_args(argv)


def _print_table(doc: dict[str, Any]) -> None:
    for title, head, rows in ((f"samloc sweep: {len(doc['settings'])} settings vs {doc['opponent']},"
                               f" {doc['deals']} deals", SETTINGS_HEAD, settings_rows(doc)),
                              (f"{len(doc['trials'])} trials", TRIALS_HEAD, trial_rows(doc))):
        table = Table(title=title)
        for col in head:
            table.add_column(col, justify="right" if col in ("rank", "seeds", "minutes", "decisions trained")
                             else "left")
        for row in rows:
            table.add_row(*row)
        Console(width=160).print(table)


def _plan(args: argparse.Namespace, argv: list[str]) -> tuple[SweepPlan, bool] | str:
    """The sweep the command line asks for (and whether few deals are allowed), or why it cannot be."""
    if args.resume:
        own = (("--config", args.config), ("--grid", args.grid), ("--random", args.random),
               ("--minutes", args.minutes), ("--decisions", args.decisions), ("--asha", args.asha),
               ("--out", args.out), ("key=value", args.overrides))
        given = [flag for flag, v in own if v]
        if given:
            return f"--resume takes the sweep's own plan (DIR/sweep_plan.json): give no {given[0]}"
        try:
            workers = args.workers if any(a.startswith("--workers") for a in argv) else None
            return read_plan(Path(args.resume), workers)
        except ConfigError as exc:
            return str(exc)
    missing = [f for f, v in (("--config", args.config), ("--out", args.out)) if not v]
    if missing or not (args.minutes or args.decisions):
        return f"give {missing[0] if missing else '--minutes M or --decisions N'} (or --resume DIR)"
    if args.every_minutes is not None and not args.asha:
        return "--every-minutes sets --asha's evaluations: give --asha too"
    return SweepPlan(args.config, args.overrides, args.grid, args.random, args.samples, args.seeds,
                     Path(args.out), args.minutes or 0.0, args.decisions or 0, args.deals, args.eval_seed,
                     args.asha, args.every_minutes or 0.0, args.sample_seed, args.workers, args.ray_address,
                     "samloc sweep " + " ".join(shlex.quote(a) for a in argv)), args.allow_few_deals


def main(argv: list[str]) -> int:
    args = parse(_parse, argv)
    if isinstance(args, int):
        return args
    got = _plan(args, argv)
    if isinstance(got, str):
        return fail("samloc sweep", got)
    plan, few = got
    if args.resume and args.ray_address:
        plan.ray_address = args.ray_address
    doc = trained("samloc sweep", lambda: run_sweep(plan, lambda line: print(line, flush=True), few,
                                                    resuming=bool(args.resume)),
                  f"the trials' runs stay in {plan.out / 'trials'};"
                  f" continue: samloc sweep --resume {plan.out}")
    if isinstance(doc, int):
        return doc
    out = plan.out
    if doc["interrupted"]:
        left = sum(t["status"] in ("interrupted", "not started") for t in doc["trials"])
        print(f"samloc sweep: interrupted; {left} of {len(doc['trials'])} trials unfinished (marked in"
              f" {out / 'sweep.json'}); continue: samloc sweep --resume {out}", file=sys.stderr)
        return 130
    _print_table(doc)
    print(f"best: {doc['best'] or 'none named'} ({doc['best_note']})")
    print(f"report: {out / 'sweep.json'}, table: {out / 'sweep.md'}, plot: {out / 'sweep.png'}")
    return 0
