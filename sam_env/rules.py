"""Rule sets (RULES §9): a frozen dataclass derived from :mod:`sam_env.rule_params`, and the
presets, one YAML file each in the package's ``presets/`` folder.

A user rule set is a preset plus overrides, exactly as a record's ``rules``
object is: ``{"preset": "hoi_quan_bai", "passed_can_chop": false}``.
:meth:`RuleSet.parse` is the one parser; libraries take the parsed value.
The engine's compiled code sees a rule set as a small int array
(:meth:`RuleSet.to_array`, slots from the parameter table).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from importlib import resources
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import yaml

from .cards import MIN_PLAYERS
from .rule_params import INSTANT_PATTERNS, PARAMS, Param, rules_array

__all__ = ["DEFAULT_PRESET", "INSTANT_PATTERNS", "MAX_NESTING", "PRESET_NAMES", "RuleSet", "RulesError",
           "nesting", "preset_names", "yaml_value"]

DEFAULT_PRESET = "hoi_quan_bai"


class RulesError(ValueError):
    """A rule set that names an unknown preset or parameter, or a bad value."""


#: how deep a rule parameter's value may nest (the deepest, a list of patterns, is 2): deeper values
#: are refused before a check, a message or a parser recurses into them
MAX_NESTING = 8


def nesting(value: Any, limit: int = MAX_NESTING) -> int:
    """How deep ``value`` nests lists and mappings (a scalar: 0), counted without recursion and no
    further than ``limit`` + 1."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, (list, tuple, dict)):
            deepest = max(deepest, depth + 1)
            if depth + 1 > limit:
                break
            todo += [(x, depth + 1) for x in (v.values() if isinstance(v, dict) else v)]
    return deepest


def yaml_value(text: str, what: str) -> Any:
    """A value a person typed as YAML (``samloc rules --set KEY=VALUE``); RulesError in one line when
    it is not YAML or nests deeper than any rule parameter (never the parser's RecursionError)."""
    try:
        value = yaml.safe_load(text)
    except RecursionError:
        raise RulesError(f"{what}: nested too deeply (a rule parameter's value is a number, a word,"
                         f" true/false or a list of them)") from None
    except yaml.YAMLError as exc:
        raise RulesError(f"{what}: not a YAML value ({' '.join(str(exc).split())[:120]})") from None
    if nesting(value) > MAX_NESTING:
        raise RulesError(f"{what}: nested more than {MAX_NESTING} levels deep (a rule parameter's value"
                         " is a number, a word, true/false or a list of them)")
    return value


def preset_names() -> tuple[str, ...]:
    """The presets shipped in ``sam_env/presets/*.yaml``: the default first, then by name."""
    found = sorted(f.name[:-5] for f in resources.files(__package__).joinpath("presets").iterdir()
                   if f.name.endswith(".yaml"))
    return (DEFAULT_PRESET, *(n for n in found if n != DEFAULT_PRESET))


PRESET_NAMES = preset_names()


class RuleSetBase:
    """What every rule set does; the fields come from the parameter table (:func:`rule_set_class`)."""

    PARAMS: ClassVar[tuple[Param, ...]]
    name: str

    # ---- construction -------------------------------------------------
    @classmethod
    def preset(cls, name: str) -> Any:
        return load_preset(cls, name)

    @classmethod
    def parse(cls, spec: Any) -> Any:
        """A preset name, a ``{"preset": NAME, ...overrides}`` mapping, or a rule set."""
        if isinstance(spec, cls):
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

    @classmethod
    def checked(cls, rules: Any) -> Any:
        """``rules`` if it is already parsed, else a TypeError: libraries take the parsed value, and
        only an edge (a command line, a config, a request, a record, an environment's constructor)
        calls :meth:`parse`."""
        if not isinstance(rules, cls):
            raise TypeError(f"rules must be a RuleSet (RuleSet.parse it where it comes in), "
                            f"not {type(rules).__name__}")
        return rules

    def with_overrides(self, overrides: Mapping[str, Any]) -> Any:
        if not overrides:
            return self
        known = {p.name for p in self.PARAMS}
        for key in overrides:
            if key not in known:
                raise RulesError(f"unknown rule parameter {key!r} (known: {', '.join(sorted(known))})")
            if nesting(overrides[key]) > MAX_NESTING:
                raise RulesError(f"rule parameter {key} is nested more than {MAX_NESTING} levels deep")
        name = self.name + "+" + ",".join(f"{k}={overrides[k]}" for k in sorted(overrides))
        return self.validated(dataclasses.replace(self, name=name, **overrides), overrides)  # type: ignore

    @classmethod
    def validated(cls, r: Any, given: Mapping[str, Any]) -> Any:
        """``r`` with every parameter checked against its type (and normalized); ``given`` are the
        values a person wrote (for the message)."""
        changed = {}
        for p in cls.PARAMS:
            v, bad = p.type.check(getattr(r, p.name))
            if bad:
                shown = given.get(p.name, getattr(r, p.name))
                raise RulesError(f"rule parameter {p.name} must be {bad}, not {shown!r}")
            if v is not getattr(r, p.name):
                changed[p.name] = v
        return dataclasses.replace(r, **changed) if changed else r

    # ---- views ----------------------------------------------------------
    @property
    def preset_name(self) -> str:
        return self.name.split("+", 1)[0]

    def overrides(self) -> dict[str, Any]:
        """Parameters that differ from the preset this rule set is based on."""
        base = self.preset(self.preset_name)
        return {p.name: getattr(self, p.name) for p in self.PARAMS
                if getattr(self, p.name) != getattr(base, p.name)}

    def to_record(self) -> "str | dict[str, Any]":
        """What a ``samloc/1`` record's ``rules`` field holds for this rule set."""
        diff = self.overrides()
        if not diff:
            return self.preset_name
        return {"preset": self.preset_name,
                **{k: list(v) if isinstance(v, tuple) else v for k, v in diff.items()}}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **{p.name: _plain(getattr(self, p.name)) for p in self.PARAMS}}

    def to_yaml(self) -> str:
        d = self.to_dict()
        name = d.pop("name")
        return (f"# rule set {name}: every parameter, those at their default included\n"
                + yaml.safe_dump(d, sort_keys=False, allow_unicode=True))

    @property
    def player_counts(self) -> range:
        """The player counts this rule set allows: ``MIN_PLAYERS`` to its ``max_players``."""
        return range(MIN_PLAYERS, self.max_players + 1)

    def check_players(self, players: object) -> int:
        if isinstance(players, bool) or not isinstance(players, int) or players not in self.player_counts:
            raise RulesError(f"players must be an integer from {MIN_PLAYERS} to {self.max_players}"
                             f" under {self.name}")
        return players

    def to_array(self) -> np.ndarray:
        """The int array the compiled engine reads (slots: ``rule_params``, ``core.R_*``)."""
        return rules_array(self.PARAMS, self)


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def rule_set_class(params: Sequence[Param], name: str = "RuleSet") -> type:
    """A frozen dataclass with ``name`` first, then a field per parameter (its type and default)."""
    fields = [("name", "str", dataclasses.field(default=DEFAULT_PRESET))]
    fields += [(p.name, p.type.annotation, dataclasses.field(default=p.default, metadata={"doc": p.doc}))
               for p in params]
    return dataclasses.make_dataclass(name, fields, bases=(RuleSetBase,), frozen=True,
                                      namespace={"PARAMS": tuple(params), "__module__": __name__,
                                                 "__doc__": "A rule set: every parameter of RULES §9."})


RuleSet = rule_set_class(PARAMS)


@lru_cache(maxsize=None)
def load_preset(cls: type, name: str) -> Any:
    """Preset ``name`` as a ``cls`` rule set: its file sets the parameters that differ from their
    defaults (:data:`~sam_env.rule_params.PARAMS`); a file that sets none is the defaults."""
    if name not in PRESET_NAMES:
        raise RulesError(f"unknown preset {name!r} (known: {', '.join(PRESET_NAMES)})")
    path = resources.files(__package__).joinpath("presets", f"{name}.yaml")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data = {} if data is None else data  # comments only: every parameter at its default
    except (OSError, yaml.YAMLError) as exc:
        raise RulesError(f"cannot read preset file {path}: {exc}") from None
    known = {p.name for p in cls.PARAMS}  # type: ignore[attr-defined]
    if not isinstance(data, dict) or not set(data) <= known:
        extra = set(data) - known if isinstance(data, dict) else set()
        raise RulesError(f"preset file {path} must set rule parameters only (unknown: {sorted(extra)})")
    return cls.validated(cls(name=name, **data), data)  # type: ignore[attr-defined]
