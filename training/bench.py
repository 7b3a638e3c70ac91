"""``samloc bench --learner`` / ``--rollout`` / ``--search``: the figures that size a training run.

    samloc bench --learner [--config standard] [--device auto|cpu|cuda|cuda:N] [--precision fp32|bf16]
                           [--updates 3] [--batch-decisions N] [--minibatch N] [--json]
    samloc bench --rollout [--config standard] [--rollouts 3] [--json]
    samloc bench --search [--config expert] [--requests 2] [--json]

``--learner``: decisions learned per second by the learner alone (the
trainer's own :class:`training.learner.Learner`) on rollouts recorded from
real games of the config (its tables and opponent mix, an untrained
policy), with the config's model and PPO settings.  An update is timed from
the packed rollouts on the host to the new weights back on the host: the
copy to the device, the expansion, the PPO epochs.  The recorded decisions
(at most ``--record``) are repeated up to the batch size.

``--rollout``: one worker on one core, as in training: decisions generated
per second (every seat), learner decisions per second (the learner's seats,
at the config's opponent mix), and ``bytes_per_decision``, the size of what
the worker ships divided by the learner decisions it holds.

``--search``: one expert-iteration search worker on one core, as in the
stage (``training.distill.SearchEngine`` with the config's ``distill``
settings, the ``init_from`` network and its belief): searched decisions per
second with its rollouts in fp32 and in bf16, and the rollout forward's rows
per second that ``distill.precision: auto`` compares to choose.

The last line printed is one JSON object.  Exit 2 on a bad option, a bad
config, or CUDA asked for where there is none.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import numpy as np

from .config import ConfigError, TrainConfig, load_config


def record(cfg: TrainConfig, decisions: int, seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Packed learner decisions from one worker's real games (at least ``decisions``), and their stats."""
    from . import compact
    from .rollout import RolloutEngine

    import torch

    torch.manual_seed(seed)  # the same games on every run, so two benches learn from the same data
    eng = RolloutEngine(cfg, 0, seed)
    parts, n, t0 = [], 0, time.perf_counter()
    stats = {"games": 0, "decisions": 0, "learner_decisions": 0}
    while n < decisions:
        out = eng.rollout()
        parts.append(out["batch"])
        n += len(out["batch"]["act"])
        for k in stats:
            stats[k] += out["stats"][k]
    stats["seconds"] = time.perf_counter() - t0
    return compact.concat(parts), stats


def _tile(batch: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    reps = -(-n // len(batch["act"]))
    return {k: np.concatenate([v] * reps)[:n] for k, v in batch.items()}


def bench_learner(cfg: TrainConfig, device: Any, updates: int, record_cap: int) -> dict[str, Any]:
    import torch

    from .learner import Learner

    n = cfg.ppo.batch_decisions
    data, _ = record(cfg, min(n, record_cap))
    batch = _tile(data, n)
    torch.manual_seed(cfg.seed)
    learner = Learner(cfg)
    learner.to(device)
    gen = torch.Generator().manual_seed(0)
    times, losses = [], []
    for _ in range(updates + 1):  # the first warms up (allocations, kernels)
        t0 = time.perf_counter()
        losses.append(learner.update([batch], [0], gen))
        learner.weights()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    secs = float(np.mean(times[1:]))
    m = cfg.model
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"bench": "learner", "config": cfg.name, "device": str(device), "device_name": name,
            "torch_threads": torch.get_num_threads(), "model": f"{m.hidden}x{m.layers} critic={m.critic}",
            "precision": cfg.learner.precision, "decisions_per_update": n, "minibatch": min(cfg.ppo.minibatch, n),
            "epochs": cfg.ppo.epochs, "recorded_decisions": len(data["act"]), "updates": updates,
            "seconds_per_update": round(secs, 4), "decisions_per_s": round(n / secs),
            "first_losses": {k: round(v, 6) for k, v in losses[0].items()},
            "last_losses": {k: round(v, 6) for k, v in losses[-1].items()}}


def bench_rollout(cfg: TrainConfig, rollouts: int) -> dict[str, Any]:
    import torch

    from . import compact
    from .rollout import RolloutEngine

    torch.manual_seed(0)
    eng = RolloutEngine(cfg, 0, seed=0)
    eng.rollout()  # compiles the kernels on a first run, warms up
    stats = {"games": 0, "decisions": 0, "learner_decisions": 0}
    shipped = 0
    t0 = time.perf_counter()
    for _ in range(rollouts):
        out = eng.rollout()
        for k in stats:
            stats[k] += out["stats"][k]
        shipped += compact.nbytes(out["batch"])
    secs = time.perf_counter() - t0
    n = stats["learner_decisions"]
    last = compact.expand(compact.to_device(out["batch"], torch.device("cpu")))  # the float32 batch it replaces
    expanded = sum(v.nbytes for v in last.values()) / len(out["batch"]["act"])
    return {"bench": "rollout", "config": cfg.name, "envs_per_worker": cfg.rollout.envs_per_worker,
            "steps_per_rollout": cfg.rollout.steps_per_rollout, "rollouts": rollouts, "seconds": round(secs, 2),
            "decisions_per_s": round(stats["decisions"] / secs), "learner_decisions_per_s": round(n / secs),
            "games_per_s": round(stats["games"] / secs, 1), "learner_share": round(n / stats["decisions"], 4),
            "bytes_per_decision": round(shipped / n, 1), "float32_bytes_per_decision": round(expanded, 1)}


def bench_search(cfg: TrainConfig, requests: int) -> dict[str, Any]:
    """Searched decisions/s of one search worker in each precision, after a warm-up request each."""
    import dataclasses

    from agents.nets.belief import load_belief
    from agents.nets.checkpoint import load_checkpoint
    from agents.search import prefers_bf16, rollout_rates

    from .distill import SearchEngine
    from .rollout import weights_to_numpy

    m, d = cfg.model, cfg.distill
    if cfg.init_from:
        net, _ = load_checkpoint(cfg.init_from)
        bnet = load_belief(cfg.init_from)
    else:
        net, bnet = m.build(), None
    weights = weights_to_numpy(net)
    belief = {"hidden": bnet.hidden, "weights": weights_to_numpy(bnet)} if bnet is not None else None
    rates = rollout_rates(net.eval())
    out: dict[str, Any] = {"config": cfg.name, "init_from": cfg.init_from or None, "candidates": d.candidates,
                           "worlds": d.worlds, "horizon": d.horizon, "games": d.envs_per_worker,
                           "rollout_rows_per_s": {k: round(v) for k, v in rates.items()},
                           "auto": "bf16" if prefers_bf16(rates) else "fp32"}
    for prec in ("fp32", "bf16"):
        eng = SearchEngine(dataclasses.replace(cfg, distill=dataclasses.replace(d, precision=prec)), 0, cfg.seed)
        eng.set_network(weights, 0, belief)
        eng.play()  # compiles, and fills the games past their first moves
        t0 = time.perf_counter()
        n = sum(eng.play()["stats"]["searched"] for _ in range(requests))
        out[f"{prec}_searched_per_s"] = round(n / (time.perf_counter() - t0), 1)
    return out


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="samloc bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--learner", action="store_true", help="learner-only throughput on recorded rollouts")
    what.add_argument("--rollout", action="store_true", help="one worker's generation rate and shipped bytes")
    what.add_argument("--search", action="store_true",
                      help="one expert-iteration search worker's searched decisions/s in fp32 and bf16")
    ap.add_argument("--config", help="training config (default standard, expert for --search; cluster: 512x4)")
    ap.add_argument("--device", help="learner.device (default: the config's)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), help="learner.precision (default: the config's)")
    ap.add_argument("--batch-decisions", type=int, help="ppo.batch_decisions (default: the config's)")
    ap.add_argument("--minibatch", type=int, help="ppo.minibatch (default: the config's)")
    ap.add_argument("--updates", type=int, default=3, help="timed updates after one warm-up (default 3)")
    ap.add_argument("--record", type=int, default=65536, help="at most this many decisions recorded (default 65536)")
    ap.add_argument("--rollouts", type=int, default=3, help="timed rollouts after one warm-up (default 3)")
    ap.add_argument("--requests", type=int, default=2,
                    help="timed search requests per precision after one warm-up (default 2)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)
    if min(args.updates, args.rollouts, args.record, args.requests) < 1:
        ap.error("--updates, --rollouts, --requests and --record must be at least 1")
    args.config = args.config or ("expert" if args.search else "standard")
    return args


def main(argv: list[str]) -> int:
    try:
        args = _parse(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    overrides = [f"learner.{k}={v}" for k, v in (("device", args.device), ("precision", args.precision)) if v]
    overrides += [f"ppo.{k}={v}" for k, v in (("batch_decisions", args.batch_decisions),
                                              ("minibatch", args.minibatch)) if v]
    try:
        cfg = load_config(args.config, overrides)
    except ConfigError as exc:
        print(f"samloc bench: {exc}", file=sys.stderr)
        return 2
    import torch

    from .learner import DeviceError, resolve_device

    torch.set_num_threads(1)  # as in training: the learner's process and each worker use one thread
    if args.learner:
        try:
            device = resolve_device(cfg.learner.device)
        except DeviceError as exc:
            print(f"samloc bench: {exc}", file=sys.stderr)
            return 2
        res = bench_learner(cfg, device, args.updates, args.record)
        if not args.json:
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
            from agents.search import rates_text
            print(f"one search worker, {cfg.name} ({res['candidates']} x {res['worlds']}, horizon {res['horizon']}):"
                  f" {res['fp32_searched_per_s']:,} searched decisions/s in fp32, {res['bf16_searched_per_s']:,} in"
                  f" bf16; rollout forward {rates_text(res['rollout_rows_per_s'])}:"
                  f" distill.precision=auto takes {res['auto']}")
    else:
        res = bench_rollout(cfg, args.rollouts)
        if not args.json:
            print(f"one worker, {cfg.name}: {res['decisions_per_s']:,} decisions/s, {res['learner_decisions_per_s']:,}"
                  f" learner decisions/s, {res['bytes_per_decision']} bytes shipped per learner decision"
                  f" (float32: {res['float32_bytes_per_decision']})")
    print(json.dumps(res))
    return 0
