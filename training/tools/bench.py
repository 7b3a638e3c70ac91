"""``samloc bench --learner`` / ``--rollout`` / ``--search``: the figures that size a training run.

    samloc bench --learner [--config standard] [--device auto|cpu|cuda|cuda:N] [--precision auto|fp32|bf16]
                           [--updates 3] [--batch-decisions N] [--minibatch N] [--json]
    samloc bench --rollout [--config standard] [--rollouts 3] [--json]
    samloc bench --search [--config expert] [--requests 2] [--json]

``--learner``: decisions learned per second by the learner alone (the
trainer's own :class:`training.run.learner.Learner`) on rollouts recorded from
real games of the config (its tables and opponent mix, an untrained
policy), with the config's model and PPO settings.  An update is timed from
the packed rollouts on the host to the new weights back on the host: the
copy to the device, the expansion, the PPO epochs.  The recorded decisions
(at most ``--record``) are repeated up to the batch size.  ``--precision auto`` (the
config's default) is resolved as a training run resolves it
(:mod:`training.run.precision`): the JSON's ``precision`` is the one that ran,
``precision_asked`` what was asked, ``precision_rows_per_s`` what auto measured.

``--rollout``: one worker on one core, as in training: decisions generated
per second (every seat), learner decisions per second (the learner's seats,
at the config's opponent mix), and ``bytes_per_decision``, the size of what
the worker ships divided by the learner decisions it holds.

``--search``: one expert-iteration search worker, timed by the algorithm's own
bench (``training.algorithms.expert_search.bench_search``).

The last line printed is one JSON object.  Exit 2 on a bad option, a bad
config, or CUDA asked for where there is none.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from ..run import compact
from ..config import TrainConfig
from ..algorithms.ppo import ppo_engine, update as ppo_update
from ..run.learner import Learner
from ..run.precision import settle_precision


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
    learner = Learner(cfg.model, cfg.learner, s.lr)
    learner.to(device)
    asked = cfg.learner.precision
    settled, rates = settle_precision(learner, cfg.rollout.deterministic)
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
            "precision": cfg.learner.precision, "precision_asked": asked,
            "precision_rows_per_s": {k: round(v) for k, v in rates.items()}, "precision_line": settled,
            "sparse_input": learner.sparse_input(), "decisions_per_update": n,
            "minibatch": min(s.minibatch, n),
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
    # the float32 batch it replaces
    last = compact.expand(compact.to_device(out["batch"], torch.device("cpu")))
    expanded = sum(v.nbytes for v in last.values()) / len(out["batch"]["act"])
    return {"bench": "rollout", "config": cfg.name, "envs_per_worker": cfg.rollout.envs_per_worker,
            "steps_per_rollout": cfg.rollout.steps_per_rollout, "rollouts": rollouts,
            "seconds": round(secs, 2),
            "decisions_per_s": round(stats["decisions"] / secs), "learner_decisions_per_s": round(n / secs),
            "games_per_s": round(stats["games"] / secs, 1), "learner_share": round(n / stats["decisions"], 4),
            "bytes_per_decision": round(shipped / n, 1), "float32_bytes_per_decision": round(expanded, 1)}

