"""``samloc replay FILE [--json]`` (PROTOCOL §3).

Records are read, replayed and answered one at a time, so memory stays bounded
however large the file, and each record gets its own answer line whatever the
others hold.  Exit 0: every record good; 1: a bad record; 2: a usage error (or
the input cannot be read); 141 (like ``cat``): the reader of the output left.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import IO, BinaryIO, Callable, Iterable

from .record import RecordError, iter_records, replay_report

EXIT_PIPE = 128 + 13  # SIGPIPE, as a shell reports a command whose reader closed the pipe


def _human(rep: dict) -> str:
    if not rep["ok"]:
        where = "" if rep["error_at"] is None else f" (event {rep['error_at']})"
        return f"bad record{where}: {rep['error']}"
    if rep["finished"]:
        r = rep["result"]
        who = "" if r["winner"] is None else f", winner seat {r['winner']}"
        extra = "".join(f", {k} {r[k]}" for k in ("instant", "den") if r[k] is not None)
        chops = "".join(f", chop {c['from']}→{c['to']} {c['amount']} lá" for c in r["chops"])
        return f"finished: {r['end']}{who}{extra}{chops}; scores {r['scores']}"
    return (f"unfinished: seat {rep['to_act']} to act ({rep['phase']}); legal: "
            + " ".join(rep["legal"]))


def _as_json(rep: dict) -> str:
    return json.dumps(rep, ensure_ascii=False)


def answer_all(records: Iterable[object], out: IO[str], show: Callable[[dict], str] = _as_json) -> int:
    """Replay and answer each record as it comes (one output line each); the exit status."""
    bad = False
    for rec in records:
        rep = rec.to_json() if isinstance(rec, RecordError) else replay_report(rec)
        bad |= not rep["ok"]
        out.write(show(rep) + "\n")
    out.flush()  # here, not at exit: a closed pipe must raise where it is handled
    return 1 if bad else 0


def _open(name: str) -> contextlib.AbstractContextManager[BinaryIO]:
    """The input as bytes (``-``: standard input, left open)."""
    if name == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    return open(name, "rb")


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so that Python's flush at exit does not
    report the closed pipe again."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="samloc replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="a samloc/1 record, a JSON Lines file of records, or - for stdin")
    ap.add_argument("--json", action="store_true", help="print PROTOCOL §3 JSON, one line per record")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        opened = _open(args.file)
    except OSError as exc:
        print(f"samloc replay: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        with opened as stream:
            return answer_all(iter_records(stream), sys.stdout, _as_json if args.json else _human)
    except BrokenPipeError:  # e.g. `samloc replay F --json | head -2`: the reader has all it wants
        _drop_stdout()
        return EXIT_PIPE
    except OSError as exc:  # a read or write failing part way (a disk error, a full disk)
        print(f"samloc replay: stopped: {exc.strerror or exc}", file=sys.stderr)
        return 2
