"""Players: one :class:`Agent` interface, the baselines, and agents by name.

``make_agent("random" | "heuristic" | "heuristic:greedy" | CHECKPOINT_DIR | "x.onnx"
| "http://host:port", seed=0)``.  Evaluation lives in :mod:`agents.evaluation.evaluate`.
"""

from sam_env import jitcache

jitcache.refresh(__name__, uses=("sam_env",))  # its kernels compile sam_env's in

from .base import Agent  # noqa: E402
from .players.heuristic import HeuristicAgent  # noqa: E402
from .players.random_agent import RandomAgent  # noqa: E402
from .registry import make_agent  # noqa: E402

__all__ = ["Agent", "HeuristicAgent", "RandomAgent", "make_agent"]
