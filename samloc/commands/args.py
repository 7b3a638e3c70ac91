"""What the commands share: a parser whose errors are one line, the rules and player count of a
table, and a quiet end on a closed pipe."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from typing import Callable, NoReturn

from sam_env.rules import RuleSet

EXIT_USAGE = 2
EXIT_PIPE = 128 + 13  # SIGPIPE, as a shell reports a command whose reader closed the pipe
Run = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose bad input is one line, ``PROG: error: problem``, and exit 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def command(parser: Callable[[], argparse.ArgumentParser]) -> Callable[[Run], Callable[[list[str]], int]]:
    """A command's ``main(argv) -> int`` from its parser and its run on the parsed arguments;
    nothing runs after ``--help`` (exit 0) or bad arguments (exit 2)."""
    def wrap(run: Run) -> Callable[[list[str]], int]:
        @functools.wraps(run)
        def main(argv: list[str]) -> int:
            try:
                args = parser().parse_args(argv)
            except SystemExit as exc:
                return int(exc.code or 0)
            return run(args)
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
