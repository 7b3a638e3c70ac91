"""What the commands' parsers share: a parser whose error is one line (exit 2), and argument types."""

from __future__ import annotations

import argparse
import sys
from typing import Callable


class UsageError(ValueError):
    """A command line that cannot be run (one line, exit 2)."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise :class:`UsageError` (one line) instead of printing its usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


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


def parsed(prog: str, parse: Callable[[list[str]], argparse.Namespace],
           argv: list[str]) -> argparse.Namespace | int:
    """``parse(argv)``, or the exit code instead: 0 after ``--help``, 2 after a bad command line (its one
    line printed as ``prog: problem``)."""
    try:
        return parse(argv)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
