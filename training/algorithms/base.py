"""The algorithm as a part of the run loop (:class:`training.run.loop.RunLoop`).

The loop owns the run (its state, checkpoints, workers, schedule, evaluation, logs); an algorithm owns
what it learns and how.  It says what the rollout workers collect for it (:meth:`Algorithm.rollout_actor`:
any Ray actor class made from ``(config dict, worker id)`` with ``info()`` and ``rollout(weights_ref,
version, pool_refs, seed[, lane])`` returning ``{"batch", "stats", "version"}``, whose batch holds one
``act`` row per learner decision (the schedule counts them) and whatever else its own
:meth:`Algorithm.learn` reads), may bring workers of
its own (:meth:`start`, :meth:`collect`), learns from a batch (:meth:`learn`), has hooks after an update,
and keeps its own part of a checkpoint, of the metadata, of the display and of the summary.  Every hook
but :meth:`learn` has a default that does nothing.  See docs/training.md, "Writing an algorithm".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import torch

from ..config import MAX_BATCH_DECISIONS, Section, TrainConfig, need
from ..run.learner import Learner
from ..run.rollout import RolloutEngine, RolloutTargets, rollout_actor_class
from ..run.runstate import Restored, RunState
from ..run.workers import WorkerGroup

if TYPE_CHECKING:  # the loop imports the algorithms: a type only
    from ..run.loop import RunLoop

Rows = list[tuple[str, str]]
#: shorter names in the progress display for some of the figures a ``learn`` returns
DISPLAY_LABELS = {"approx_kl": "kl", "explained_variance": "expl_var"}
#: figures the loop adds to an algorithm's (not shown as its losses)
LOOP_FIGURES = ("update_s",)


@dataclass
class OnPolicySettings(Section):
    """An algorithm on PPO's rollout workers: the returns the workers compute for it, an update's size,
    its learning rate and loss weights."""

    lr: float = 3e-4
    """Adam learning rate."""
    gamma: float = 1.0
    """Discount between one seat's decisions (a game is short and scored at the end); the rollout
    workers' returns use it."""
    gae_lambda: float = 0.95
    """GAE lambda of the rollout workers' advantages and returns (1: Monte-Carlo returns)."""
    batch_decisions: int = 16384
    """Learner decisions gathered before one update (rollouts are taken whole; an update takes every
    rollout waiting, at most learner.queue_rollouts of them)."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    vf_coef: float = 0.5
    """Value loss weight (the value head's, and the critic's when the network has one)."""
    max_grad_norm: float = 0.5
    """Gradient clipping (the gradients' global norm)."""

    def check(self, cfg: TrainConfig, name: str) -> None:
        need(self.lr > 0, f"{name}.lr must be positive")
        need(0 < self.gamma <= 1 and 0 <= self.gae_lambda <= 1,
             f"{name}.gamma must be in (0, 1], {name}.gae_lambda in [0, 1]")
        need(1 <= self.batch_decisions <= MAX_BATCH_DECISIONS, f"{name}.batch_decisions must be from 1 to"
             f" {MAX_BATCH_DECISIONS:,} (the learner expands ~4.5 KB per decision)")
        need(self.ent_coef >= 0 and self.vf_coef >= 0 and self.max_grad_norm > 0,
             f"{name}.ent_coef and vf_coef must be >= 0, max_grad_norm > 0")


def value_regression(net: torch.nn.Module, value: torch.Tensor, base: torch.Tensor,
                     ret: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the value head, and of the critic when the network has one, on returns (the
    critic is the baseline the rollout workers bootstrap from: every algorithm that has one trains it)."""
    loss = (value.float() - ret).pow(2).mean()
    return loss + (base.float() - ret).pow(2).mean() if getattr(net, "has_critic", False) else loss


def policy_terms(net: torch.nn.Module, data: dict[str, torch.Tensor]
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(logp, entropy, value, baseline)`` of a batch through ``net.train_forward``: the taken moves'
    log-probabilities, the policy's mean entropy over the legal moves, the value head and the baseline
    (the critic, or the value head without one)."""
    logits, value, baseline = net.train_forward(data["obs"], data["mask"], data["hid"])
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(logp_all.exp() * logp_all.masked_fill(data["mask"] <= 0, 0.0)).sum(-1).mean()
    return logp_all.gather(1, data["act"][:, None]).squeeze(-1), entropy, value.float(), baseline.float()


class Algorithm(ABC):
    """One learning algorithm (see the module docstring).  ``learner`` holds the network and its
    optimizer (the checkpoint's weights and ``opt.*``); ``losses`` the last update's figures.

    ``name`` is its registry name and its section's (``section`` when they differ: expert iteration's is
    ``distill``); ``Settings`` is its section's dataclass (a :class:`training.config.Section`; None: no
    settings), ``self.settings`` its values in this run."""

    name: ClassVar[str] = ""
    section: ClassVar[str] = ""
    Settings: ClassVar[type[Section] | None] = None
    #: other algorithms' sections it reads too (expert iteration runs PPO's update): the sections neither
    #: names are said to be unread (``--print-config``, ``--dry-run``)
    reads: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "section" not in cls.__dict__:
            cls.section = cls.name

    def __init__(self, cfg: TrainConfig, state: RunState, log: Callable[[str], None],
                 learner: Learner | None = None):
        self.cfg, self.state, self.log = cfg, state, log
        self.settings: Any = cfg.section(self.section) if self.Settings is not None else None
        #: on the CPU until the loop's start has the device; an algorithm that composes another shares it
        self.learner = learner or Learner(cfg, self.learning_rate())
        self.losses: dict[str, float] = {}

    # ---- the workers it needs, asked of the class before a run starts (sizing, the dry run) -------------
    @classmethod
    def learns_from_rollouts(cls, cfg: TrainConfig) -> bool:
        """Whether the run starts the rollout workers (``rollout.*``) for it."""
        return True

    @classmethod
    def own_workers(cls, cfg: TrainConfig) -> list[WorkerGroup]:
        """The groups of Ray workers it starts itself beside the rollout workers (:meth:`start`): sizing
        leaves their CPUs to them, and a run whose groups do not fit is refused before it starts."""
        return []

    @classmethod
    def worker_groups(cls, cfg: TrainConfig) -> list[WorkerGroup]:
        """Every group of Ray workers a run of it starts: the rollout workers (when it learns from them),
        then its own."""
        ro = cfg.rollout
        rollout = WorkerGroup("rollout", ro.num_workers, ro.cpus_per_worker, "rollout worker")
        return [rollout] * cls.learns_from_rollouts(cfg) + cls.own_workers(cfg)

    @classmethod
    def dry_run_lines(cls, cfg: TrainConfig) -> list[str]:
        """Its lines in ``samloc train --dry-run``'s account of the run (what it will start, and how)."""
        return []

    # ---- what the workers collect -------------------------------------------------------------------
    @property
    def rollout_workers(self) -> int:
        """Rollout workers this algorithm learns from (``rollout.num_workers``; 0: none)."""
        return self.cfg.rollout.num_workers if self.learns_from_rollouts(self.cfg) else 0

    @property
    def batch_decisions(self) -> int:
        """Learner decisions one update takes (its section's ``batch_decisions``)."""
        return self.settings.batch_decisions

    @classmethod
    def targets(cls, cfg: TrainConfig) -> RolloutTargets:
        """What PPO's rollout workers compute for this algorithm: returns with its section's ``gamma`` and
        ``gae_lambda`` (an algorithm on those workers has them, as :class:`OnPolicySettings` does)."""
        s = cfg.section(cls.section)
        return RolloutTargets(gamma=s.gamma, gae_lambda=s.gae_lambda)

    def rollout_actor(self) -> type:
        """The Ray actor class of the rollout workers (the PPO rollouts of :mod:`training.run.rollout`)."""
        return rollout_actor_class(RolloutEngine, self.targets(self.cfg))

    def begin(self, restored: Restored | None) -> None:
        """The run is set up (``restored``: the checkpoint a resume read, with this algorithm's part)."""

    def start(self, run: "RunLoop") -> None:
        """Ray is up and the rollout workers asked: start this algorithm's own workers, if any."""

    def collect(self, run: "RunLoop", timeout: float) -> float:
        """Take what this algorithm's own workers delivered (waiting up to ``timeout``); returns how long
        the rollout collection that follows may wait."""
        return timeout

    def take(self, run: "RunLoop") -> list[dict[str, Any]]:
        """The next update's batch: the rollouts queued once they hold :attr:`batch_decisions` (none: no
        update yet)."""
        return run.scheduler.take(self.batch_decisions)

    # ---- learning ---------------------------------------------------------------------------------------
    @abstractmethod
    def learn(self, run: "RunLoop", batches: list[dict[str, Any]]) -> dict[str, float]:
        """One update on ``batches``: its loss through ``self.learner.step``, at the learning rate the loop
        set (:meth:`learning_rate`); returns the update's losses and figures (``losses/<name>``).  The loop
        then publishes the weights and counts the update.  ``run.between_steps`` keeps the workers busy
        during a long one."""

    def learning_rate(self) -> float:
        """The learning rate of the next update (its section's ``lr``; PPO's anneals it)."""
        return self.settings.lr

    def decisions_in(self, batches: list[dict[str, Any]]) -> int:
        """Learner decisions an update on ``batches`` trained on (``decisions_trained`` counts them)."""
        return sum(len(b["batch"]["act"]) for b in batches)

    def write_losses(self, run: "RunLoop", lr: float, step: int) -> None:
        """The update's losses (``losses/<name>``; the search's agreement is ``charts/search_agreement``) and
        the learning rate it used."""
        for k, v in self.losses.items():
            run.board.scalar("charts/search_agreement" if k == "search_agreement" else f"losses/{k}", v, step)
        run.board.scalar("charts/learning_rate", lr, step)

    def after_update(self, run: "RunLoop") -> None:
        """After the loop's own after-update work (snapshot, evaluation, checkpoint on their schedules)."""

    # ---- what it shows and keeps --------------------------------------------------------------------
    def log_scalars(self, run: "RunLoop", step: int) -> None:
        """Its TensorBoard figures at each logging step (after the loop's counters)."""

    def display_rows(self) -> tuple[Rows, Rows]:
        """(rows of the live panel, rows of the plain log line): the figures the last :meth:`learn`
        returned, whatever their names (an outside algorithm's are its own), in its order."""
        shown = [f"{DISPLAY_LABELS.get(k, k)} {v:.4g}" for k, v in self.losses.items()
                 if k not in LOOP_FIGURES and isinstance(v, (int, float))]
        return ([("losses", "  ".join(shown))] if shown else []), []

    def eval_note(self, at: dict[str, Any]) -> None:
        """Its fields in the point an evaluation measures (``eval.jsonl``)."""

    def metadata(self, meta: dict[str, Any]) -> None:
        """Its part of a checkpoint's metadata (``meta`` changed in place)."""

    def to_checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """What it keeps in a checkpoint besides the network and optimizer: (tensors, JSON state)."""
        return {}, {}

    def saved(self, path: Path) -> None:
        """A checkpoint was written at ``path`` (files of its own beside it)."""

    def summary(self, out: dict[str, Any]) -> None:
        """Its part of the run's summary (changed in place)."""

    def stop(self) -> None:
        """The sitting ends (Ray still up): stop its own workers."""
