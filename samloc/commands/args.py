"""What the commands share: a parser whose usage error is one line (exit 2), argument types, the
tables (rule set, players) a command is asked for, and a quiet end on a closed pipe."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import sys
from typing import Callable, NoReturn

from sam_env.cards import DEFAULT_PLAYERS
from sam_env.rules import DEFAULT_PRESET, RuleSet, RulesError
from sam_env.table import Table, preset_tables

EXIT_USAGE = 2
EXIT_PIPE = 128 + 13  # SIGPIPE, as a shell reports a command whose reader closed the pipe
Run = Callable[[argparse.Namespace], int]


#: Sphinx's roles in a docstring (``:func:`~a.b```, ``:mod:`a```): the help shows the name alone.
_ROLE = re.compile(r":(?:\w+:)?\w+:`(~?)([^`]+)`")


def plain_text(text: str) -> str:
    """A docstring as help text: Sphinx's markup dropped (``:mod:`a.b``` → a.b, ``:func:`~a.b``` → b,
    double backquotes removed)."""
    text = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), text)
    return text.replace("``", "")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage error is one line naming the problem (``PROG: message``), exit 2, and
    whose help shows docstrings without their Sphinx markup (:func:`plain_text`)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n")

    def format_help(self) -> str:
        return plain_text(super().format_help())


def parse(parse_args: Callable[[list[str]], argparse.Namespace], argv: list[str]) -> argparse.Namespace | int:
    """``parse_args(argv)`` (a parser's ``parse_args`` or ``parse_intermixed_args``), or the exit status where
    parsing ended the command: 0 after ``--help``, 2 after a usage error (its one line printed)."""
    try:
        return parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


#: The largest integer the code takes: seeds and counts are held in 64 bits (numpy, torch).
INT64_MAX = 2**63 - 1
#: Path limits of the file systems Linux mounts: one component, and the whole path.
NAME_MAX, PATH_MAX = 255, 4096


def _shown(text: str) -> str:
    """``text`` as a message quotes it: at most 40 characters."""
    return repr(text if len(text) <= 40 else text[:37] + "...")


def integer(low: int, high: int = INT64_MAX) -> Callable[[str], int]:
    """argparse type: a whole number from ``low`` to ``high`` (one line naming the range otherwise)."""
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # also a number of over 4,300 digits
            raise argparse.ArgumentTypeError(f"must be a whole number, not {_shown(text)}") from None
        top = f"2**63 - {2**63 - high}" if high > 2**62 else f"{high:,}"
        if low <= value <= high:
            return value
        shown = str(value) if len(str(value)) <= 40 else str(value)[:37] + "..."
        if high == INT64_MAX and value < low:
            raise argparse.ArgumentTypeError(f"must be {low:,} or more, not {shown}")
        raise argparse.ArgumentTypeError(f"must be from {low:,} to {top}, not {shown}")
    check.__name__ = "integer"
    return check


#: An integer of 1 or more (workers, counts); of 0 or more (a seed; a time bound where 0 means none).
positive = integer(1)
non_negative = integer(0)
#: Players at a table: up to 99 here; the rule set checks the rest (``table``: its message names its range).
players = integer(0, 99)
#: A time bound in milliseconds: 0 (none) up to a day.
deadline_ms = integer(0, 86_400_000)
#: The seed of held-out deals (the code adds 1 to it).
eval_seed = integer(0, INT64_MAX - 1)


def positive_list(text: str) -> list[int]:
    """A comma-separated list of integers of 1 or more (``1,4,16,50``)."""
    try:
        values = [positive(v) for v in text.split(",") if v.strip()]
    except argparse.ArgumentTypeError:
        values = []
    if not values:
        raise argparse.ArgumentTypeError("must be integers of 1 or more, separated by commas,"
                                         f" not {_shown(text)}")
    return values


def seed_list(text: str) -> list[int]:
    """Seeds for --seeds: distinct integers from 0 to 2**63 - 1 (as ``seed=``), comma-separated."""
    try:
        seeds = [non_negative(part) for part in text.split(",")]
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"seeds like 0,1,2: each {exc}") from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"a seed given twice in {text!r}")
    return seeds


def port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {_shown(text)}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, not {_shown(str(value))[1:-1]}")
    return value


def nonempty(text: str) -> str:
    """argparse type: a name (a rule preset, an agent spec): not empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def path(text: str) -> str:
    """argparse type: a path this machine can hold: not empty, no NUL character, each component at most
    255 bytes and the whole at most 4,096 (what the file target is, the writing function checks)."""
    if not text:
        raise argparse.ArgumentTypeError("must be a path, not empty")
    if "\0" in text:
        raise argparse.ArgumentTypeError("a path holds no NUL character")
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:  # a lone surrogate (never from a command line: from a caller's str)
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a path this machine can encode") from None
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        raise argparse.ArgumentTypeError(f"a path's component is at most {NAME_MAX} bytes,"
                                         f" not {len(longest):,} ({_shown(os.fsdecode(longest))})")
    if len(raw) > PATH_MAX:
        raise argparse.ArgumentTypeError(f"a path is at most {PATH_MAX:,} bytes, not {len(raw):,}")
    return text


def agent_spec(text: str) -> str:
    """argparse type: an agent spec (``heuristic``, a checkpoint folder, ``x.onnx``, ``http://…``): not
    empty, and of a path's shape (:func:`path`), as a file or folder it names must be; the registry reads the
    rest."""
    return path(nonempty(text))


def temperature(text: str) -> float:
    """A sampling temperature: 0 (greedy) or a finite number above it."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("must be 0 (greedy) or a finite number above it,"
                                         f" not {_shown(text)}")
    return value


def parse_tables(tables: str | None, rules: str | None, players: str | None) -> list[Table] | None:
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
        counts = [int(p) for p in (players or str(DEFAULT_PLAYERS)).split(",") if p.strip()]
    except ValueError:
        raise RulesError(f"--players must be a number or a comma-separated list, not {players!r}") from None
    if not names or not counts:
        raise RulesError("--rules and --players need at least one value each")
    sets = [RuleSet.parse(r) for r in names]
    if len(counts) == 1:
        return [Table(rs, counts[0]) for rs in sets]
    out = [Table(rs, p) for rs in sets for p in counts if p in rs.player_counts]
    if not out:
        raise RulesError(f"no table of {', '.join(names)} allows {players} players")
    return out


def _named_tables(tables: str) -> list[Table]:
    """``--tables``: ``all`` (every preset at every player count it allows) or ``RULES/PLAYERS,...``."""
    if tables.strip() == "all":
        return preset_tables()
    out = []
    for item in (t.strip() for t in tables.split(",") if t.strip()):
        try:
            out.append(Table.parse(item))
        except RulesError as exc:
            raise RulesError(f"--tables: {exc}") from None
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


def table(rules: str, players: int) -> Table:
    """The table of ``--rules`` and ``--players``, checked together (``RulesError`` names the problem)."""
    return Table(RuleSet.parse(rules), players)


def drop_stdout() -> None:
    """After the reader of standard output left: point it at /dev/null, so that Python's flush at
    exit does not report the closed pipe again."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def count_arg(text: str) -> int:
    """argparse type: a positive whole number (of decisions, deals) of at most 2**53 (exact as a float):
    5000000, 5_000_000 or 5e6."""
    try:
        v = float(text.replace("_", ""))
    except ValueError:
        v = 0.0
    if not (1 <= v <= 2**53 and v.is_integer()):
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 2**53 (5000000 or 5e6),"
                                         f" not {_shown(text)}")
    return int(v)


#: The most minutes a time budget takes (about 1,900 years: a typo, not a plan).
MAX_MINUTES = 1e9


def minutes_arg(text: str) -> float:
    """argparse type: a positive number of minutes."""
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not 0 < v:  # nan too
        raise argparse.ArgumentTypeError(f"must be a positive number of minutes, not {_shown(text)}")
    if v > MAX_MINUTES:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_MINUTES:g} minutes, not {_shown(text)}")
    return v
