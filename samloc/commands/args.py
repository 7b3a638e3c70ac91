"""What the commands' parsers share: a parser whose usage error is one line, number types, and the
tables (rule set, players) a command is asked for."""

from __future__ import annotations

import argparse
from typing import NoReturn

from sam_env.rules import DEFAULT_PRESET, PRESET_NAMES, RuleSet, RulesError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage error is one line naming the problem (``PROG: message``), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """``argv`` parsed, or the exit status where parsing ended the command: 0 after ``--help``, 2 after
    a usage error (its line printed)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def positive(text: str) -> int:
    """An integer of 1 or more (workers, counts)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def non_negative(text: str) -> int:
    """An integer of 0 or more (a time bound where 0 means none)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def parse_tables(tables: str | None, rules: str | None, players: str | None) -> list[tuple[RuleSet, int]] | None:
    """The tables a command is asked for: ``--tables all|R/P,...``, or ``--rules`` x ``--players``
    (lists skip the counts a rule set does not allow); None when none was asked for.  RulesError if bad."""
    if tables is not None:
        if rules is not None or players is not None:
            raise RulesError("give --tables, or --rules and --players, not both")
        return _named_tables(tables)
    if rules is None and players is None:
        return None
    names = [r.strip() for r in (rules or DEFAULT_PRESET).split(",") if r.strip()]
    try:
        counts = [int(p) for p in (players or "4").split(",") if p.strip()]
    except ValueError:
        raise RulesError(f"--players must be a number or a comma-separated list, not {players!r}") from None
    if not names or not counts:
        raise RulesError("--rules and --players need at least one value each")
    sets = [RuleSet.parse(r) for r in names]
    if len(counts) == 1:
        return [(rs, rs.check_players(counts[0])) for rs in sets]
    out = [(rs, p) for rs in sets for p in counts if 2 <= p <= rs.max_players]
    if not out:
        raise RulesError(f"no table of {', '.join(names)} allows {players} players")
    return out


def _named_tables(tables: str) -> list[tuple[RuleSet, int]]:
    """``--tables``: ``all`` (every preset at every player count it allows) or ``RULES/PLAYERS,...``."""
    if tables.strip() == "all":
        return [(RuleSet.preset(r), p) for r in PRESET_NAMES for p in range(2, RuleSet.preset(r).max_players + 1)]
    out = []
    for item in (t.strip() for t in tables.split(",") if t.strip()):
        name, sep, count = item.rpartition("/")
        if not sep or not count.isdigit():
            raise RulesError(f"--tables: {item!r} is not RULES/PLAYERS (e.g. hoi_quan_bai/4) or all")
        rs = RuleSet.parse(name)
        out.append((rs, rs.check_players(int(count))))
    if not out:
        raise RulesError("--tables needs at least one table")
    return out
