"""Players: one :class:`Agent` interface, the baselines, and agents by name.

``make_agent("random" | "heuristic" | "heuristic:greedy" | CHECKPOINT_DIR | "x.onnx"
| "http://host:port", seed=0)``.  Evaluation lives in :mod:`agents.evaluate`.
"""

from .base import Agent
from .heuristic import HeuristicAgent
from .random_agent import RandomAgent
from .registry import make_agent

__all__ = ["Agent", "HeuristicAgent", "RandomAgent", "make_agent"]
