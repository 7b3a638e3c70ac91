"""``rollout.num_workers: auto`` and ``eval.num_workers: auto``: the rollout workers a run starts and the
processes its evaluations play in, sized to the CPUs Ray has.

The rollout workers (docs/training.md, "Runs size themselves to the machine"): every CPU Ray has, less one
for the learner's process (it runs the update on the CPU, or feeds the GPU), ``eval.num_workers`` for the
periodic evaluation when the run has one (single-threaded processes beside training) and the
algorithm's own workers (``Algorithm.own_workers``: expert iteration's search workers), in workers of
``rollout.cpus_per_worker`` CPUs, and never fewer than one.  On two cores that is one worker beside the
learner, what was measured best there (the learner is the bottleneck: a second worker only takes CPU from
it).

The evaluation's processes: one per :data:`CPUS_PER_EVAL` CPUs, at least one, at most one per opponent
(an evaluation plays each opponent in one process, :func:`training.run.evaluation.evaluate_weights`).

Each figure is resolved once, when the run has Ray (an embedded Ray's CPUs, or a joined cluster's), and
written into the run folder's ``config.yaml``; a resume reads that figure, so it starts the same workers
(give ``rollout.num_workers=auto`` or ``eval.num_workers=auto`` again to size it anew)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import AUTO, EvalConfig, RolloutConfig, TrainConfig
from ..errors import TrainError
from .algorithm import Algorithm

#: The word that asks for sizing to the machine.
#: CPUs per evaluation process that ``eval.num_workers: auto`` gives: one up to 31 CPUs (the 16-core GPU
#: machine keeps its 14 rollout workers), two from 32, three from 48 when there are three opponents.
CPUS_PER_EVAL = 16


#: The resident memory of one worker process before its games: Python, NumPy, PyTorch, Ray's worker
#: runtime and the compiled engine (447 MiB measured after importing training.run.rollout, on the
#: 2-core machine of docs/results.md; the driver that holds the learner carries the same).
PROCESS_BYTES = 450 * 2**20
#: What each game a rollout worker steps together adds (a SelfPlayBatch of 512 games: 104 MiB).
GAME_BYTES = 200 * 2**10


def worker_bytes(ro: RolloutConfig, net_bytes: int) -> int:
    """About how much memory one rollout worker process holds: the process, its
    ``rollout.envs_per_worker`` games, the learner's weights and the snapshot pool's (``net_bytes``
    each)."""
    return PROCESS_BYTES + ro.envs_per_worker * GAME_BYTES + net_bytes * (1 + ro.pool_size)


@dataclass(frozen=True)
class Sizing:
    """The rollout workers chosen for ``cpus`` CPUs and why, in one line."""

    rollout_workers: int
    line: str


def size_eval(ev: EvalConfig, cpus: float) -> tuple[int, str]:
    """The evaluation processes :data:`AUTO` stands for on ``cpus`` CPUs, and the line that says why."""
    opponents = max(1, len(ev.opponents))
    workers = max(1, min(opponents, math.floor(cpus / CPUS_PER_EVAL + 1e-9)))
    return workers, (f"eval.num_workers=auto → {workers} (one per {CPUS_PER_EVAL} of {cpus:g} CPUs,"
                     f" at least 1, at most one per opponent: {opponents})")


def eval_workers(ev: EvalConfig, cpus: float) -> int:
    """The evaluation's processes: ``eval.num_workers``, or what :data:`AUTO` stands for on ``cpus``."""
    return size_eval(ev, cpus)[0] if ev.num_workers == AUTO else int(ev.num_workers)


def size_workers(cfg: TrainConfig, cpus: float, device: str, algorithm: type[Algorithm]) -> Sizing:
    """The rollout workers :data:`AUTO` stands for on ``cpus`` CPUs with the learner on ``device`` and the
    workers of its own ``algorithm`` starts."""
    taken = [(1.0, f"1 learner ({device})")]
    if cfg.eval.every_updates or cfg.eval.every_minutes:
        n = eval_workers(cfg.eval, cpus)
        taken.append((float(n), f"{n} evaluation"))
    for g in algorithm.own_workers(cfg):
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


def apply_sizing(cfg: TrainConfig, cpus: float, device: str, algorithm: type[Algorithm]) -> str:
    """Resolve ``eval.num_workers: auto``, then ``rollout.num_workers: auto``, in ``cfg`` in place: a line for
    each that says what was chosen and why ('' when the config gives numbers).  TrainError when
    ``learner.queue_rollouts`` is below the rollout figure."""
    lines = []
    if cfg.eval.num_workers == AUTO:
        cfg.eval.num_workers, line = size_eval(cfg.eval, cpus)
        lines.append(line)
    if cfg.rollout.num_workers != AUTO:
        return "\n".join(lines)
    sizing = size_workers(cfg, cpus, device, algorithm)
    queue = cfg.learner.queue_rollouts
    if queue and queue < sizing.rollout_workers:
        raise TrainError(f"{sizing.line}: learner.queue_rollouts={queue} must be 0 (num_workers + 1) or at"
                         f" least {sizing.rollout_workers}")
    cfg.rollout.num_workers = sizing.rollout_workers
    return "\n".join([*lines, sizing.line])
