"""What the commands share: a parser whose usage error is one line (exit 2), argument types, the
tables (rule set, players) a command is asked for, and a quiet end on a closed pipe."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from typing import Callable, NoReturn

from sam_env.rules import DEFAULT_PRESET, PRESET_NAMES, RuleSet, RulesError

EXIT_USAGE = 2
EXIT_PIPE = 128 + 13  # SIGPIPE, as a shell reports a command whose reader closed the pipe
Run = Callable[[argparse.Namespace], int]


class UsageError(ValueError):
    """A command line that cannot be run (one line, exit 2)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage error is one line naming the problem (``PROG: message``), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n")


def parse(parse_args: Callable[[list[str]], argparse.Namespace], argv: list[str]) -> argparse.Namespace | int:
    """``parse_args(argv)`` (a parser's ``parse_args`` or ``parse_intermixed_args``), or the exit status where
    parsing ended the command: 0 after ``--help``, 2 after a usage error (its one line printed)."""
    try:
        return parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def positive(text: str) -> int:
    """An integer of 1 or more (workers, counts)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def positive_list(text: str) -> list[int]:
    """A comma-separated list of integers of 1 or more (``1,4,16,50``)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"must be integers of 1 or more, separated by commas, not {text!r}")
    return values


def non_negative(text: str) -> int:
    """An integer of 0 or more (a seed; a time bound where 0 means none)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def seed_list(text: str) -> list[int]:
    """Seeds for --seeds: distinct integers of 0 or more, comma-separated."""
    try:
        seeds = [non_negative(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seeds like 0,1,2, not {text!r}") from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"a seed given twice in {text!r}")
    return seeds


def port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {value}")
    return value


def temperature(text: str) -> float:
    """A sampling temperature: 0 (greedy) or a finite number above it."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 (greedy) or a finite number above it, not {text!r}")
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


def command(parser: Callable[[], argparse.ArgumentParser]) -> Callable[[Run], Callable[[list[str]], int]]:
    """A command's ``main(argv) -> int`` from its parser and its run on the parsed arguments;
    nothing runs after ``--help`` (exit 0) or bad arguments (exit 2)."""
    def wrap(run: Run) -> Callable[[list[str]], int]:
        @functools.wraps(run)
        def main(argv: list[str]) -> int:
            args = parse(parser().parse_args, argv)
            return args if isinstance(args, int) else run(args)
        return main
    return wrap


def fail(prog: str, problem: object) -> int:
    """Report a bad input in one line on standard error; the usage error's exit status."""
    print(f"{prog}: {' '.join(str(problem).splitlines())}", file=sys.stderr)
    return EXIT_USAGE


def table(rules: str, players: int) -> RuleSet:
    """``--rules`` and ``--players`` checked together (``RulesError`` names the problem)."""
    parsed = RuleSet.parse(rules)
    parsed.check_players(players)
    return parsed


def drop_stdout() -> None:
    """After the reader of standard output left: point it at /dev/null, so that Python's flush at
    exit does not report the closed pipe again."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def count_arg(text: str) -> int:
    """argparse type: a positive whole number (of decisions, deals): 5000000, 5_000_000 or 5e6."""
    try:
        v = float(text.replace("_", ""))
    except ValueError:
        v = 0.0
    if not (v >= 1 and v.is_integer()):
        raise argparse.ArgumentTypeError(f"must be a positive whole number (5000000 or 5e6), not {text!r}")
    return int(v)


def minutes_arg(text: str) -> float:
    """argparse type: a positive number of minutes."""
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of minutes, not {text!r}")
    return v
