"""The contract between the run loop and an algorithm: the loop owns it, an algorithm fulfils it.

The loop (:class:`training.run.loop.RunLoop`) owns the run: its state, checkpoints, workers, schedule,
evaluation and logs.  An algorithm owns what it learns and how.  It says what the rollout workers collect
for it (:meth:`Algorithm.rollout_actor`: any Ray actor class made from ``(config dict, worker id)`` with
``info()`` and ``rollout(weights_ref, version, pool_refs, seed[, lane])`` returning ``{"batch", "stats",
"version"}``, whose batch holds one ``act`` row per learner decision and whatever else its own
:meth:`Algorithm.learn` reads; what they compute is a :class:`~training.run.rollout.RolloutTargets`),
may bring workers of its own (:meth:`Algorithm.own_workers`, a
:class:`~training.run.workers.WorkerGroup` each; :meth:`Algorithm.start`, :meth:`Algorithm.collect`),
learns from a batch (:meth:`Algorithm.learn`), gives the learner its learning-rate schedule
(:meth:`Algorithm.lr_schedule`), has hooks after an update, and keeps its own part of a checkpoint, of the
metadata, of the display and of the summary.  Every hook but :meth:`Algorithm.learn` has a default that
does nothing.

Hooks get a :class:`RunContext`, not the loop: the counters and the board, and the few things an
algorithm may ask of the run.  Which class a run uses is resolved above this package (``training.launch``,
from the registry in :mod:`training.algorithms`) and handed to the loop in its stage plan: nothing here
imports an algorithm.  See docs/training.md, "Writing an algorithm".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch

from ..config import Section, TrainConfig
from .learner import Learner, LearningRate
from .rollout import RolloutEngine, RolloutTargets, rollout_actor_class
from .runlog import Board
from .runstate import Counters, Restored, RunState
from .workers import WorkerGroup

Rows = list[tuple[str, str]]
#: shorter names in the progress display for some of the figures a ``learn`` returns
DISPLAY_LABELS = {"approx_kl": "kl", "explained_variance": "expl_var"}
#: figures the loop adds to an algorithm's (not shown as its losses)
LOOP_FIGURES = ("update_s",)
#: Work before a new run's first update (the warm start): ``(learner, config, log)`` -> its figures, which
#: the loop writes at step 0 under the hook's name.
StartHook = Callable[[Learner, TrainConfig, Callable[[str], None]], dict[str, float]]


@dataclass
class RunContext:
    """What an algorithm's hooks may use of the run (the loop makes one when it starts)."""

    state: RunState
    """The run state: the counters (``state.counters``), the seeded generator, the stage records."""
    board: Board
    """TensorBoard's scalars (``board.scalar(tag, value, step)``)."""
    take: Callable[[int], list[dict[str, Any]]]
    """The queued rollouts once they hold that many decisions (none yet: [])."""
    between_steps: Callable[[], None]
    """Keeps the workers busy: call it between the gradient steps of a long update."""
    place: Callable[[type, int, str, float], tuple[list[Any], list[dict[str, Any]]]]
    """Start a group of Ray actors: ``(actor class, count, what, CPUs each)`` -> (actors, placement)."""
    evaluate: Callable[..., None]
    """Launch the periodic evaluation of the learner's weights now (``if_idle``, ``finish_older``)."""
    save: Callable[[], Path]
    """Write a checkpoint now (the loop's, with every part's state)."""
    seconds_left: Callable[[], float]
    """Wall seconds until the run's or the stage's budget ends (inf without one)."""
    wall: Callable[[], float]
    """Training wall time over every sitting so far."""

    @property
    def counters(self) -> Counters:
        return self.state.counters


class Algorithm(ABC):
    """One learning algorithm (see the module docstring).  ``learner`` holds the network, its optimizer and
    learning-rate schedule (the checkpoint's weights and ``opt.*``); ``losses`` the last update's figures.

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
        self.learner = learner or Learner(cfg.model, cfg.learner, self.lr_schedule())
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
        ``gae_lambda`` (an algorithm on those workers has them, as ``OnPolicySettings`` does)."""
        s = cfg.section(cls.section)
        return RolloutTargets(gamma=s.gamma, gae_lambda=s.gae_lambda)

    def rollout_actor(self) -> type:
        """The Ray actor class of the rollout workers (the PPO rollouts of :mod:`training.run.rollout`)."""
        return rollout_actor_class(RolloutEngine, self.targets(self.cfg))

    def begin(self, restored: Restored | None) -> None:
        """The run is set up (``restored``: the checkpoint a resume read, with this algorithm's part)."""

    def start(self, ctx: RunContext) -> None:
        """Ray is up and the rollout workers asked: start this algorithm's own workers, if any."""

    def collect(self, ctx: RunContext, timeout: float) -> float:
        """Take what this algorithm's own workers delivered (waiting up to ``timeout``); returns how long
        the rollout collection that follows may wait."""
        return timeout

    def take(self, ctx: RunContext) -> list[dict[str, Any]]:
        """The next update's batch: the rollouts queued once they hold :attr:`batch_decisions` (none: no
        update yet)."""
        return ctx.take(self.batch_decisions)

    # ---- learning ---------------------------------------------------------------------------------------
    @abstractmethod
    def learn(self, ctx: RunContext, batches: list[dict[str, Any]]) -> dict[str, float]:
        """One update on ``batches``: its loss through ``self.learner.step``, at the rate the learner's
        schedule set; returns the update's losses and figures (``losses/<name>``).  The loop then publishes
        the weights and counts the update.  ``ctx.between_steps`` keeps the workers busy during a long
        one."""

    def lr_schedule(self) -> LearningRate:
        """The learner's learning rate as a function of the run's progress: its section's ``lr`` (PPO's
        anneals it)."""
        lr = self.settings.lr
        return lambda progress: lr

    def decisions_in(self, batches: list[dict[str, Any]]) -> int:
        """Learner decisions an update on ``batches`` trained on (``decisions_trained`` counts them)."""
        return sum(len(b["batch"]["act"]) for b in batches)

    def write_losses(self, ctx: RunContext, step: int) -> None:
        """The update's losses (``losses/<name>``; the search's agreement is ``charts/search_agreement``)."""
        for k, v in self.losses.items():
            ctx.board.scalar("charts/search_agreement" if k == "search_agreement" else f"losses/{k}", v, step)

    def after_update(self, ctx: RunContext) -> None:
        """After the loop's own after-update work (snapshot, evaluation, checkpoint on their schedules)."""

    # ---- what it shows and keeps --------------------------------------------------------------------
    def log_scalars(self, ctx: RunContext, step: int) -> None:
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
