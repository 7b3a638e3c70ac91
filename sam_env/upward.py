"""The engine's only references up the layers (training → agents → sam_env).

``sam_env`` never imports ``agents`` or ``training``, except here, lazily, for
one convenience that users reach through the engine: **named opponents**,
``gymnasium.make("SamLoc-v0", opponents="heuristic")`` takes an agent spec,
and only the agents package can build one.

It imports at call time, so importing any ``sam_env`` module never imports
``agents``; a test keeps every other module of the package from doing so.
"""

from __future__ import annotations

from typing import Any


def named_agent(spec: str) -> Any:
    """``agents.make_agent(spec)``: an agent built from its name (``heuristic``, a checkpoint, …)."""
    try:
        from agents import make_agent
    except ImportError as exc:
        raise ValueError(f"opponent {spec!r}: named agents need the agents package ({exc})") from None
    return make_agent(spec)
