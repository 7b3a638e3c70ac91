"""Learning algorithms, chosen by the config's ``algorithm`` key: a registered name, or a user's class by
import path (``package.module:Class``, a subclass of :class:`~training.run.algorithm.Algorithm`, the
loop's contract, which this package re-exports with the pieces the on-policy algorithms share, so an
outside algorithm imports them from here).  ``algorithm: expert_iteration`` (configs/expert.yaml; the
older ``distill.enabled: true`` is its alias) composes PPO.

Each algorithm's settings are a section of the config named by it (``Algorithm.Settings``, a
:class:`~training.config.Section` declared beside its code); :func:`sections` gathers them, with the
stages' (:data:`STAGES`), for the config loader."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from ..config import ConfigError, Section, TrainConfig, core_fields
from ..run.algorithm import Algorithm, RunContext
from .on_policy import OnPolicySettings, policy_terms, value_regression

__all__ = ["ALGORITHMS", "STAGES", "Algorithm", "OnPolicySettings", "RunContext",
           "policy_terms", "resolve", "sections", "value_regression"]

#: name -> "module:Class" (imported when chosen, so a run loads only its own algorithm)
ALGORITHMS = {
    "ppo": "training.algorithms.ppo:PPO",
    "dmc": "training.algorithms.dmc:DeepMonteCarlo",
    "expert_iteration": "training.algorithms.expert:ExpertIteration",
    "reinforce": "training.algorithms.reinforce:Reinforce",
}

#: section -> "module:Class" of the settings of a stage that is not an algorithm (it runs beside any)
STAGES = {
    "warm_start": "training.algorithms.warm_start:WarmStartConfig",
}


def _import(path: str, spec: str) -> Any:
    module, _, name = path.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except Exception as exc:  # a user's module may raise anything while it is imported
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"algorithm={spec}: cannot import it ({type(exc).__name__}: {first})") from None


def resolve(spec: str) -> type[Algorithm]:
    """The class a name of :data:`ALGORITHMS` or an import path ``package.module:Class`` names."""
    path = ALGORITHMS.get(spec, spec)
    if ":" not in path:
        raise ConfigError(f"algorithm={spec}: not one of {', '.join(ALGORITHMS)}"
                          " nor a package.module:Class path")
    cls = _import(path, spec)
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ConfigError(f"algorithm={spec}: {path} is not a training.algorithms.Algorithm subclass")
    return cls


def sections(spec: str) -> dict[str, type[Section]]:
    """Section name -> settings dataclass: every registered algorithm's and stage's, and the one of the
    algorithm ``spec`` names (an outside one's).  ConfigError when that one's section is not its own."""
    out: dict[str, type[Section]] = {}
    for name in [*ALGORITHMS, *([] if spec in ALGORITHMS else [spec])]:
        cls = resolve(name)
        if cls.Settings is None:
            continue
        taken = {f.name for f in core_fields(TrainConfig)} | set(out)
        if not (cls.section.isidentifier() and dataclasses.is_dataclass(cls.Settings)
                and issubclass(cls.Settings, Section)) or cls.section in taken:
            raise ConfigError(f"algorithm={name}: its settings must be a dataclass subclassing"
                              " training.config.Section, in a section of its own (a name not among "
                              f"{', '.join(sorted(taken))}), not {cls.section!r}")
        out[cls.section] = cls.Settings
    return out | {name: _import(path, name) for name, path in STAGES.items()}
