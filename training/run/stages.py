"""A run in stages (``stages`` in the config; docs/training.md, "One command to strength").

A stage is a name, the settings it changes (applied on the run's config after every earlier stage's:
:func:`training.config_load.stage_config`) and what ends it: its share of ``max_minutes`` (a mark in the
run's wall time: the shares so far x ``max_minutes``), a number of updates, or a plateau of the periodic
evaluation, whichever comes first; the last stage runs until the run stops.  The run itself moves on,
between two updates (:meth:`training.run.loop.RunLoop.next_stage`); which stage it is in and when each began
are part of the run state (:class:`training.run.runstate.RunState`), so ``--resume`` continues in it.

This module holds the rule that ends a stage and applies a stage's config to the run's, in place (every
part of the run holds the same config object).  A plan is made above this package
(:func:`training.launch.stage_plan`): each stage's config and algorithm class are resolved there, once,
so the loop runs whatever algorithm it is handed and imports none."""

from __future__ import annotations

import copy
from typing import Any

from ..config import StageConfig, TrainConfig
from .algorithm import Algorithm
from .sizing import apply_sizing
from .workers import cpu_shortfall

#: The run's keys a stage may change, besides the algorithms' sections (training.config_load.RUN_KEYS: the
#: rest).
STAGE_KEYS = ("algorithm", "rollout", "learner", "eval")


def plateaued(scores: list[float], evals: int, gain: float) -> bool:
    """Whether the last ``evals`` scores (a stage's evaluations, in order) gained no more than ``gain`` over
    the best one before them (False until there are ``evals`` + 1)."""
    if evals < 1 or len(scores) <= evals:
        return False
    return max(scores[-evals:]) <= max(scores[:-evals]) + gain


class StagePlan:
    """The stages of a run (none: one stage, nothing to do), with each stage's config (computed from the
    run's config before any stage, never from a config another stage changed) and algorithm class; a run
    without stages has its own algorithm's."""

    def __init__(self, stages: list[StageConfig], algorithms: list[type[Algorithm]],
                 configs: list[TrainConfig]):
        self.stages = list(stages)
        self.algorithms, self.configs = algorithms, configs
        if len(algorithms) != max(1, len(self.stages)) or len(configs) != len(self.stages):
            raise ValueError(f"a plan of {len(self.stages)} stages has {len(algorithms)} algorithms and"
                             f" {len(configs)} configs")

    def __bool__(self) -> bool:
        return bool(self.stages)

    def algorithm(self, index: int) -> type[Algorithm]:
        """The algorithm class of stage ``index`` (of the run, without stages)."""
        return self.algorithms[index if self.stages else 0]

    def name(self, index: int) -> str:
        return self.stages[index].name if self.stages else ""

    def apply(self, cfg: TrainConfig, index: int) -> None:
        """Make ``cfg`` (the run's, shared by its parts) the config of stage ``index``, in place: what a stage
        may change (:data:`STAGE_KEYS` and the sections); the run's own keys stay as the run has them."""
        staged = copy.deepcopy(self.configs[index])  # the run's parts change their config in place
        for key in STAGE_KEYS:
            setattr(cfg, key, getattr(staged, key))
        cfg.sections = staged.sections

    def shortfall(self, cpus: float, device: str, embedded: bool) -> str:
        """'' when the workers of every stage (sized as the stage will size them) fit in ``cpus``, else why
        the first that does not cannot, in one line: a run learns it before it starts, not at a switch."""
        for i, cls in enumerate(self.algorithms[:len(self.stages)]):
            staged = copy.deepcopy(self.configs[i])
            apply_sizing(staged, cpus, device, cls)
            short = cpu_shortfall(cls.worker_groups(staged), cpus, embedded)
            if short:
                return f"stages[{i}] ({self.name(i)}): {short}"
        return ""

    def mark_minutes(self, index: int, max_minutes: float) -> float | None:
        """Where stage ``index`` ends in the run's wall time by its share (None: the last stage, or no
        share)."""
        if index >= len(self.stages) - 1 or not self.stages[index].share:
            return None
        return sum(st.share for st in self.stages[:index + 1]) * max_minutes

    def ends(self, index: int, start: dict[str, Any], updates: int, wall_s: float, max_minutes: float,
             history: list[dict[str, Any]]) -> str:
        """Why stage ``index`` (begun at ``start``: its record) ends now ('' while it goes on; the last
        never ends before the run): its minutes mark, its updates or a plateau of its evaluations."""
        if index >= len(self.stages) - 1:
            return ""
        s = self.stages[index]
        mark = self.mark_minutes(index, max_minutes)
        if mark is not None and wall_s >= 60 * mark:
            return f"its share of max_minutes ({mark:g} minutes of the run's wall time) is spent"
        if s.updates and updates - start["updates"] >= s.updates:
            return f"its {s.updates:,} updates are made"
        scores = [e["results"][s.plateau_opponent]["mean_score"] for e in history
                  if e.get("stage") == index and "mean_score" in e["results"].get(s.plateau_opponent, {})]
        if plateaued(scores, s.plateau_evals, s.plateau_gain):
            return (f"its last {s.plateau_evals} evaluations gained no more than {s.plateau_gain:g} lá vs"
                    f" {s.plateau_opponent} over its best before them"
                    f" ({max(scores[:-s.plateau_evals]):+.2f})")
        return ""


def stage_record(index: int, name: str, why: str, c: Any) -> dict[str, Any]:
    """Where a stage began, for the metadata, TensorBoard and curve.png (``c``: the run's counters)."""
    return {"stage": index, "name": name, "updates": c.updates, "decisions_trained": c.decisions_trained,
            "wall_s": round(c.wall_s, 1), "why": why}

