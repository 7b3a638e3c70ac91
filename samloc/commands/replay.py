"""``samloc replay FILE [--json]`` (PROTOCOL §3).

Records are read, replayed and answered one at a time, so memory stays bounded
however large the file, and each record gets its own answer line whatever the
others hold.  Exit 0: every record good; 1: a bad record; 2: a usage error (or
the input cannot be read); 141 (like ``cat``): the reader of the output left.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import BinaryIO

from sam_env.record import answer_all, iter_records, json_line

from .args import EXIT_PIPE, Parser, command, drop_stdout, fail


def human(rep: dict) -> str:
    """One answer of PROTOCOL §3 as a line a person reads."""
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


def _open(name: str) -> contextlib.AbstractContextManager[BinaryIO]:
    """The input as bytes (``-``: standard input, left open)."""
    if name == "-":
        return contextlib.nullcontext(sys.stdin.buffer)
    return open(name, "rb")


def parser() -> Parser:
    ap = Parser(prog="samloc replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("file", help="a samloc/1 record, a JSON Lines file of records, or - for stdin")
    ap.add_argument("--json", action="store_true", help="print PROTOCOL §3 JSON, one line per record")
    return ap


@command(parser)
def main(args: argparse.Namespace) -> int:
    try:
        opened = _open(args.file)
    except OSError as exc:
        return fail("samloc replay", f"cannot read {args.file}: {exc.strerror or exc}")
    try:
        with opened as stream:
            return answer_all(iter_records(stream), sys.stdout, json_line if args.json else human)
    except BrokenPipeError:  # e.g. `samloc replay F --json | head -2`: the reader has all it wants
        drop_stdout()
        return EXIT_PIPE
    except OSError as exc:  # a read or write failing part way (a disk error, a full disk)
        return fail("samloc replay", f"stopped: {exc.strerror or exc}")
