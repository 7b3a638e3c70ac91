"""``samloc sweep``: the command line of :mod:`training.tools.sweep`, whose docstring is its ``--help``.

    samloc sweep --config quick --grid ppo.lr=1e-4,3e-4 [--grid KEY=V,...] [--random KEY=LO:HI --samples N]
                 --seeds 0,1 (--minutes M [--asha] | --decisions N) --deals D --out DIR [key=value ...]

Exit 2 on a bad command line or config (checked for every trial before anything trains), 1 when no trial
trained, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

from training.tools import sweep
from training.config import ConfigError
from training.tools.sweep import TABLE_HEAD, SweepPlan, parse_grid, parse_random, run_sweep, table_rows

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
    ap.add_argument("--config", required=True, type=path, help="training config, a name or a YAML file")
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
    budget = ap.add_mutually_exclusive_group(required=True)
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
    ap.add_argument("--out", required=True, type=path, help="the sweep's folder, new or empty")
    ap.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides for every trial")
    return ap.parse_intermixed_args(argv)


def _print_table(doc: dict[str, Any]) -> None:
    table = Table(title=f"samloc sweep: {len(doc['trials'])} trials vs {doc['opponent']},"
                        f" {doc['deals']} deals")
    for col in TABLE_HEAD:
        table.add_column(col, justify="right" if col in ("rank", "seed", "minutes", "decisions trained")
                         else "left")
    for row in table_rows(doc):
        table.add_row(*row)
    Console(width=160).print(table)


def main(argv: list[str]) -> int:
    args = parse(_parse, argv)
    if isinstance(args, int):
        return args
    if args.every_minutes is not None and not args.asha:
        return fail("samloc sweep", "--every-minutes sets --asha's evaluations: give --asha too")
    plan = SweepPlan(args.config, args.overrides, args.grid, args.random, args.samples, args.seeds,
                     Path(args.out), args.minutes or 0.0, args.decisions or 0, args.deals, args.eval_seed,
                     args.asha, args.every_minutes or 0.0, args.sample_seed, args.workers, args.ray_address,
                     "samloc sweep " + " ".join(shlex.quote(a) for a in argv))
    doc = trained("samloc sweep", lambda: run_sweep(plan, lambda line: print(line, flush=True),
                                                    args.allow_few_deals),
                  f"the trials' runs stay in {Path(args.out) / 'trials'}")
    if isinstance(doc, int):
        return doc
    _print_table(doc)
    out = Path(args.out)
    print(f"report: {out / 'sweep.json'}, table: {out / 'sweep.md'}, plot: {out / 'sweep.png'}")
    return 0
