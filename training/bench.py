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
stage (``training.algorithms.distill.SearchEngine`` with the config's ``distill``
settings, the ``init_from`` network and its belief): searched decisions per
second with its rollouts in fp32 and in bf16, and the rollout forward's rows
per second that ``distill.precision: auto`` compares to choose.

The last line printed is one JSON object.  Exit 2 on a bad option, a bad
config, or CUDA asked for where there is none.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import torch

from agents.nets.belief import load_belief
from agents.nets.checkpoint import load_checkpoint
from agents.search import prefers_bf16, rollout_rates

from . import compact
from .config import TrainConfig
from .algorithms.distill import SearchEngine
from .algorithms.ppo import ppo_engine, update as ppo_update
from .learner import Learner
from .rollout import weights_to_numpy


def record(cfg: TrainConfig, decisions: int, seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Packed learner decisions from one worker's real games (at least ``decisions``), and their stats."""
    torch.manual_seed(seed)  # the same games on every run, so two benches learn from the same data
    eng = ppo_engine(cfg, 0, seed)
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
    s = cfg.section("ppo")
    n = s.batch_decisions
    data, _ = record(cfg, min(n, record_cap))
    batch = _tile(data, n)
    torch.manual_seed(cfg.seed)
    learner = Learner(cfg, s.lr)
    learner.to(device)
    gen = torch.Generator().manual_seed(0)
    times, losses = [], []
    for _ in range(updates + 1):  # the first warms up (allocations, kernels)
        t0 = time.perf_counter()
        losses.append(ppo_update(learner, s, [batch], [0], gen))
        learner.weights()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    secs = float(np.mean(times[1:]))
    m = cfg.model
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return {"bench": "learner", "config": cfg.name, "device": str(device), "device_name": name,
            "torch_threads": torch.get_num_threads(), "model": m.label(),
            "precision": cfg.learner.precision, "decisions_per_update": n, "minibatch": min(s.minibatch, n),
            "epochs": s.epochs, "recorded_decisions": len(data["act"]), "updates": updates,
            "seconds_per_update": round(secs, 4), "decisions_per_s": round(n / secs),
            "first_losses": {k: round(v, 6) for k, v in losses[0].items()},
            "last_losses": {k: round(v, 6) for k, v in losses[-1].items()}}


def bench_rollout(cfg: TrainConfig, rollouts: int) -> dict[str, Any]:
    torch.manual_seed(0)
    eng = ppo_engine(cfg, 0, 0)
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
    m, d = cfg.model, cfg.section("distill")
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
        sections = cfg.sections | {"distill": dataclasses.replace(d, precision=prec)}
        eng = SearchEngine(dataclasses.replace(cfg, sections=sections), 0, cfg.seed)
        eng.set_network(weights, 0, belief)
        eng.play()  # compiles, and fills the games past their first moves
        t0 = time.perf_counter()
        n = sum(eng.play()["stats"]["searched"] for _ in range(requests))
        out[f"{prec}_searched_per_s"] = round(n / (time.perf_counter() - t0), 1)
    return out
