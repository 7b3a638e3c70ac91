"""What the commands' parsers share: a parser whose usage error is one line, and number types."""

from __future__ import annotations

import argparse
from typing import NoReturn


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
