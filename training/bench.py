"""``samloc bench --learner`` / ``--rollout``: the two figures that size a training run.

    samloc bench --learner [--config standard] [--device auto|cpu|cuda|cuda:N] [--precision fp32|bf16]
                           [--updates 3] [--batch-decisions N] [--minibatch N] [--json]
    samloc bench --rollout [--config standard] [--rollouts 3] [--json]

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


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="samloc bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--learner", action="store_true", help="learner-only throughput on recorded rollouts")
    what.add_argument("--rollout", action="store_true", help="one worker's generation rate and shipped bytes")
    ap.add_argument("--config", default="standard", help="training config (default standard; cluster: 512x4)")
    ap.add_argument("--device", help="learner.device (default: the config's)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), help="learner.precision (default: the config's)")
    ap.add_argument("--batch-decisions", type=int, help="ppo.batch_decisions (default: the config's)")
    ap.add_argument("--minibatch", type=int, help="ppo.minibatch (default: the config's)")
    ap.add_argument("--updates", type=int, default=3, help="timed updates after one warm-up (default 3)")
    ap.add_argument("--record", type=int, default=65536, help="at most this many decisions recorded (default 65536)")
    ap.add_argument("--rollouts", type=int, default=3, help="timed rollouts after one warm-up (default 3)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)
    if min(args.updates, args.rollouts, args.record) < 1:
        ap.error("--updates, --rollouts and --record must be at least 1")
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
    else:
        res = bench_rollout(cfg, args.rollouts)
        if not args.json:
            print(f"one worker, {cfg.name}: {res['decisions_per_s']:,} decisions/s, {res['learner_decisions_per_s']:,}"
                  f" learner decisions/s, {res['bytes_per_decision']} bytes shipped per learner decision"
                  f" (float32: {res['float32_bytes_per_decision']})")
    print(json.dumps(res))
    return 0
