"""``samloc replay FILE [--json]`` (PROTOCOL §3)."""

from __future__ import annotations

import argparse
import json
import sys

from .record import RecordError, parse_records, replay_report


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


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="samloc replay", description=__doc__)
    ap.add_argument("file", help="a samloc/1 record, a JSON Lines file of records, or - for stdin")
    ap.add_argument("--json", action="store_true", help="print PROTOCOL §3 JSON, one line per record")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.file, "rb") as f:
                data = f.read()
    except OSError as exc:
        print(f"samloc replay: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        records = list(parse_records(data.decode("utf-8-sig")))
    except UnicodeDecodeError as exc:
        records = [RecordError(f"the input is not UTF-8 text (byte {exc.start})")]
    bad = False
    out = sys.stdout
    for rec in records:
        rep = rec.to_json() if isinstance(rec, RecordError) else replay_report(rec)
        bad |= not rep["ok"]
        out.write((json.dumps(rep, ensure_ascii=False) if args.json else _human(rep)) + "\n")
    return 1 if bad else 0
