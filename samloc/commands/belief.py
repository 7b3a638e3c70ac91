"""`samloc belief CHECKPOINT_DIR`: learn the hand belief a checkpoint's play-time search uses (see
:mod:`training.tools.belief`)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from agents.nets.format import BELIEF_FILE, BELIEF_META, MODEL_FILE
from sam_env.atomic import UnsafeTarget, check_target
from training.tools import belief
from training.tools.belief import train_belief

from .args import Parser, integer, non_negative, parse, path

#: The most deals and the widest layers asked for: ~10 GB of recorded decisions, a 2 x 8,192 network.
MAX_DEALS, MAX_HIDDEN = 10_000_000, 8192


def main(argv: list[str]) -> int:
    ap = Parser(prog="samloc belief", description=belief.__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", type=path,
                    help="a checkpoint folder (e.g. checkpoints/standard); the belief is saved there")
    ap.add_argument("--deals", type=integer(1, MAX_DEALS), default=200_000,
                    help=f"duplicate deals to play (default 200,000; at most {MAX_DEALS:,})")
    ap.add_argument("--epochs", type=integer(1, 1000), default=4,
                    help="passes over the recorded decisions (default 4; at most 1,000)")
    ap.add_argument("--hidden", type=integer(1, MAX_HIDDEN), default=512,
                    help=f"width of the two hidden layers (default 512; at most {MAX_HIDDEN:,})")
    ap.add_argument("--seed", type=non_negative, default=0,
                    help="seeds the deals and the network (default 0)")
    args = parse(ap.parse_args, argv)
    if isinstance(args, int):
        return args
    if not (Path(args.checkpoint) / MODEL_FILE).is_file():
        print(f"samloc belief: {args.checkpoint} is not a checkpoint folder (no {MODEL_FILE})",
              file=sys.stderr)
        return 2
    try:  # the belief's two files, before the games are played
        for name in (BELIEF_FILE, BELIEF_META):
            check_target(Path(args.checkpoint) / name)
    except UnsafeTarget as exc:
        print(f"samloc belief: {exc}", file=sys.stderr)
        return 2
    command = "samloc belief " + " ".join(shlex.quote(a) for a in argv)
    try:
        info = train_belief(args.checkpoint, args.deals, args.epochs, args.hidden, args.seed, command,
                            progress=lambda s: print(f"samloc belief: {s}", flush=True))
    except (ValueError, MemoryError) as exc:  # a bad checkpoint, too few decisions, too many deals
        print(f"samloc belief: {exc or type(exc).__name__}", file=sys.stderr)
        return 1
    replaced = f", the replaced belief {info['incumbent_nll']:.4f}" if "incumbent_nll" in info else ""
    print(f"samloc belief: {info['decisions']:,} decisions, held-out {info['holdout_nll']:.4f} nats/card "
          f"(uniform deal {info['uniform_nll']:.4f}{replaced}), {info['wall_time_s']:.0f} s; "
          f"saved {Path(args.checkpoint) / BELIEF_FILE}")
    return 0
