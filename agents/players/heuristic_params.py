"""The heuristic player's parameters, declared once: one row each (name, default, what it weighs),
the ``P_*`` indices the compiled kernels read them by, and the named variants."""

from __future__ import annotations

import numpy as np

#: One row per parameter: (name, default, what it weighs).  The kernels read a float
#: vector in this order (:func:`make_params`) through the ``P_*`` indices below.
PARAMS: tuple[tuple[str, float, str], ...] = (
    ("beta", 0.7, "weight of a combination's strength in the hand value"),
    ("master", 0.1, "extra value of a master (wins the lead back)"),
    ("card", 0.06, "per card shed"),
    ("ctrl", 0.4, "taking the lead with a master while following"),
    ("win", 2.0, "a move that leaves a forced win line"),
    ("danger", 1.0, "pressure to play when an opponent is close to going out"),
    ("shed", 1.2, "… scaled by the lá the played cards would cost if we lose"),
    ("block", 1.2, "leading a combination a short-handed opponent can finish on"),
    ("den", 6.0, "a non-highest single in front of a báo-1 seat (đền làng)"),
    ("sam_margin", 12.0, "lá per opponent a strong hand earns without declaring"),
    ("sam_samples", 160, "Monte Carlo deals for the Sâm decision"),
    ("sam_max_combos", 4, "splits with more combinations are never declared"),
    ("greedy", 0, "1: the greedy variant's moves"),
    ("no_sam", 0, "1: never declare Sâm"),
    ("no_block", 0, "1: no blocking or pressure terms"),
)
_INDEX: dict[str, int] = {name: i for i, (name, _, _) in enumerate(PARAMS)}
DEFAULT_PARAMS: dict[str, float] = {name: default for name, default, _ in PARAMS}

P_BETA = _INDEX["beta"]
P_MASTER = _INDEX["master"]
P_CARD = _INDEX["card"]
P_CTRL = _INDEX["ctrl"]
P_WIN = _INDEX["win"]
P_DANGER = _INDEX["danger"]
P_SHED = _INDEX["shed"]
P_BLOCK = _INDEX["block"]
P_DEN = _INDEX["den"]
P_SAM_MARGIN = _INDEX["sam_margin"]
P_SAM_SAMPLES = _INDEX["sam_samples"]
P_SAM_MAX_COMBOS = _INDEX["sam_max_combos"]
P_GREEDY = _INDEX["greedy"]
P_NO_SAM = _INDEX["no_sam"]
P_NO_BLOCK = _INDEX["no_block"]

VARIANTS: dict[str, dict[str, float]] = {
    "": {},
    "greedy": {"greedy": 1, "no_sam": 1},
    "nosam": {"no_sam": 1},
    "noblock": {"no_block": 1},
    "spend": {"master": 0.0, "ctrl": 0.0},
}


def make_params(**overrides: float) -> np.ndarray:
    """The float parameter vector the kernels read; unknown names are an error."""
    unknown = [k for k in overrides if k not in _INDEX]
    if unknown:
        raise ValueError(f"unknown heuristic parameter {unknown[0]!r} (known: {', '.join(_INDEX)})")
    p = {**DEFAULT_PARAMS, **overrides}
    return np.array([float(p[name]) for name, _, _ in PARAMS], dtype=np.float64)

