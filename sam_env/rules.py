"""Rule sets (RULES §9): a frozen dataclass, the presets in ``sam_env/presets/``.

A user rule set is a preset plus overrides, exactly as a record's ``rules``
object is: ``{"preset": "hoi_quan_bai", "passed_can_chop": false}``.
The engine's compiled code sees a rule set as a small int array
(:meth:`RuleSet.to_array`), whose layout lives in :mod:`sam_env.core`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from . import core

PRESETS_DIR = Path(__file__).resolve().parent / "presets"
PRESET_NAMES = ("hoi_quan_bai", "s666pg", "mien_bac", "online")
DEFAULT_PRESET = "hoi_quan_bai"
INSTANT_PATTERNS = ("dragon", "four_twos", "same_color", "three_triples", "five_pairs",
                    "poor_hand", "rich_hand")


class RulesError(ValueError):
    """A rule set that names an unknown preset or parameter, or a bad value."""


@dataclass(frozen=True)
class RuleSet:
    """Every parameter of RULES §9.  ``None`` means "the preset has no such payment"."""

    name: str = DEFAULT_PRESET
    max_players: int = 5
    first_opener: str = "random"              # random | lowest_card
    ace_low_straights: bool = True            # A-2-3 … runs with a low 2 allowed
    quad_chops_single_two: bool = True
    double_quad_chops_pair_two: bool = False
    passed_can_chop: bool = True              # chop right of seats that passed (§6)
    finish_with_two: str = "allowed"          # allowed | forbidden
    bao_mot: str = "penalty"                  # penalty (đền làng) | enforce (legality)
    instant_wins: tuple[str, ...] = field(default_factory=tuple)
    sam_declaration: bool = True
    cong: int | None = 20                     # a loser who played no card; None → card count
    two_left: int = 10                        # per 2 left in a loser's hand (thối heo)
    quad_left: int = 20                       # per quad left (thối tứ quý)
    chop_two: int = 10
    chop_quad: int = 0
    sam_win: int = 20
    sam_fail: int = 20
    sam_fail_to_blocker: bool = False
    sam_success_den: bool = False             # đền trắng
    instant_win: int | None = 20
    instant_win_adds_penalties: bool | None = False

    # ---- construction -------------------------------------------------
    @classmethod
    def preset(cls, name: str) -> "RuleSet":
        return _load_preset(name)

    @classmethod
    def parse(cls, spec: "str | Mapping[str, Any] | RuleSet") -> "RuleSet":
        """A preset name, a ``{"preset": NAME, ...overrides}`` mapping, or a RuleSet."""
        if isinstance(spec, RuleSet):
            return spec
        if isinstance(spec, str):
            return cls.preset(spec)
        if isinstance(spec, Mapping):
            spec = dict(spec)
            base = spec.pop("preset", None)
            if not isinstance(base, str):
                raise RulesError("a rule set object needs \"preset\": one of " + ", ".join(PRESET_NAMES))
            return cls.preset(base).with_overrides(spec)
        raise RulesError(f"rules must be a preset name or an object, not {spec!r}")

    def with_overrides(self, overrides: Mapping[str, Any]) -> "RuleSet":
        if not overrides:
            return self
        known = {f.name for f in dataclasses.fields(self)} - {"name"}
        values = {}
        for key, value in overrides.items():
            if key not in known:
                raise RulesError(f"unknown rule parameter {key!r} (known: {', '.join(sorted(known))})")
            values[key] = value
        name = self.name + "+" + ",".join(f"{k}={overrides[k]}" for k in sorted(overrides))
        return _validated(dataclasses.replace(self, name=name, **values), values)

    # ---- views ----------------------------------------------------------
    @property
    def preset_name(self) -> str:
        return self.name.split("+", 1)[0]

    def overrides(self) -> dict[str, Any]:
        """Parameters that differ from the preset this rule set is based on."""
        base = _load_preset(self.preset_name)
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "name" and getattr(self, f.name) != getattr(base, f.name)}

    def to_record(self) -> "str | dict[str, Any]":
        """What a ``samloc/1`` record's ``rules`` field holds for this rule set."""
        diff = self.overrides()
        if not diff:
            return self.preset_name
        return {"preset": self.preset_name,
                **{k: list(v) if isinstance(v, tuple) else v for k, v in diff.items()}}

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["instant_wins"] = list(self.instant_wins)
        return d

    def to_yaml(self) -> str:
        d = self.to_dict()
        name = d.pop("name")
        return f"# rule set {name}\n" + yaml.safe_dump(d, sort_keys=False, allow_unicode=True)

    def check_players(self, players: object) -> int:
        if isinstance(players, bool) or not isinstance(players, int) or not 2 <= players <= self.max_players:
            raise RulesError(f"players must be an integer from 2 to {self.max_players} under {self.name}")
        return players

    def to_array(self) -> np.ndarray:
        """The int array the compiled engine reads (layout: ``core.R_*``)."""
        return _rules_array(self)


def _rules_array(r: RuleSet) -> np.ndarray:
    a = np.zeros(core.R_SIZE, dtype=np.int32)
    a[core.R_MAX_PLAYERS] = r.max_players
    a[core.R_ACE_LOW] = r.ace_low_straights
    a[core.R_QUAD_CHOPS_TWO] = r.quad_chops_single_two
    a[core.R_DQUAD] = r.double_quad_chops_pair_two
    a[core.R_PASSED_CHOP] = r.passed_can_chop
    a[core.R_FINISH_TWO_FORBIDDEN] = r.finish_with_two == "forbidden"
    a[core.R_BAO_ENFORCE] = r.bao_mot == "enforce"
    a[core.R_INSTANT_MASK] = sum(1 << INSTANT_PATTERNS.index(p) for p in r.instant_wins)
    a[core.R_SAM_DECL] = r.sam_declaration
    a[core.R_CONG] = -1 if r.cong is None else r.cong
    a[core.R_TWO_LEFT] = r.two_left
    a[core.R_QUAD_LEFT] = r.quad_left
    a[core.R_CHOP_TWO] = r.chop_two
    a[core.R_CHOP_QUAD] = r.chop_quad
    a[core.R_SAM_WIN] = r.sam_win
    a[core.R_SAM_FAIL] = r.sam_fail
    a[core.R_SAM_FAIL_BLOCKER] = r.sam_fail_to_blocker
    a[core.R_SAM_DEN] = r.sam_success_den
    a[core.R_INSTANT_WIN] = r.instant_win or 0
    a[core.R_INSTANT_ADDS] = bool(r.instant_win_adds_penalties)
    a[core.R_LOWEST_OPENER] = r.first_opener == "lowest_card"
    return a


_CHOICES = {"first_opener": ("random", "lowest_card"), "finish_with_two": ("allowed", "forbidden"),
            "bao_mot": ("penalty", "enforce")}
_OPTIONAL_INT = ("cong", "instant_win")


def _validated(r: RuleSet, given: Mapping[str, Any]) -> RuleSet:
    """Type-check every field; ``given`` are the values a person wrote (for the message)."""
    for f in dataclasses.fields(r):
        v = getattr(r, f.name)
        bad = None
        if f.name == "name":
            continue
        if f.name in _CHOICES:
            if v not in _CHOICES[f.name]:
                bad = "one of " + ", ".join(_CHOICES[f.name])
        elif f.name == "instant_wins":
            if isinstance(v, str) or not isinstance(v, (list, tuple)) or any(p not in INSTANT_PATTERNS for p in v):
                bad = "a list of patterns from " + ", ".join(INSTANT_PATTERNS)
            else:
                r = dataclasses.replace(r, instant_wins=tuple(p for p in INSTANT_PATTERNS if p in v))
        elif f.name == "max_players":
            if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= core.MAX_PLAYERS:
                bad = f"an integer from 2 to {core.MAX_PLAYERS}"
        elif f.name in _OPTIONAL_INT:
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 10_000):
                bad = "a whole number of lá from 0 to 10000, or null"
        elif f.name == "instant_win_adds_penalties":
            if v is not None and not isinstance(v, bool):
                bad = "true, false or null"
        elif f.type in ("bool", bool):
            if not isinstance(v, bool):
                bad = "true or false"
        elif f.type in ("int", int):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 10_000:
                bad = "a whole number of lá from 0 to 10000"
        if bad:
            shown = given.get(f.name, v)
            raise RulesError(f"rule parameter {f.name} must be {bad}, not {shown!r}")
    return r


@lru_cache(maxsize=None)
def _load_preset(name: str) -> RuleSet:
    if name not in PRESET_NAMES:
        raise RulesError(f"unknown preset {name!r} (known: {', '.join(PRESET_NAMES)})")
    path = PRESETS_DIR / f"{name}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RulesError(f"cannot read preset file {path}: {exc}") from None
    known = {f.name for f in dataclasses.fields(RuleSet)} - {"name"}
    if not isinstance(data, dict) or set(data) != known:
        missing, extra = known - set(data or {}), set(data or {}) - known
        raise RulesError(f"preset file {path} must set exactly the rule parameters"
                         f" (missing: {sorted(missing)}, unknown: {sorted(extra)})")
    return _validated(RuleSet(name=name, **data), data)
