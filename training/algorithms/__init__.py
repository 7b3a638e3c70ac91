"""Learning algorithms, chosen by the config's ``algorithm`` key: a registered name, or a user's class by
import path (``package.module:Class``, a subclass of :class:`~training.algorithms.base.Algorithm`).
``distill.enabled: true`` (configs/expert.yaml) means expert iteration, which composes PPO."""

from __future__ import annotations

import importlib

from ..config import ConfigError, TrainConfig
from .base import Algorithm

#: name -> "module:Class" (imported when chosen, so a run loads only its own algorithm)
ALGORITHMS = {
    "ppo": "training.algorithms.ppo:PPO",
    "dmc": "training.algorithms.dmc:DeepMonteCarlo",
    "expert_iteration": "training.algorithms.expert:ExpertIteration",
    "reinforce": "training.algorithms.reinforce:Reinforce",
}


def resolve(spec: str) -> type[Algorithm]:
    """The class a name of :data:`ALGORITHMS` or an import path ``package.module:Class`` names."""
    path = ALGORITHMS.get(spec, spec)
    if ":" not in path:
        raise ConfigError(f"algorithm={spec}: not one of {', '.join(ALGORITHMS)} nor a package.module:Class path")
    module, _, name = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except Exception as exc:  # a user's module may raise anything while it is imported
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(f"algorithm={spec}: cannot import it ({type(exc).__name__}: {first})") from None
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise ConfigError(f"algorithm={spec}: {path} is not a training.algorithms.base.Algorithm subclass")
    return cls


def algorithm_class(cfg: TrainConfig) -> type[Algorithm]:
    """The algorithm a config asks for: expert iteration with ``distill.enabled``, else ``algorithm``."""
    return resolve("expert_iteration" if cfg.distill.enabled else cfg.algorithm)
