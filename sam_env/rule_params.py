"""The rule parameters of RULES §9, declared once: :data:`PARAMS`.

Each row gives a parameter's name, its type (which says the allowed values,
how a value is checked and how it becomes the kernel's int), its default (the
default preset's value: a preset file lists only the parameters that differ),
its slot in the int array the compiled engine reads, and the cells it fills
in the observation's rules block.  Everything else is derived from the table
by functions that take a table, so a test can derive from a copy with an
extra row: the ``RuleSet`` fields and their checks (:mod:`sam_env.rules`),
the kernel's slots (:func:`slots`, ``core.R_*``) and array
(:func:`rules_array`), and the rules block of the observation
(:func:`sam_env.obs.rule_cells`).

Adding a parameter is one row here plus its kernel logic in
:mod:`sam_env.core` (its ``R_*`` name from :data:`SLOTS`).  Its observation
cells change the observation's layout: bump ``obs.OBS_VERSION``.  The row's
``slot`` and ``obs_order`` keep today's array and vector bit for bit (the
table's own order is the one a person reads: ``samloc rules``, the records).
Numba compiles the slots in as constants; :mod:`sam_env.jitcache`
fingerprints this file with the other sources, so an edited table never runs
a stale cached kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .cards import HAND_SIZE, MAX_PLAYERS, MIN_PLAYERS

INSTANT_PATTERNS = ("dragon", "four_twos", "same_color", "three_triples", "five_pairs",
                    "poor_hand", "rich_hand")
STANDARD_INSTANT_WINS = INSTANT_PATTERNS[:5]  # RULES §4: poor_hand and rich_hand are optional
MAX_LA = 10_000  # the largest payment a rule set may name, in lá


# ---- parameter types: allowed values, the check's message, the kernel's int --------------------
@dataclass(frozen=True)
class Flag:
    """``true`` or ``false``; ``None`` too when ``optional`` (the kernel reads ``None`` as false)."""

    optional: bool = False

    @property
    def annotation(self) -> str:
        return "bool | None" if self.optional else "bool"

    def check(self, v: Any) -> tuple[Any, str | None]:
        ok = isinstance(v, bool) or (self.optional and v is None)
        return v, None if ok else ("true, false or null" if self.optional else "true or false")

    def to_slot(self, v: Any) -> int:
        return int(bool(v))


@dataclass(frozen=True)
class Choice:
    """One of ``values``; the kernel sees its index."""

    values: tuple[str, ...]
    annotation = "str"

    def check(self, v: Any) -> tuple[Any, str | None]:
        return v, None if v in self.values else "one of " + ", ".join(self.values)

    def to_slot(self, v: Any) -> int:
        return self.values.index(v)


@dataclass(frozen=True)
class Amount:
    """A whole number of lá from 0 to ``MAX_LA``; ``None`` ("no such payment") too when ``none`` is
    not None, which is then the kernel's int for ``None``."""

    none: int | None = None

    @property
    def annotation(self) -> str:
        return "int" if self.none is None else "int | None"

    def check(self, v: Any) -> tuple[Any, str | None]:
        if v is None and self.none is not None:
            return v, None
        ok = not isinstance(v, bool) and isinstance(v, int) and 0 <= v <= MAX_LA
        message = f"a whole number of lá from 0 to {MAX_LA}" + ("" if self.none is None else ", or null")
        return v, None if ok else message

    def to_slot(self, v: Any) -> int:
        return self.none if v is None else v


@dataclass(frozen=True)
class Count:
    """An integer from ``lo`` to ``hi``."""

    lo: int
    hi: int
    annotation = "int"

    def check(self, v: Any) -> tuple[Any, str | None]:
        ok = not isinstance(v, bool) and isinstance(v, int) and self.lo <= v <= self.hi
        return v, None if ok else f"an integer from {self.lo} to {self.hi}"

    def to_slot(self, v: Any) -> int:
        return v


@dataclass(frozen=True)
class Subset:
    """Some of ``values`` (a list), kept in ``values``' order; the kernel sees a bit mask."""

    values: tuple[str, ...]
    annotation = "tuple[str, ...]"

    def check(self, v: Any) -> tuple[Any, str | None]:
        if isinstance(v, str) or not isinstance(v, (list, tuple)) or any(p not in self.values for p in v):
            return v, "a list of patterns from " + ", ".join(self.values)
        return tuple(p for p in self.values if p in v), None

    def to_slot(self, v: Any) -> int:
        return sum(1 << self.values.index(p) for p in v)


# ---- observation cells: what one cell of the rules block holds, from the parameter's slot -------
# (kinds, read by obs.write_rules: one number each so that a compiled kernel loops over them)
FLAG, EQUALS, BIT, DEFINED, AMOUNT, RATIO, CONST = range(7)


@dataclass(frozen=True)
class Cell:
    """One observation cell: ``kind`` of the slot's int with ``arg`` (EQUALS: the int it is 1 at;
    BIT: the bit; RATIO: the divisor; CONST: the value, no slot).  ``label`` names it in
    ``obs.RULE_FEATURES`` (AMOUNT's ``/LA_SCALE`` suffix is added there)."""

    label: str
    kind: int
    arg: int = 0


@dataclass(frozen=True)
class Param:
    """One rule parameter: see the module docstring."""

    name: str
    type: Flag | Choice | Amount | Count | Subset
    default: Any
    slot: int
    obs_order: int
    cells: tuple[Cell, ...]
    doc: str


def _flag(name: str) -> tuple[Cell, ...]:
    return (Cell(name, FLAG),)


def _amount(name: str) -> tuple[Cell, ...]:
    return (Cell(name, AMOUNT),)


_OPENERS = Choice(("random", "lowest_card"))
_FINISH = Choice(("allowed", "forbidden"))
_BAO = Choice(("penalty", "enforce"))

PARAMS: tuple[Param, ...] = (
    Param("max_players", Count(MIN_PLAYERS, MAX_PLAYERS), MAX_PLAYERS, 0, 20,
          (Cell(f"max_players/{MAX_PLAYERS}", RATIO, MAX_PLAYERS),), "the most players the table seats"),
    Param("first_opener", _OPENERS, "random", 20, 19, (Cell("first_opener=lowest_card", EQUALS, 1),),
          "who leads the first round: random | lowest_card"),
    Param("ace_low_straights", Flag(), True, 1, 0, _flag("ace_low_straights"),
          "A-2-3 … runs with a low 2 allowed"),
    Param("quad_chops_single_two", Flag(), True, 2, 1, _flag("quad_chops_single_two"),
          "a quad chops a single 2"),
    Param("double_quad_chops_pair_two", Flag(), False, 3, 2, _flag("double_quad_chops_pair_two"),
          "two consecutive quads chop a pair of 2s"),
    Param("passed_can_chop", Flag(), True, 4, 3, _flag("passed_can_chop"),
          "chop right of seats that passed (§6)"),
    Param("finish_with_two", _FINISH, "allowed", 5, 4, (Cell("finish_with_two=forbidden", EQUALS, 1),),
          "allowed | forbidden"),
    Param("bao_mot", _BAO, "penalty", 6, 5, (Cell("bao_mot=enforce", EQUALS, 1),),
          "penalty (đền làng) | enforce (legality)"),
    Param("instant_wins", Subset(INSTANT_PATTERNS), STANDARD_INSTANT_WINS, 7, 6,
          tuple(Cell(f"instant:{p}", BIT, i) for i, p in enumerate(INSTANT_PATTERNS)),
          "the instant-win patterns in play"),
    Param("sam_declaration", Flag(), True, 8, 7, _flag("sam_declaration"), "Sâm may be declared"),
    Param("cong", Amount(none=-1), 20, 9, 8, (Cell("cong defined", DEFINED), Cell("cong", AMOUNT)),
          "a loser who played no card; None → card count"),
    Param("two_left", Amount(), 10, 10, 9, _amount("two_left"), "per 2 left in a loser's hand (thối heo)"),
    Param("quad_left", Amount(), 20, 11, 10, _amount("quad_left"), "per quad left (thối tứ quý)"),
    Param("chop_two", Amount(), 10, 12, 11, _amount("chop_two"), "per 2 chopped"),
    Param("chop_quad", Amount(), 0, 13, 12, _amount("chop_quad"), "per quad chopped"),
    Param("sam_win", Amount(), 20, 14, 13, _amount("sam_win"), "each opponent pays a successful Sâm"),
    Param("sam_fail", Amount(), 20, 15, 14, _amount("sam_fail"), "a failed Sâm pays each opponent"),
    Param("sam_fail_to_blocker", Flag(), False, 16, 15, _flag("sam_fail_to_blocker"),
          "the blocker takes a failed Sâm's whole payment"),
    Param("sam_success_den", Flag(), False, 17, 16, _flag("sam_success_den"), "đền trắng"),
    Param("instant_win", Amount(none=0), 20, 18, 17, _amount("instant_win"),
          "each opponent pays an instant win"),
    Param("instant_win_adds_penalties", Flag(optional=True), False, 19, 18,
          _flag("instant_win_adds_penalties"), "an instant win also collects the losers' hand penalties"),
)

#: The observation's rules block ends with cells no parameter fills.
CONST_CELLS = (
    Cell(f"hand size/{HAND_SIZE}", CONST, 1),  # HAND cards dealt / HAND: room for other deal sizes
)


def slots(params: Sequence[Param]) -> dict[str, int]:
    """Parameter name → its index in the kernel's rule array (the slots must be 0, 1, … in some order)."""
    out = {p.name: p.slot for p in params}
    if sorted(out.values()) != list(range(len(params))):
        raise ValueError(f"rule parameter slots must be 0 to {len(params) - 1}, each once: {out}")
    return out


def rules_array(params: Sequence[Param], values: Any) -> np.ndarray:
    """The int32 array the compiled engine reads, from an object with a field per parameter."""
    a = np.zeros(len(params), dtype=np.int32)
    for p in params:
        a[p.slot] = p.type.to_slot(getattr(values, p.name))
    return a


def obs_cells(params: Sequence[Param]) -> list[tuple[Param | None, Cell]]:
    """The rules block of the observation, cell by cell: parameters in ``obs_order``, then
    :data:`CONST_CELLS` (with no parameter)."""
    ordered = sorted(params, key=lambda p: p.obs_order)
    if [p.obs_order for p in ordered] != list(range(len(params))):
        raise ValueError("rule parameters' obs_order must be 0, 1, … each once")
    return [(p, c) for p in ordered for c in p.cells] + [(None, c) for c in CONST_CELLS]


SLOTS = slots(PARAMS)
