"""The observation's layout, declared once: :data:`SECTIONS`, each with its shape and the kind of
its cells.

The offsets (``F_*``, :data:`OFFSETS`), the size, the exact bounds
(:func:`obs_bounds`), the named views of a vector or a batch (:func:`view`),
the rules block (:func:`rule_cells`, from :mod:`sam_env.rule_params`), the
offset table of :mod:`sam_env.obs`'s docstring (:func:`layout_table`) and the
compact rollout format (``training/run/compact.py``) are all derived from it.
A cell's kind says what values it takes: 0/1 (``bits``, ``thermometer``,
``one_hot``), or an integer code over a denominator (``quarter``: a rank
count / 4; ``amount``: lá / ``LA_SCALE``, clipped; a fraction).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Sequence

import numpy as np

from .cards import HAND_SIZE as HAND, MAX_PLAYERS, MIN_PLAYERS, NUM_RANKS as NR
from .core import HIST
from .rule_params import AMOUNT, PARAMS, RATIO, Cell, Param, obs_cells

#: Lá per unit of value: the observation's amounts, the trainer's reward scale
#: (``training.config.EnvConfig.reward_scale``) and the search's values in lá.
LA_SCALE = 20.0
AMOUNT_CLIP = 10.0


@dataclass(frozen=True)
class Kind:
    """What a cell holds: ``code / denom`` for an integer code from ``lo`` to ``hi`` (0/1 kinds:
    denom 1, codes 0 and 1).  ``name`` names the cells of one code table (the compact format's groups)."""

    name: str
    denom: int = 1
    lo: int = 0
    hi: int = 1

    @property
    def binary(self) -> bool:
        return self.denom == 1 and (self.lo, self.hi) == (0, 1)

    @property
    def bounds(self) -> tuple[float, float]:
        return self.lo / self.denom, self.hi / self.denom


_CLIP_CODE = int(AMOUNT_CLIP * LA_SCALE)
BITS, THERMOMETER, ONE_HOT = Kind("bits"), Kind("thermometer"), Kind("one_hot")
QUARTER = Kind("quarter", 4, 0, 4)                             # a rank count / 4
AMOUNT_LA = Kind("amounts", int(LA_SCALE), 0, _CLIP_CODE)      # lá / LA_SCALE, clipped to [0, AMOUNT_CLIP]
SIGNED_LA = Kind("amounts", int(LA_SCALE), -_CLIP_CODE, _CLIP_CODE)  # clipped to ±AMOUNT_CLIP
PROGRESS = Kind("progress", 100, 0, 100)                       # decisions / 100, clipped to 1
_FRACTION_NAMES = {5: "fifths"}  # the compact format's name for a rule parameter's fraction


def fraction(denom: int) -> Kind:
    """A count over ``denom``, from 0 to 1 (a rule parameter's ``RATIO`` cell)."""
    return Kind(_FRACTION_NAMES.get(denom, f"over{denom}"), denom, 0, denom)


@dataclass(frozen=True)
class Section:
    """A named block of the vector: ``shape`` (C order), and its cells' kind, or ``parts``
    ``(label, kind, size)`` that tile the last axis."""

    name: str
    shape: tuple[int, ...]
    kind: Kind | None
    doc: str
    parts: tuple[tuple[str, Kind, int], ...] = ()

    @property
    def size(self) -> int:
        return prod(self.shape)

    def cell_kinds(self) -> list[Kind]:
        if self.kind is not None:
            return [self.kind] * self.size
        row = [k for _, k, n in self.parts for _ in range(n)]
        assert len(row) == self.shape[-1], f"section {self.name}: parts do not tile its last axis"
        return row * (self.size // len(row))


def rule_cells(params: Sequence[Param] = PARAMS) -> list[tuple[Param | None, Cell]]:
    """The rules block's cells (:func:`sam_env.rule_params.obs_cells`)."""
    return obs_cells(params)


def rule_feature_name(cell: Cell) -> str:
    """A rules-block cell's name: ``x`` a flag, ``x=v`` a choice, ``instant:p`` a pattern, ``x/20``
    an amount of lá over LA_SCALE, ``x/d`` a count over d."""
    return f"{cell.label}/{LA_SCALE:g}" if cell.kind == AMOUNT else cell.label


def rule_cell_kind(cell: Cell) -> Kind:
    if cell.kind == AMOUNT:
        return AMOUNT_LA
    if cell.kind == RATIO:
        return fraction(cell.arg)
    return BITS  # flags, choices, pattern bits, "defined", and the constant 1


def rules_section(params: Sequence[Param] = PARAMS) -> Section:
    cells = [c for _, c in rule_cells(params)]
    return Section("rules", (len(cells),), None, "rule parameters, see ``RULE_FEATURES``",
                   tuple((rule_feature_name(c), rule_cell_kind(c), 1) for c in cells))


HIST_ENTRY = 28
_P = MAX_PLAYERS


def sections(params: Sequence[Param] = PARAMS) -> tuple[Section, ...]:
    """The layout, in order (the rules block from ``params``)."""
    return (
        Section("hand", (NR, 4), THERMOMETER, "own hand, 13 ranks × thermometer 4"),
        Section("unseen", (NR, 4), THERMOMETER, "cards neither held nor played (other hands, undealt)"),
        Section("played", (_P, NR, 4), THERMOMETER, "cards played, per relative seat, 5 × 13 × 4"),
        Section("cards_left", (_P, HAND + 1), ONE_HOT, "cards held per relative seat, one-hot 0…10"),
        Section("bao_1", (_P,), BITS, "relative seat holds exactly one card"),
        Section("present", (_P,), BITS, "relative seat is at the table (r < n)"),
        Section("passed", (_P,), BITS, "relative seat passed in this round"),
        Section("to_act", (_P,), ONE_HOT, "one-hot R of the seat to act"),
        Section("opener", (_P,), ONE_HOT, "one-hot R of the opener"),
        Section("phase", (3,), ONE_HOT, "one-hot sam, play, over"),
        Section("declarer", (1 + _P,), ONE_HOT, "[0] nobody declared Sâm, [1+r] relative declarer"),
        Section("top_kind", (7,), ONE_HOT,
                "none (a lead is due), single, pair, triple, quad, straight, double quad"),
        Section("top_rank", (15,), ONE_HOT, "one-hot ACT_RANK of the top (straights: top position 1…14)"),
        Section("top_cards", (NR,), QUARTER, "rank counts of the top / 4"),
        Section("top_by", (_P,), ONE_HOT, "one-hot R of the seat that played the top"),
        Section("top_chop", (1,), BITS, "the top was played as a chop"),
        Section("chain", (2 + 2 * _P,), None, "open chop chain: [0] value, [1] open, [2:7] one-hot R chopped,"
                " [7:12] one-hot R chopper",
                (("value", AMOUNT_LA, 1), ("open", BITS, 1), ("chopped", ONE_HOT, _P),
                 ("chopper", ONE_HOT, _P))),
        Section("scores", (_P,), SIGNED_LA, "net lá so far per relative seat (chops settled)"),
        Section("progress", (1,), PROGRESS, "decisions taken / 100, clipped to 1"),
        Section("history", (HIST, HIST_ENTRY), None, "last 16 decisions, most recent first, 28 each:"
                " [0] present, [1:6] one-hot R, [6:15] kind (pass, sam, no_sam, single … double quad),"
                " [15:28] rank counts / 4",
                (("present", BITS, 1), ("by", ONE_HOT, _P), ("kind", ONE_HOT, 9), ("cards", QUARTER, NR))),
        rules_section(params),
        Section("players", (_P - MIN_PLAYERS + 1,), ONE_HOT, f"one-hot player count {MIN_PLAYERS}…{_P}"),
    )


SECTIONS = sections()
SECTION = {s.name: s for s in SECTIONS}


def offsets(secs: Sequence[Section] = SECTIONS) -> dict[str, int]:
    """Section name → its first cell; ``"_end"`` → the vector's size."""
    out, at = {}, 0
    for s in secs:
        out[s.name] = at
        at += s.size
    out["_end"] = at
    return out


OFFSETS = offsets()
OBS_SIZE = OFFSETS["_end"]
RULE_FEATURES = tuple(label for label, _, _ in SECTION["rules"].parts)

F_HAND, F_UNSEEN, F_PLAYED, F_LEFT = (OFFSETS["hand"], OFFSETS["unseen"], OFFSETS["played"],
                                      OFFSETS["cards_left"])
F_BAO, F_PRESENT, F_PASSED = OFFSETS["bao_1"], OFFSETS["present"], OFFSETS["passed"]
F_TO_ACT, F_OPENER, F_PHASE, F_DECL = (OFFSETS["to_act"], OFFSETS["opener"], OFFSETS["phase"],
                                       OFFSETS["declarer"])
F_TOP_KIND, F_TOP_RANK, F_TOP_CARDS = OFFSETS["top_kind"], OFFSETS["top_rank"], OFFSETS["top_cards"]
F_TOP_BY, F_TOP_CHOP, F_CHAIN = OFFSETS["top_by"], OFFSETS["top_chop"], OFFSETS["chain"]
F_SCORES, F_PROGRESS, F_HIST = OFFSETS["scores"], OFFSETS["progress"], OFFSETS["history"]
F_RULES, F_PLAYERS = OFFSETS["rules"], OFFSETS["players"]


def cell_kinds(secs: Sequence[Section] = SECTIONS) -> list[Kind]:
    """Every cell's kind, in vector order."""
    return [k for s in secs for k in s.cell_kinds()]


def obs_bounds(secs: Sequence[Section] = SECTIONS) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-cell ``(low, high)`` of the vector (for a Gymnasium ``Box``)."""
    b = np.array([k.bounds for k in cell_kinds(secs)], dtype=np.float32)
    return np.ascontiguousarray(b[:, 0]), np.ascontiguousarray(b[:, 1])


def view(x: np.ndarray, name: str) -> np.ndarray:
    """Section ``name`` of a vector or a batch of vectors (last axis), shaped as declared: a view."""
    s, at = SECTION[name], OFFSETS[name]
    return x[..., at:at + s.size].reshape(*x.shape[:-1], *s.shape)


def rule_offset(name: str) -> int:
    """Where rule feature ``name`` (one of ``RULE_FEATURES``) sits in the vector."""
    return F_RULES + RULE_FEATURES.index(name)


def layout_table(secs: Sequence[Section] = SECTIONS) -> str:
    """The reStructuredText offset table of :mod:`sam_env.obs`'s docstring."""
    rule = "=====  ========================  ====  =============================================="
    rows = [rule, "start  name                      size  contents", rule]
    at = offsets(secs)
    for s in secs:
        rows.append(f"{at[s.name]:<5}  {'``' + s.name + '``':<24}  {s.size:>4}  {s.doc}")
    return "\n".join([*rows, rule])
