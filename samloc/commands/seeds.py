"""``samloc seeds RUN RUN ...``: a config's runs over several seeds side by side (training/seed_curve.py).

    samloc seeds runs/seeds/quick_s0 runs/seeds/quick_s1 runs/seeds/quick_s2 [--opponents heuristic random]
                 [--png curve.png]

A Markdown table: per evaluation every run reached, the mean over seeds of the wall minutes and decisions
trained and, per opponent, the mean lá with the lowest and highest seed; then the final evaluations.
``--png`` draws every seed's curve.  Exit 2 on a folder that is not a run, or a run with no evaluation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sam_env.atomic import check_target
from training.seed_curve import check_opponents, load_run, plot, table

from .args import Parser, parse


def _parser() -> Parser:
    p = Parser(prog="samloc seeds", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="run folders of one config, different seeds")
    p.add_argument("--opponents", nargs="+", default=["heuristic", "random"], help="the opponents' columns")
    p.add_argument("--png", type=Path, help="also draw the curves here")
    return p


def main(argv: list[str]) -> int:
    args = parse(_parser().parse_args, argv)
    if isinstance(args, int):
        return args
    try:
        if args.png is not None:
            check_target(args.png)  # UnsafeTarget (a ValueError) before anything is read
        runs = [load_run(r) for r in args.runs]
        check_opponents(runs, [str(r) for r in args.runs], args.opponents)
    except (ValueError, OSError, KeyError) as exc:  # json's errors are ValueErrors
        print(f"samloc seeds: {exc}", file=sys.stderr)
        return 2
    print(table(runs, args.opponents))
    if args.png:
        plot(runs, [r.name for r in args.runs], args.opponents, args.png)
        print(f"curves: {args.png}")
    return 0
