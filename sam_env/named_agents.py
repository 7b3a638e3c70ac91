"""Agents by name for the environments' opponents, found through an entry point.

``gymnasium.make("SamLoc-v0", opponents="heuristic")`` takes an agent's name, but
agents live a layer above the engine, which must not import them.  So the
engine only names a contract: a package that can build agents declares a
factory ``spec -> agent`` under the entry-point group ``samloc.agents`` with
the name ``make_agent`` (this project's ``agents.make_agent``, declared in
``pyproject.toml``), and the engine looks it up by that name at call time.
Any other package may provide the factory instead; none is imported until a
named opponent is asked for.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

GROUP, NAME = "samloc.agents", "make_agent"


def named_agent(spec: str) -> Any:
    """The agent named ``spec`` (``heuristic``, a checkpoint folder, …), built by the installed factory."""
    found = entry_points(group=GROUP, name=NAME)
    if not found:
        raise ValueError(f"opponent {spec!r}: no installed package provides named agents (entry point"
                         f" {GROUP}:{NAME}); install this project (pip install -e .) or pass an agent object")
    if len(found) > 1:
        raise ValueError(f"opponent {spec!r}: several packages provide named agents"
                         f" ({', '.join(sorted(e.value for e in found))}); pass an agent object instead")
    (factory,) = found
    return factory.load()(spec)
