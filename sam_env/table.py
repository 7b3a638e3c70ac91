"""A table: a rule set and the number of players at it, the unit every layer trains, evaluates,
serves and reports on.

Its name is ``RULES/PLAYERS`` (``hoi_quan_bai/4``, ``hoi_quan_bai+cong=10/3``): the key of a table in
evaluation reports and what ``--tables`` takes.  In records, checkpoint metadata and the bot protocol a
table is written as its two fields (``{"rules": ..., "players": 4}``), never as the name.
:meth:`Table.parse` and :meth:`Table.from_record` are its parsers; a table is valid once built (the
player count within its rule set's bounds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from .cards import DEFAULT_PLAYERS
from .rules import DEFAULT_PRESET, PRESET_NAMES, RuleSet, RulesError

__all__ = ["Table", "preset_tables"]


@dataclass(frozen=True, repr=False)
class Table:
    """A parsed rule set and a player count it allows (``RulesError`` in one line otherwise)."""

    rules: RuleSet
    players: int = DEFAULT_PLAYERS

    def __post_init__(self) -> None:
        RuleSet.checked(self.rules)
        self.rules.check_players(self.players)

    @classmethod
    def default(cls) -> "Table":
        """The default preset with the default player count."""
        return cls(RuleSet.preset(DEFAULT_PRESET), DEFAULT_PLAYERS)

    @classmethod
    def parse(cls, text: str) -> "Table":
        """``RULES/PLAYERS``: a preset name (or a rule set's :attr:`name`) and a player count."""
        name, sep, count = text.strip().rpartition("/")
        if not sep or not count.isascii() or not count.isdigit() or len(count) > 3:
            raise RulesError(f"{text!r} is not RULES/PLAYERS (e.g. {DEFAULT_PRESET}/{DEFAULT_PLAYERS})")
        return cls(RuleSet.parse(name.strip()), int(count))

    @classmethod
    def from_record(cls, raw: Mapping[str, Any]) -> "Table":
        """``{"rules": a preset name or {"preset": NAME, ...}, "players": N}``, as metadata writes it."""
        if not isinstance(raw, Mapping) or "rules" not in raw or "players" not in raw:
            raise RulesError(f"a table is {{\"rules\": ..., \"players\": N}}, not {raw!r}"[:200])
        return cls(RuleSet.parse(raw["rules"]), raw["players"])

    @property
    def name(self) -> str:
        """``RULES/PLAYERS``: what reports key a table by and :meth:`parse` reads."""
        return f"{self.rules.name}/{self.players}"

    @property
    def key(self) -> tuple[str, int]:
        """The table by what is played, not by how its rule set was written: a house rule set that
        changes nothing is its preset's table."""
        return json.dumps(self.rules.to_record(), sort_keys=True), self.players

    def to_record(self) -> dict[str, Any]:
        """``{"rules": ..., "players": N}``, as records and checkpoint metadata write a table."""
        return {"rules": self.rules.to_record(), "players": self.players}

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<Table {self.name}>"


def preset_tables() -> list[Table]:
    """Every preset at every player count it allows (``--tables all``), the default preset first."""
    return [Table(rs, p) for rs in map(RuleSet.preset, PRESET_NAMES) for p in rs.player_counts]
