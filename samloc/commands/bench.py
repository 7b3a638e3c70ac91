"""`samloc bench`: the engine's, the agents' and the trainer's throughput figures (moving here)."""

from __future__ import annotations

import importlib

#: ``samloc bench`` options measured by the layer above the engine's (``sam_env.bench`` takes the rest).
BENCH_BY_OPTION = {"--learner": "samloc.commands.bench_training", "--rollout": "samloc.commands.bench_training",
                   "--search": "samloc.commands.bench_training",
                   "--agent": "samloc.commands.bench_agent"}


def module_for(argv: list[str]) -> str:
    """The module that measures what ``argv`` asks for: the first option that names a layer decides."""
    for a in argv:
        if a.split("=", 1)[0] in BENCH_BY_OPTION:
            return BENCH_BY_OPTION[a.split("=", 1)[0]]
    return "sam_env.bench"


def main(argv: list[str]) -> int:
    return int(importlib.import_module(module_for(argv)).main(argv) or 0)
