"""``rollout.num_workers: auto``: the rollout workers a run starts, sized to the CPUs Ray has.

The rule (docs/training.md, "Runs size themselves to the machine"): every CPU Ray has, less one for the
learner's process (it runs the update on the CPU, or feeds the GPU), one for the periodic evaluation when
the run has one (a single-threaded Ray task beside training) and the algorithm's own workers
(``Algorithm.own_workers``: expert iteration's search workers, ``distill.num_workers`` x
``distill.cpus_per_worker``), in workers of ``rollout.cpus_per_worker`` CPUs,
and never fewer than one.  On two cores that is one worker beside the learner, what was measured best
there (the learner is the bottleneck: a second worker only takes CPU from it).

The figure is resolved once, when the run has Ray (an embedded Ray's CPUs, or a joined cluster's), and
written into the run folder's ``config.yaml``; a resume reads that figure, so it starts the same workers
(give ``rollout.num_workers=auto`` again to size it anew)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .algorithms import algorithm_class
from .config import TrainConfig
from .errors import TrainError

#: The word that asks for sizing to the machine.
AUTO = "auto"


@dataclass(frozen=True)
class Sizing:
    """The rollout workers chosen for ``cpus`` CPUs and why, in one line."""

    rollout_workers: int
    line: str


def size_workers(cfg: TrainConfig, cpus: float, device: str) -> Sizing:
    """The rollout workers :data:`AUTO` stands for on ``cpus`` CPUs with the learner on ``device``."""
    taken = [(1.0, f"1 learner ({device})")]
    if cfg.eval.every_updates or cfg.eval.every_minutes:
        taken.append((1.0, "1 evaluation"))
    for g in algorithm_class(cfg).own_workers(cfg):
        taken.append((g.num_workers * g.cpus_per_worker,
                      f"{g.num_workers * g.cpus_per_worker:g} {g.what}{'s' if g.num_workers > 1 else ''}"))
    left = cpus - sum(c for c, _ in taken)
    fit = math.floor(left / cfg.rollout.cpus_per_worker + 1e-9)
    workers = max(1, fit)
    why = f"{cpus:g} CPUs - " + " - ".join(w for _, w in taken)
    if cfg.rollout.cpus_per_worker != 1:
        why += f", {cfg.rollout.cpus_per_worker:g} CPU each"
    if fit < 1:
        why += "; at least 1"
    return Sizing(workers, f"rollout.num_workers=auto → {workers} ({why})")


def apply_sizing(cfg: TrainConfig, cpus: float, device: str) -> str:
    """Resolve ``rollout.num_workers: auto`` in ``cfg`` in place: the line that says what was chosen and why
    ('' when the config gives a number).  TrainError when ``learner.queue_rollouts`` is below the figure."""
    if cfg.rollout.num_workers != AUTO:
        return ""
    sizing = size_workers(cfg, cpus, device)
    queue = cfg.learner.queue_rollouts
    if queue and queue < sizing.rollout_workers:
        raise TrainError(f"{sizing.line}: learner.queue_rollouts={queue} must be 0 (num_workers + 1) or at"
                         f" least {sizing.rollout_workers}")
    cfg.rollout.num_workers = sizing.rollout_workers
    return sizing.line
