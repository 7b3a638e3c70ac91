"""``samloc seeds RUN RUN ...``: a config's runs over several seeds side by side
(training/tools/seed_curve.py).

    samloc train --config quick --seeds 0,1,2 --run-dir runs/seeds      (its runs: runs/seeds/s0, s1 and s2)
    samloc seeds runs/seeds/s0 runs/seeds/s1 runs/seeds/s2 [--by minutes|decisions|update]
                 [--opponents heuristic random] [--png curve.png]

(Without --run-dir each seed's run gets its own runs/NAME__SEED__TIME folder; samloc train prints the
samloc seeds command that takes them.)

A Markdown table: per evaluation point, the runs lined up by wall minutes (default), decisions trained or
update, the mean over seeds of the updates, wall minutes and decisions trained and, per opponent, the mean
lá with the lowest and highest seed; then the final evaluations.  The columns are the opponents every
evaluation of the runs has, unless --opponents names them.  ``--png`` draws per opponent the mean over
seeds in a band from the lowest to the highest seed, every seed faint behind it.
Exit 2 on a folder that is not a run, a run with no evaluation, or a damaged run file (named); exit 1
when the PNG cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sam_env.atomic import check_target
from training.tools.seed_curve import AXES, check_opponents, common_opponents, load_run, plot, table

from .args import Parser, nonempty, parse, path


def _parser() -> Parser:
    p = Parser(prog="samloc seeds", description=__doc__,  # seed_curve's docstring says it again, for code
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=path, help="run folders of one config, different seeds")
    p.add_argument("--opponents", nargs="+", type=nonempty,
                   help="the opponents' columns (default: those every evaluation of the runs has)")
    p.add_argument("--by", choices=list(AXES), default="minutes",
                   help="line the runs up by wall minutes (default), decisions trained or update")
    p.add_argument("--png", type=path, help="also draw the curves here")
    return p


def main(argv: list[str]) -> int:
    args = parse(_parser().parse_args, argv)
    if isinstance(args, int):
        return args
    try:
        if args.png is not None:
            check_target(args.png)  # UnsafeTarget (a ValueError) before anything is read
        runs = [load_run(Path(r)) for r in args.runs]
        opponents = args.opponents or common_opponents(runs, [str(r) for r in args.runs])
        check_opponents(runs, [str(r) for r in args.runs], opponents)
    except (ValueError, OSError) as exc:  # load_run's damaged files and json's errors are ValueErrors
        print(f"samloc seeds: {exc}", file=sys.stderr)
        return 2
    print(table(runs, opponents, args.by))
    if args.png:
        try:
            plot(runs, [Path(r).name for r in args.runs], opponents, Path(args.png), args.by)
        except OSError as exc:  # the folder went read-only, the disk is full, ...
            print(f"samloc seeds: cannot write {args.png}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"curves: {args.png}")
    return 0
