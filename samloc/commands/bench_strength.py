"""``samloc bench --to-strength``: the command line of :mod:`training.tools.to_strength`, whose docstring is
its ``--help``.

    samloc bench --to-strength --config quick --minutes 10 --seeds 3 [--out DIR] [key=value ...]
    samloc bench --to-strength --score RUN [RUN ...] [--deals N] [--out DIR]
    samloc bench --to-strength --combine REPORT [REPORT ...] [--out DIR]

Exit 2 on a bad command line or config, 1 when training fails, 130 on a second Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable

from agents.nets.factory import NetworkError
from agents.nets.format import CheckpointError
from training.tools import to_strength
from training.config import ConfigError
from training.errors import TrainError
from training.tools.pipeline import FINAL_EVAL_SEED
from training.tools.to_strength import (MIN_DEALS, Plan, combine_reports, run_benchmark, score_trained,
                                        table_lines)

from .args import Parser, count_arg, eval_seed, fail, minutes_arg, parse, path, positive


#: the options of scoring, which --combine (scoring nothing) refuses
SCORING_FLAGS = ("--deals", "--allow-few-deals", "--eval-seed", "--workers")


def add_scoring_args(ap: argparse.ArgumentParser, what: str) -> None:
    """--deals, --allow-few-deals, --eval-seed: how each ``what`` is scored against the heuristic (the time to
    strength benchmark's, and samloc sweep's)."""
    ap.add_argument("--deals", type=count_arg, default=MIN_DEALS,
                    help=f"duplicate deals per {what}, the same for all (default and least {MIN_DEALS})")
    ap.add_argument("--allow-few-deals", action="store_true", help=f"allow --deals under {MIN_DEALS} (tests)")
    ap.add_argument("--eval-seed", type=eval_seed, default=FINAL_EVAL_SEED,
                    help=f"seed of the scoring's deals (default {FINAL_EVAL_SEED}, the final evaluation's)")


def trained(prog: str, run: Callable[[], dict[str, Any]], kept: str) -> dict[str, Any] | int:
    """``run()``'s report, or the exit status its failure ends the command with, said in one line: 2 for a
    bad config, 1 when training fails, 130 on a second Ctrl-C (the first ends a run's training as samloc
    train's does; ``kept`` says what stays)."""
    try:
        return run()
    except ConfigError as exc:
        return fail(prog, exc)
    except (TrainError, CheckpointError, NetworkError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; {kept}", file=sys.stderr)
        return 130


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = Parser(prog="samloc bench", description=__doc__ + "\n" + (to_strength.__doc__ or ""),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--to-strength", action="store_true", required=True,
                    help="train from scratch per seed, then score its snapshots against the heuristic")
    ap.add_argument("--score", action="store_true",
                    help="score the snapshots of the run folders given (RUN ...), trained before, instead of"
                         " training (samloc train's, in any number of sittings, or a benchmark's seed_S"
                         " folders)")
    ap.add_argument("--combine", action="store_true",
                    help="draw reports scored before on the same deals (REPORT ...: to_strength.json files or"
                         " their folders) as one report and plot, scoring nothing again")
    ap.add_argument("--config", type=path, help="training config, a name or a YAML file (default quick)")
    ap.add_argument("--minutes", type=minutes_arg,
                    help="training wall time per seed, Ray's start included (default 10)")
    ap.add_argument("--seeds", type=positive, help="seeds 0 .. K-1, trained in turn (default 3)")
    ap.add_argument("--every-minutes", type=minutes_arg, default=None,
                    help="a snapshot every this many minutes of training, and one at minute 0"
                         " (default minutes/10)")
    add_scoring_args(ap, "snapshot")
    ap.add_argument("--workers", type=positive, default=os.cpu_count() or 1,
                    help="snapshots scored side by side, after training (default: the CPU count)")
    ap.add_argument("--out", type=path, help="the benchmark's folder, new or empty"
                                  " (default runs/to_strength__CONFIG__TIME)")
    ap.add_argument("overrides", nargs="*", metavar="key=value | RUN",
                    help="config overrides, as samloc train takes them; with --score, the run folders;"
                         " with --combine, the reports")
    return ap.parse_intermixed_args(argv)


def main(argv: list[str]) -> int:
    args = parse(_parse, argv)
    if isinstance(args, int):
        return args
    if args.score and args.combine:
        return fail("samloc bench", "--score and --combine: give one (--combine scores nothing)")
    if args.score:
        return _score(args, argv)
    if args.combine:
        return _combine(args, argv)
    args.config, args.minutes, args.seeds = args.config or "quick", args.minutes or 10.0, args.seeds or 3
    name = Path(args.config).stem
    out = Path(args.out or f"runs/to_strength__{name}__{time.strftime('%Y%m%d-%H%M%S')}")
    plan = Plan(args.config, args.overrides, args.minutes, args.seeds, out, args.every_minutes or 0.0,
                args.deals, args.eval_seed, args.workers,
                "samloc bench " + " ".join(shlex.quote(a) for a in argv))
    doc = trained("samloc bench", lambda: run_benchmark(plan, lambda line: print(line, flush=True),
                                                         args.allow_few_deals),
                  f"the runs trained so far stay in {out}")
    if isinstance(doc, int):
        return doc
    print("\n".join(table_lines(doc)))
    print(f"report: {out / 'to_strength.json'}, plot: {out / 'to_strength.png'}")
    return 0


def _training_options(args: argparse.Namespace) -> list[str]:
    """The training options and key=value overrides given, which --score and --combine refuse."""
    given = [flag for flag, v in (("--config", args.config), ("--minutes", args.minutes),
                                  ("--seeds", args.seeds), ("--every-minutes", args.every_minutes))
             if v is not None]
    return given + [a for a in args.overrides if "=" in a and not Path(a).exists()]


def _score(args: argparse.Namespace, argv: list[str]) -> int:
    """``--score RUN ...``: the runs' snapshots scored; nothing trained."""
    given = _training_options(args)
    if given:
        return fail("samloc bench", f"--score scores runs trained before: {given[0]} is for training")
    if not args.overrides:
        return fail("samloc bench", "--score needs the run folders to score (RUN ...)")
    out = Path(args.out or f"runs/to_strength__scored__{time.strftime('%Y%m%d-%H%M%S')}")
    command = "samloc bench " + " ".join(shlex.quote(a) for a in argv)
    try:
        doc = score_trained([Path(a) for a in args.overrides], out, args.deals, args.eval_seed, args.workers,
                            command, lambda line: print(line, flush=True), args.allow_few_deals)
    except ConfigError as exc:
        return fail("samloc bench", exc)
    except (CheckpointError, OSError) as exc:
        print(f"samloc bench: {exc}", file=sys.stderr)
        return 1
    print("\n".join(table_lines(doc)))
    print(f"report: {out / 'to_strength.json'}, plot: {out / 'to_strength.png'}")
    return 0


def _combine(args: argparse.Namespace, argv: list[str]) -> int:
    """``--combine REPORT ...``: reports scored before, drawn as one; nothing trained or scored."""
    given = _training_options(args) + [a.split("=")[0] for a in argv if a.split("=")[0] in SCORING_FLAGS]
    if given:
        return fail("samloc bench", f"--combine draws reports scored before: {given[0]} is for"
                                    f" {'scoring' if given[0] in SCORING_FLAGS else 'training'}")
    if not args.overrides:
        return fail("samloc bench", "--combine needs the reports to draw (REPORT ...)")
    out = Path(args.out or f"runs/to_strength__combined__{time.strftime('%Y%m%d-%H%M%S')}")
    command = "samloc bench " + " ".join(shlex.quote(a) for a in argv)
    try:
        doc = combine_reports([Path(a) for a in args.overrides], out, command)
    except ConfigError as exc:
        return fail("samloc bench", exc)
    except OSError as exc:
        print(f"samloc bench: {exc}", file=sys.stderr)
        return 1
    print("\n".join(table_lines(doc)))
    print(f"report: {out / 'to_strength.json'}, plot: {out / 'to_strength.png'}")
    return 0
