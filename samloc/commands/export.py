"""`samloc export CHECKPOINT_DIR [--out FILE.onnx]`: a checkpoint's policy as an ONNX model, checked
against PyTorch (:func:`agents.nets.export.export`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agents.nets.export import RANDOM_TOLERANCE, TOLERANCE, export
from sam_env.atomic import UnsafeTarget

from .args import Parser, integer, non_negative, parse, path


def _parser() -> Parser:
    p = Parser(prog="samloc export",
               description="A checkpoint's policy as an ONNX model, checked against PyTorch.")
    p.add_argument("checkpoint", type=path,
                   help="a checkpoint folder (or a run folder: its newest good checkpoint)")
    p.add_argument("--out", type=path, default=None,
                   help="the .onnx file to write (default: CHECKPOINT/policy.onnx)")
    p.add_argument("--samples", type=integer(1, 1_000_000), default=1000,
                   help="positions (and random inputs) checked (default 1000; at most 1,000,000)")
    p.add_argument("--seed", type=non_negative, default=0)
    p.add_argument("--json", action="store_true", help="print the sidecar as one JSON line")
    return p


def main(argv: list[str]) -> int:
    args = parse(_parser().parse_args, argv)
    if isinstance(args, int):
        return args
    try:
        side = export(args.checkpoint, args.out, samples=args.samples, seed=args.seed)
    except UnsafeTarget as exc:  # --out is not a file: a usage error
        print(f"samloc export: {exc}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"samloc export: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(side))
    else:
        c = side["check"]
        print(f"wrote {side['path']} and {Path(side['path']).with_suffix('.json')}")
        print(f"checked on {c['samples']} inputs: max |onnx - torch| = {c['max_abs_diff']:.2e}"
              f" (probs {c['positions']['max_abs_diff_probs']:.1e} on real positions,"
              f" value {c['positions']['max_abs_diff_value']:.1e}); tolerance {TOLERANCE}"
              f" ({RANDOM_TOLERANCE} on random inputs)")
        print(f"plays {', '.join(map(str, side['rules']))}"
              f" with {', '.join(map(str, side['players']))} players")
    return 0
