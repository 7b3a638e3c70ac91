"""Agents by name: ``make_agent("heuristic")``, a checkpoint, an ONNX file, a URL."""

from __future__ import annotations

import os
from typing import Any

from .base import Agent
from .heuristic import VARIANTS, HeuristicAgent
from .random_agent import RandomAgent

SPEC_HELP = ("random, random:uniform, heuristic, heuristic:" + "|".join(v for v in VARIANTS if v)
             + ", a checkpoint directory (DIR+search for play-time search), a .onnx file, or http://host:port")


def make_agent(spec: "str | Agent", *, seed: int = 0, **kw: Any) -> Agent:
    """Build the agent a spec string names (an Agent passes through unchanged).

    Raises ValueError with a one-line message for an unknown spec, a missing
    file, or a kind of agent whose module is not installed.
    """
    if isinstance(spec, Agent):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"an agent spec must be a non-empty string ({SPEC_HELP}), not {spec!r}")
    s = spec.strip()
    low = s.lower()
    if low.startswith(("http://", "https://")):
        from .http_agent import HttpAgent
        return HttpAgent(s, seed=seed, **kw)
    if low.endswith(".onnx"):
        if not os.path.isfile(s):
            raise ValueError(f"no such ONNX file: {s}")
        try:
            from .onnx_agent import OnnxAgent
        except ImportError as exc:
            raise ValueError(f"cannot load ONNX agents here ({exc})") from None
        return OnnxAgent(s, seed=seed, **kw)
    if "+search" in s:
        path, _, settings = s.partition("+search")
        if not os.path.isdir(path):
            raise ValueError(f"no such checkpoint directory: {path} (in {s!r})")
        try:
            from .search import load_search_agent
        except ImportError as exc:
            raise ValueError(f"cannot load checkpoint agents here ({exc})") from None
        return load_search_agent(path, settings, seed=seed, **kw)
    name, _, variant = s.partition(":")
    if name == "random":
        if variant not in ("", "uniform"):
            raise ValueError(f"unknown random variant {variant!r} (known: random, random:uniform)")
        return RandomAgent(seed=seed, sam_prob=0.5 if variant == "uniform" else 0.0, **kw)
    if name == "heuristic":
        if variant not in VARIANTS:
            raise ValueError(f"unknown heuristic variant {variant!r} (known: "
                             + ", ".join("heuristic:" + v for v in VARIANTS if v) + ")")
        return HeuristicAgent(seed=seed, variant=variant, **kw)
    if os.path.isdir(s):
        try:
            from .policy_agent import load_policy_agent
        except ImportError as exc:
            raise ValueError(f"cannot load checkpoint agents here ({exc})") from None
        return load_policy_agent(s, seed=seed, **kw)
    if os.sep in s or "/" in s or s.startswith("."):
        raise ValueError(f"no such checkpoint directory: {s}")
    raise ValueError(f"unknown agent spec {spec!r} (expected {SPEC_HELP})")
