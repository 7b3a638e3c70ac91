"""What the commands share: a parser whose errors are one line, and a quiet end on a closed pipe."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import NoReturn

EXIT_USAGE = 2
EXIT_PIPE = 128 + 13  # SIGPIPE, as a shell reports a command whose reader closed the pipe


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose bad input is one line, ``PROG: error: problem``, and exit 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit status when there is nothing to run (``--help``: 0, bad: 2)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def drop_stdout() -> None:
    """After the reader of standard output left: point it at /dev/null, so that Python's flush at
    exit does not report the closed pipe again."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
