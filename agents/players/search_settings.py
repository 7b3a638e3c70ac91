"""A play-time search's settings (``DIR+search:worlds=64,...``): their defaults, their bounds, and
the spec text that gives them.  Torch-free, so a spec is checked before anything is loaded
(:func:`agents.registry.parse_spec`) as well as where the search is built
(:class:`agents.players.search.SearchAgent`).

Each setting is bounded by what it would take: the rollout positions a decision holds at once
(``worlds`` × ``candidates``, :data:`ROW_BYTES` each) by :data:`MAX_SEARCH_BYTES`, as a network is
bounded by its parameters (:data:`agents.nets.format.MAX_PARAMS`: the same 1 GiB); the others by what
they can mean.
"""

from __future__ import annotations

from typing import Any

from sam_env.actions import NUM_ACTIONS
from sam_env.core import STATE_SIZE

#: The shipped settings: chosen on 1,000 deals against the heuristic (docs/agents.md, "Tuning").
DEFAULTS = {"candidates": 10, "worlds": 64, "horizon": 2, "critic": 50, "belief": 1}
#: Settings a spec may give besides the tuned ones: the time bound of a call (0: none).
EXTRA = {"deadline_ms": 0}
#: What a searched decision may hold at once: as a network's parameters in float32 (1 GiB).
MAX_SEARCH_BYTES = 1 << 30
#: Bytes per rollout position: its game state (int32) and the rollout's bookkeeping (its seat, turn
#: count, masks and value), generously.
ROW_BYTES = 4 * STATE_SIZE + 64
#: The inclusive bounds of each setting (``worlds``' upper one depends on ``candidates``).
BOUNDS = {
    "candidates": (2, NUM_ACTIONS),  # no decision has more moves to try
    "worlds": (1, None),             # bounded with candidates, by MAX_SEARCH_BYTES
    "horizon": (-1, 1000),           # -1: to the end; a game gives a seat far fewer turns
    "critic": (0, 100),              # a percentage
    "belief": (0, 1),                # the checkpoint's belief, or uniform worlds
    "deadline_ms": (0, 3_600_000),   # an hour; 0: none
}


def check_search_settings(settings: dict[str, Any]) -> None:
    """ValueError naming the first setting that is not an integer within its bounds, or worlds and
    candidates that would hold more than :data:`MAX_SEARCH_BYTES` at once."""
    for key, val in settings.items():
        low, high = BOUNDS[key]
        if (isinstance(val, bool) or not isinstance(val, int) or val < low
                or (high is not None and val > high)):
            raise ValueError(f"search setting {key} must be {_range(key)}, not {_shown(val)}")
    worlds, cands = (settings.get("worlds", DEFAULTS["worlds"]),
                     settings.get("candidates", DEFAULTS["candidates"]))
    if worlds * cands * ROW_BYTES > MAX_SEARCH_BYTES:
        gib = worlds * cands * ROW_BYTES / (1 << 30)
        raise ValueError(f"search worlds={worlds:,} with candidates={cands} would hold {worlds * cands:,}"
                         f" rollout positions at once ({gib:,.1f} GiB), more than"
                         f" {MAX_SEARCH_BYTES >> 30} GiB: at most"
                         f" worlds={MAX_SEARCH_BYTES // (cands * ROW_BYTES):,} with candidates={cands}")


def parse_search_spec(text: str, defaults: bool = True) -> dict[str, int]:
    """Checked settings from the part after ``+search``: ``""`` or ``":worlds=64,horizon=3"``
    (with ``defaults=False``, only the settings the text gives); ValueError in one line."""
    out = dict(DEFAULTS) if defaults else {}
    body = text[1:] if text.startswith(":") else text
    if text and not text.startswith(":"):
        raise ValueError(f"expected DIR+search or DIR+search:key=value,..., not '+search{text[:40]}'")
    given: set[str] = set()
    for item in filter(None, (p.strip() for p in body.split(","))):
        key, eq, val = item.partition("=")
        key = key.strip()
        if key not in DEFAULTS | EXTRA or not eq:
            raise ValueError(f"unknown search setting {item[:40]!r} (known: "
                             + ", ".join(f"{k}=N" for k in DEFAULTS | EXTRA) + ")")
        if key in given:
            raise ValueError(f"search setting {key} is given twice")
        given.add(key)
        try:
            out[key] = int(val)
        except ValueError:  # not a number, or one of more than 4,300 digits
            raise ValueError(f"search setting {key} must be {_range(key)},"
                             f" not {_shown(val.strip())}") from None
    check_search_settings(out)
    return out


def _range(key: str) -> str:
    if key == "belief":
        return "1 (the checkpoint's belief) or 0 (uniform worlds)"
    low, high = BOUNDS[key]
    return f"an integer from {low} to {high:,}" if high is not None else f"an integer of at least {low}"


def _shown(val: object) -> str:
    if not isinstance(val, str):
        return repr(val)[:40]
    return repr(val) if len(val) <= 40 else repr(val[:40]) + f"... ({len(val):,} characters)"
