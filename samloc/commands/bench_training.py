"""`samloc bench --learner|--rollout|--search`: the command line of :mod:`training.tools.bench`, whose
docstring is its ``--help``."""

from __future__ import annotations

import argparse
import json
import sys

import torch

from agents.players.search import rates_text
from sam_env.machine import measured
from training.tools import bench
from training.algorithms.expert_search import bench_search
from training.tools.bench import bench_learner, bench_rollout
from training.config import ConfigError
from training.config_load import load_config
from training.run.learner import DeviceError, resolve_device

from .args import Parser, integer, nonempty, parse, path, positive


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = Parser(prog="samloc bench", description=bench.__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--learner", action="store_true", help="learner-only throughput on recorded rollouts")
    what.add_argument("--rollout", action="store_true", help="one worker's generation rate and shipped bytes")
    what.add_argument("--search", action="store_true",
                      help="one expert-iteration search worker's searched decisions/s in fp32 and bf16")
    ap.add_argument("--config", type=path,
                    help="training config (default standard, expert for --search; cluster: 512x4)")
    ap.add_argument("--device", type=nonempty, help="learner.device (default: the config's)")
    ap.add_argument("--precision", choices=("auto", "fp32", "bf16"),
                    help="learner.precision (default: the config's, auto unless it names one)")
    ap.add_argument("--batch-decisions", type=positive, help="ppo.batch_decisions (default: the config's)")
    ap.add_argument("--minibatch", type=positive, help="ppo.minibatch (default: the config's)")
    ap.add_argument("--updates", type=positive, default=3, help="timed updates after one warm-up (default 3)")
    ap.add_argument("--record", type=integer(1, 1 << 22), default=65536,
                    help="at most this many decisions recorded (default 65536; at most 4,194,304)")
    ap.add_argument("--rollouts", type=positive, default=3,
                    help="timed rollouts after one warm-up (default 3)")
    ap.add_argument("--requests", type=positive, default=2,
                    help="timed search requests per precision after one warm-up (default 2)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    ap.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                    help="config overrides, as samloc train takes them (model.kind=moves)")
    args = ap.parse_intermixed_args(argv)
    args.config = args.config or ("expert" if args.search else "standard")
    return args


def main(argv: list[str]) -> int:
    args = parse(_parse, argv)
    if isinstance(args, int):
        return args
    overrides = list(args.overrides)
    overrides += [f"learner.{k}={v}" for k, v in (("device", args.device), ("precision", args.precision))
                  if v]
    overrides += [f"ppo.{k}={v}" for k, v in (("batch_decisions", args.batch_decisions),
                                              ("minibatch", args.minibatch)) if v]
    try:
        cfg = load_config(args.config, overrides)
    except ConfigError as exc:
        print(f"samloc bench: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # as in training: the learner's process and each worker use one thread
    if args.learner:
        try:
            device = resolve_device(cfg.learner.device)
        except DeviceError as exc:
            print(f"samloc bench: {exc}", file=sys.stderr)
            return 2
        res = measured(lambda: bench_learner(cfg, device, args.updates, args.record))
        if not args.json:
            if res.get("precision_line"):
                print(res["precision_line"])
            print(f"learner on {res['device_name']} ({res['device']}), {cfg.name} model {res['model']},"
                  f" {res['precision']}: {res['decisions_per_s']:,} decisions learned/s,"
                  f" {res['seconds_per_update']:.3f} s per update of {res['decisions_per_update']:,}")
    elif args.search:
        try:
            res = bench_search(cfg, args.requests)
        except (OSError, ValueError) as exc:  # init_from missing or not a checkpoint
            print(f"samloc bench: init_from: {exc}", file=sys.stderr)
            return 2
        if not args.json:
            print(f"one search worker, {cfg.name} ({res['candidates']} x {res['worlds']},"
                  f" horizon {res['horizon']}): {res['fp32_searched_per_s']:,} searched decisions/s in fp32,"
                  f" {res['bf16_searched_per_s']:,} in bf16;"
                  f" rollout forward {rates_text(res['rollout_rows_per_s'])}:"
                  f" distill.precision=auto takes {res['auto']}")
    else:
        res = measured(lambda: bench_rollout(cfg, args.rollouts))
        if not args.json:
            print(f"one worker, {cfg.name}: {res['decisions_per_s']:,} decisions/s,"
                  f" {res['learner_decisions_per_s']:,} learner decisions/s,"
                  f" {res['bytes_per_decision']} bytes shipped per learner decision"
                  f" (float32: {res['float32_bytes_per_decision']})")
    print(json.dumps(res))
    return 0
