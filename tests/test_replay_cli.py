"""``samloc replay`` reading its input (PROTOCOL §2, §3): exact event shapes, results compared
by type as well as value, JSON Lines split on ``\\n`` only with one answer per line (whatever
the other lines hold), a pretty-printed record answered once however it is broken,
streaming in bounded memory, and a quiet exit when the output's reader leaves.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sam_env.game import EVENT_FIELDS, Game, GameError
from sam_env.record import (MAX_MESSAGE, MAX_RECORD_BYTES, RecordError, answer_all, iter_records,
                            parse_records,
                            replay_report)
from samloc.commands import args as command_args

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT.parent / "shared" / "spec"


def _game(seed: int, players: int = 4, preset: str = "hoi_quan_bai", stop: int = 10**9) -> dict:
    rng = random.Random(seed)
    g = Game.new(preset, players, seed=seed)
    while not g.finished and len(g.events) < stop:
        g.apply("no_sam" if g.phase == "sam" else rng.choice(g.legal_moves()))
    return g.to_record()


RECORDS = [_game(s, 2 + s % 4, stop=10**9 if s % 3 else 12) for s in range(12)]
FINISHED = [r for r in RECORDS if "result" in r and r["events"]]
WITH_CHOPS = [r for r in (_game(s) for s in range(400)) if r.get("result", {}).get("chops")][:3]


def answers(data: bytes) -> list[dict]:
    """What ``samloc replay - --json`` answers, in process."""
    out = io.StringIO()
    rc = answer_all(parse_records(data), out)
    reps = [json.loads(line) for line in out.getvalue().split("\n")[:-1]]
    assert rc == (0 if all(r["ok"] for r in reps) else 1)
    for r in reps:
        if not r["ok"]:
            assert set(r) == {"ok", "error_at", "error"} and "\n" not in r["error"]
            assert "Traceback" not in r["error"] and len(r["error"]) <= MAX_MESSAGE
    return reps


def line(rec: object) -> bytes:
    return json.dumps(rec, ensure_ascii=False).encode()


def run_samloc(*argv: str, stdin: bytes = b"", timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "samloc", "replay", *argv], input=stdin,
                          capture_output=True, timeout=timeout, env=env)


# ---- item 7: event shapes are exact --------------------------------------------------------
@pytest.mark.parametrize("typ, field, value", [
    ("pass", "cards", ["3s"]), ("pass", "cards", []), ("pass", "declare", False),
    ("sam", "cards", ["3s"]), ("play", "declare", True), ("play", "declare", None),
])
def test_a_field_the_event_kind_does_not_have_is_refused(typ, field, value):
    for rec in RECORDS:
        i = next((i for i, e in enumerate(rec["events"]) if e["type"] == typ), None)
        if i is None:
            continue
        bad = copy.deepcopy(rec)
        bad["events"][i][field] = value
        rep = replay_report(bad)
        want = (f"event {i}: a {typ} event has no {field!r} field "
                f"(its fields are {', '.join(EVENT_FIELDS[typ])})")
        assert rep == {"ok": False, "error_at": i, "error": want}
        return
    pytest.skip(f"no {typ} event in the sample games")


@SETTINGS
@given(st.sampled_from(RECORDS), st.data())
def test_any_misplaced_field_is_refused_at_its_event(record, data):
    rec = copy.deepcopy(record)
    assume(rec["events"])
    i = data.draw(st.integers(0, len(rec["events"]) - 1))
    ev = rec["events"][i]
    field = data.draw(st.sampled_from([f for f in ("cards", "declare") if f not in ev]))
    ev[field] = data.draw(st.none() | st.booleans() | st.lists(st.sampled_from(["3s", "2h"]), max_size=2))
    rep = replay_report(rec)
    assert rep["ok"] is False and rep["error_at"] == i
    assert f"a {ev['type']} event has no {field!r} field" in rep["error"]


def test_the_shared_event_check_refuses_for_views_too():
    """Game._apply_event is what the bot server's /v1/act history goes through (Game.from_view)."""
    g = Game.new("hoi_quan_bai", 4, seed=1)
    seat, viewer = g.to_act, (g.to_act + 1) % 4
    hand = g.hand(viewer)
    ok = [{"seat": seat, "type": "sam", "declare": False}]
    assert Game.from_view("hoi_quan_bai", 4, g.opener, viewer, hand, ok).to_act == viewer
    with pytest.raises(GameError, match="event 0: a sam event has no 'cards' field"):
        Game.from_view("hoi_quan_bai", 4, g.opener, viewer, hand, [dict(ok[0], cards=[])])


# ---- item 7: a result compares types as well as values ---------------------------------------
def _as_other_type(value: object) -> object:
    """The same number as another JSON type (1 → true or 1.0; -3 → -3.0)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return True if value == 1 else (False if value == 0 else float(value))


@pytest.mark.parametrize("key", ["winner", "scores", "den", "chops"])
def test_true_for_1_or_a_float_score_is_a_wrong_result(key):
    changed = 0
    for rec in FINISHED + WITH_CHOPS:
        bad = copy.deepcopy(rec)
        res = bad["result"]
        if key == "scores":
            res["scores"] = [float(x) for x in res["scores"]]
        elif key == "chops":
            if not res["chops"]:
                continue
            res["chops"][0]["amount"] = float(res["chops"][0]["amount"])
        else:
            if _as_other_type(res[key]) is None:
                continue
            res[key] = _as_other_type(res[key])
        assert replay_report(rec)["ok"]
        rep = replay_report(bad)
        assert rep["ok"] is False and rep["error"].startswith(f"result.{key} is "), rep
        changed += 1
    assert changed or key == "den"


def test_winner_true_is_not_seat_1():
    rec = next(r for r in FINISHED if r["result"]["winner"] == 1)
    bad = copy.deepcopy(rec)
    bad["result"]["winner"] = True
    assert replay_report(bad) == {"ok": False, "error_at": None,
                                  "error": "result.winner is true but the replay gives 1"}


# ---- item 7: messages name the real problem -----------------------------------------------------
@pytest.mark.parametrize("data, message", [
    (b"", "the input is empty: expected a samloc/1 record"),
    (b"\n", "the input is empty: expected a samloc/1 record"),
    (b" \t\r\n\r\n", "the input is empty: expected a samloc/1 record"),
    (b"[" * 5000, "line 1 nests JSON arrays or objects too deeply"),
    (b'{"format": ' + b"[" * 5000 + b"]" * 5000 + b"}", "line 1 nests JSON arrays or objects too deeply"),
    (b"1" * 5000, "line 1 has a number of more than 4300 digits"),
    (b'{"format": "samloc/1", "players": ' + b"9" * 5000 + b"}",
     "line 1 has a number of more than 4300 digits"),
    (b'{"format": "samloc/1", "players": NaN}', "line 1 is not valid JSON (NaN is not a JSON number)"),
    (b'{"a": -Infinity}', "line 1 is not valid JSON (-Infinity is not a JSON number)"),
    (b'{"a": "b\n', "line 1 is not valid JSON (Unterminated string starting at column 7)"),
    (b"\xff\xfe{}", "line 1 is not UTF-8 text (byte 1 of the line)"),
    (b"\x0c", "line 1 is not valid JSON (Expecting value at column 1)"),
])
def test_a_message_names_the_problem(data, message):
    assert answers(data) == [{"ok": False, "error_at": None, "error": message}]


def test_a_deep_value_inside_a_record_is_answered():
    for depth in (200, 900, 5000):
        deep: list = []
        for _ in range(depth):
            deep = [deep]
        for key in ("format", "rules", "opener", "hands", "events", "result"):
            rec = dict(RECORDS[0], **{key: deep})
            rep = replay_report(rec)
            assert rep["ok"] is False and len(rep["error"]) <= MAX_MESSAGE, (depth, key)


def test_a_huge_value_is_not_echoed_whole():
    rec = dict(RECORDS[0], format="x" * 100_000)
    msg = replay_report(rec)["error"]
    assert msg.startswith('format must be "samloc/1", not "xxx') and len(msg) < 120
    rec = dict(RECORDS[0], hands=[["x" * 100_000] * 10] * RECORDS[0]["players"])
    assert len(replay_report(rec)["error"]) <= MAX_MESSAGE


# ---- item 11: every line gets its own answer ---------------------------------------------------
@pytest.mark.slow
def test_a_5000_digit_number_spoils_only_its_line():
    good = [line(r) for r in RECORDS[:3]]
    data = b"\n".join([good[0], b'{"format": "samloc/1", "opener": ' + b"7" * 5000 + b"}", good[1], good[2]])
    reps = answers(data)
    assert [r["ok"] for r in reps] == [True, False, True, True]
    assert reps[1]["error"] == "line 2 has a number of more than 4300 digits"
    p = run_samloc("-", "--json", stdin=data)
    assert p.returncode == 1 and p.stderr == b""
    assert [json.loads(x) for x in p.stdout.splitlines()] == reps


# ---- item 12: split on \n only, decode each line on its own -------------------------------------
@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0c", "\x1c", "\x1d", "\x1e", "\x0b"])
def test_unicode_line_breaks_do_not_split_records(sep):
    """str.splitlines() breaks on these; JSON Lines does not (raw, in a string or between tokens)."""
    raw, good = sep.encode(), line(RECORDS[1])
    in_string = line(RECORDS[0]).replace(b'"samloc/1"', b'"samloc/1' + raw + b'"', 1)
    between = line(RECORDS[0]).replace(b', "players"', b"," + raw + b' "players"', 1)
    reps = answers(b"\n".join([in_string, between, good]))
    assert len(reps) == 3 and reps[2] == replay_report(RECORDS[1])
    assert reps[1] == {"ok": False, "error_at": None, "error": reps[1]["error"]}
    assert reps[1]["error"].startswith("line 2 is not valid JSON (Expecting property name")
    if sep >= " ":  # JSON lets these stand raw in a string: a record with a wrong format
        assert reps[0] == replay_report(json.loads(in_string))
    else:  # not control characters
        assert reps[0]["error"].startswith("line 1 is not valid JSON (Invalid control character")


def test_one_bad_byte_spoils_only_its_line():
    good = [line(r) for r in RECORDS[:3]]
    data = b"\n".join([good[0], good[1].replace(b'"format"', b'"for\xffmat"'), good[2]])
    reps = answers(data)
    assert reps[0] == replay_report(RECORDS[0]) and reps[2] == replay_report(RECORDS[2])
    assert reps[1]["error"].startswith("line 2 is not UTF-8 text (byte ")


def test_crlf_bom_and_blank_lines():
    good = [line(r) for r in RECORDS[:3]]
    data = b"\xef\xbb\xbf" + b"\r\n".join([good[0], b"", b"  \t", good[1], good[2]]) + b"\r\n\r\n"
    assert answers(data) == [replay_report(r) for r in RECORDS[:3]]
    reps = answers(b"\n".join([good[0], b"nope", good[1]]))
    assert reps[1]["error"] == "line 2 is not valid JSON (Expecting value at column 1)"


def test_a_line_over_the_limit_is_refused_unread():
    good = line(RECORDS[0])
    huge = b'{"format": "' + b"x" * (MAX_RECORD_BYTES + 10) + b'"}'
    reps = answers(b"\n".join([good, huge, good]))
    assert [r["ok"] for r in reps] == [True, False, True]
    assert reps[1]["error"] == "line 2 is over 1 MiB: no samloc/1 record is that long"


@pytest.mark.parametrize("argv", [["/dev/zero", "--json"], ["-", "--json"]])
def test_an_endless_line_is_answered_and_the_input_given_up(argv):
    """/dev/zero has no end of line to skip to: named as a file it was read for ever, unanswered."""
    stdin = None if argv[0] != "-" else open("/dev/zero", "rb")
    try:
        p = subprocess.run([sys.executable, "-m", "samloc", "replay", *argv], stdin=stdin,
                           capture_output=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                           timeout=300)
    finally:
        if stdin is not None:
            stdin.close()
    assert p.returncode == 1, p.stderr
    out = p.stdout.decode().splitlines()
    assert [json.loads(x)["error"] for x in out] == [
        "line 1 is over 1 MiB and has not ended after 64 MiB: no samloc/1 record is that long;"
        " the rest of the input is not read"]


LINE = st.one_of(
    st.sampled_from(RECORDS).map(line),                                   # a record
    st.sampled_from(RECORDS).flatmap(lambda r: st.integers(1, len(line(r)) - 1).map(lambda k: line(r)[:k])),
    st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass")),  # any text, U+2028 and all
    st.binary(max_size=30),                                               # any bytes
    st.sampled_from([b"", b" ", b"\r", b"[" * 3000, b"9" * 4400, b"NaN", b"{}", b"\xef\xbb\xbf{}"]),
).map(lambda b: b.replace(b"\n", b" "))


def _expected(k: int, raw: bytes) -> dict | None:
    """The answer to line ``k`` of JSON Lines, worked out on its own (None: a blank line)."""
    raw = raw.removesuffix(b"\r")
    if not raw.strip(b" \t\r"):
        return None
    try:
        return replay_report(json.loads(raw.decode("utf-8")))
    except (ValueError, RecursionError):
        return {"line": k}


@SETTINGS
@given(st.lists(LINE, min_size=1, max_size=8), st.sampled_from([b"\n", b"\r\n"]), st.booleans())
def test_json_lines_get_one_answer_per_line(lines, eol, final_eol):
    first = line(RECORDS[0])  # a whole first line: the input is JSON Lines
    data = eol.join([first, *lines]) + (eol if final_eol else b"")
    want = [w for k, raw in enumerate([first, *lines], 1) if (w := _expected(k, raw)) is not None]
    got = answers(data)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        if "line" in w:
            assert g["ok"] is False and g["error"].startswith(f"line {w['line']} "), (w, g)
        elif w != g:  # NaN & co: Python's json reads them, samloc/1 (JSON) does not
            assert g["ok"] is False and "is not a JSON number" in g["error"]


@SETTINGS
@given(st.sampled_from(RECORDS), st.data(), st.lists(st.sampled_from(RECORDS), min_size=1, max_size=4))
def test_a_cut_short_first_line_spoils_only_itself(record, data, rest):
    text = line(record)
    cut = text[:data.draw(st.integers(1, len(text) - 1))]
    reps = answers(b"\n".join([cut, *map(line, rest)]))
    assert len(reps) == 1 + len(rest)
    assert reps[0]["ok"] is False and reps[0]["error"].startswith("line 1 ")
    assert reps[1:] == [replay_report(r) for r in rest]


# ---- item 12: a record spread over lines (pretty-printed) ---------------------------------------
def _pretty(rec: dict, indent: int) -> bytes:
    return json.dumps(rec, indent=indent, ensure_ascii=False).encode()


def test_the_protocol_example_pretty_printed_replays():
    text = (ROOT / "docs" / "spec" / "PROTOCOL.md").read_text(encoding="utf-8")
    start = text.index('```json\n{\n  "format"') + len("```json\n")
    doc = text[start:text.index("```", start)].encode()
    assert answers(doc) == [replay_report(json.loads(doc))]
    assert answers(doc)[0]["ok"] is True


@SETTINGS
@given(st.sampled_from(RECORDS), st.integers(1, 4), st.sampled_from([b"\n", b"\r\n"]))
def test_a_pretty_printed_record_is_one_record(record, indent, eol):
    doc = _pretty(record, indent).replace(b"\n", eol)
    assert answers(doc + eol) == [replay_report(record)]


@SETTINGS
@given(st.sampled_from(RECORDS), st.integers(1, 4), st.data())
def test_a_cut_short_pretty_printed_record_is_one_error(record, indent, data):
    doc = _pretty(record, indent)
    cut = doc[:data.draw(st.integers(1, len(doc) - 1))]
    assume(cut.strip())
    reps = answers(cut)
    assert len(reps) == 1 and reps[0]["ok"] is False
    assert reps[0]["error"].startswith(("line 1 ", "the record that begins on line 1 "))


@SETTINGS
@given(st.sampled_from(RECORDS), st.integers(1, 4), st.data())
def test_a_broken_pretty_printed_record_is_one_error(record, indent, data):
    lines = _pretty(record, indent).split(b"\n")
    k = data.draw(st.integers(1, len(lines) - 2))
    how = data.draw(st.sampled_from(["drop", "byte", "garble"]))
    if how == "drop":
        del lines[k]
    else:
        lines[k] = lines[k] + (b"\xff" if how == "byte" else b" }{")
    reps = answers(b"\n".join(lines))
    assert len(reps) == 1  # (dropping a line such as "den": null, leaves a good record)
    assert reps[0]["ok"] is False or how == "drop"
    if how == "byte":
        assert reps[0]["error"] == (f"the record that begins on line 1: line {k + 1} is not UTF-8 text"
                                    f" (byte {len(lines[k])} of the line)")


def test_spread_records_in_a_row_are_one_error():
    doc = _pretty(RECORDS[0], 2)
    n = doc.count(b"\n") + 1
    assert answers(doc + b"\n" + doc) == [{"ok": False, "error_at": None, "error":
        f"the record that begins on line 1 is followed by more at line {n + 1}: several records go"
        " one per line (JSON Lines)"}]


def test_a_cut_short_pretty_record_then_json_lines():
    doc = _pretty(RECORDS[0], 2).split(b"\n")
    cut = b"\n".join(doc[:len(doc) // 2])
    reps = answers(b"\n".join([cut, line(RECORDS[1]), line(RECORDS[2])]))
    assert reps[0]["ok"] is False
    assert reps[0]["error"].startswith("the record that begins on line 1 is cut short")
    assert reps[1:] == [replay_report(RECORDS[1]), replay_report(RECORDS[2])]


def test_a_spread_record_over_the_limit_is_refused():
    doc = b'{"format":\n' + b" \n" * (MAX_RECORD_BYTES // 2 + 10) + b'"samloc/1"}'
    (rep,) = answers(doc)
    assert rep["error"].startswith("the record that begins on line 1: line 52")
    assert rep["error"].endswith(" takes it over 1 MiB: no samloc/1 record is that long")


# ---- item 13: streaming ----------------------------------------------------------------------------
class _Source(io.RawIOBase):
    """An endless input that counts what was read; output lines are checked as they come."""

    def __init__(self, record: bytes, count: int):
        self.chunk, self.left, self.read_bytes, self.pending = record + b"\n", count, 0, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        if not self.pending and self.left:
            self.left -= 1
            self.pending = self.chunk
        n = min(len(b), len(self.pending))
        b[:n], self.pending = self.pending[:n], self.pending[n:]
        self.read_bytes += n
        return n


class _Probe(io.StringIO):
    def __init__(self, source: _Source):
        super().__init__()
        self.source, self.lines, self.lag = source, 0, 0

    def write(self, s: str) -> int:
        self.lines += s.count("\n")
        self.lag = max(self.lag, self.source.read_bytes - self.lines * len(self.source.chunk))
        return len(s)


def test_records_are_answered_as_they_are_read():
    rec = line(RECORDS[0])
    src = _Source(rec, 300)
    probe = _Probe(src)
    assert answer_all(iter_records(io.BufferedReader(src, buffer_size=1 << 16)), probe) == 0
    assert probe.lines == 300
    assert probe.lag <= (1 << 16) + 2 * len(src.chunk)  # never more than one read buffer ahead


@pytest.mark.slow
def test_a_large_input_runs_in_bounded_memory(tmp_path):
    """20 MiB of JSON Lines through the real command: the peak RSS does not grow with the file."""
    rec = line(RECORDS[0]) + b"\n"
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_bytes(rec * 10)
    with open(big, "wb") as f:
        for _ in range(20):
            f.write(rec * ((1 << 20) // len(rec)))
    code = ("import resource, sys; from samloc.cli import main;"
            " rc = main(['replay', sys.argv[1], '--json']); sys.stdout.flush();"
            " print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(rc)")

    def peak_kib(path: Path) -> int:
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
        p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, env=env, timeout=900)
        assert p.returncode == 0, p.stderr[-2000:]
        return int(p.stderr.split()[-1])

    grown = peak_kib(big) - peak_kib(small)
    assert grown < 30 * 1024, f"peak RSS grew by {grown} KiB for a {big.stat().st_size >> 20} MiB file"


# ---- item 14: the output's reader leaves -------------------------------------------------------
def test_a_closed_output_pipe_exits_quietly(tmp_path):
    f = tmp_path / "many.jsonl"
    f.write_bytes(b"\n".join(line(RECORDS[i % len(RECORDS)]) for i in range(3000)) + b"\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = f"{sys.executable} -m samloc replay {f} --json | head -2; echo \"${{PIPESTATUS[0]}}\""
    p = subprocess.run(cmd, shell=True, executable="/bin/bash", capture_output=True, env=env, timeout=300)
    out = p.stdout.decode().splitlines()
    assert p.stderr == b"", p.stderr.decode()[-2000:]
    assert len(out) == 3 and all(json.loads(x)["ok"] in (True, False) for x in out[:2])
    assert out[2] == str(command_args.EXIT_PIPE)


def test_a_closed_output_pipe_with_little_output_exits_quietly():
    """The last answers sit in the output buffer when the reader leaves: the flush must not complain."""
    r, w = os.pipe()
    os.close(r)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "samloc", "replay", "-", "--json"],
                       input=line(RECORDS[0]), stdout=w, stderr=subprocess.PIPE, env=env, timeout=120)
    os.close(w)
    assert p.stderr == b"" and p.returncode == command_args.EXIT_PIPE


# ---- exit codes and usage --------------------------------------------------------------------------
@pytest.mark.parametrize("argv, stdin, code", [
    (["-", "--json"], b"", 1),
    (["-"], b"{}\n", 1),
    ([], b"", 2),
    (["/no/such/file.jsonl"], b"", 2),
    (["/"], b"", 2),
])
def test_exit_codes(argv, stdin, code):
    p = run_samloc(*argv, stdin=stdin)
    assert p.returncode == code and b"Traceback" not in p.stdout + p.stderr


@pytest.mark.slow
def test_good_records_from_a_file_and_from_stdin(tmp_path):
    f = tmp_path / "good.jsonl"
    data = b"\n".join(line(r) for r in RECORDS) + b"\n"
    f.write_bytes(data)
    want = [replay_report(r) for r in RECORDS]
    for p in (run_samloc(str(f), "--json"), run_samloc("-", "--json", stdin=data)):
        assert p.returncode == 0 and p.stderr == b""
        assert [json.loads(x) for x in p.stdout.splitlines()] == want
    human = run_samloc(str(f))
    assert human.returncode == 0 and len(human.stdout.splitlines()) == len(RECORDS)


def test_the_worked_examples_as_one_file():
    """The records of examples.jsonl as one JSON Lines input: one answer each, as expected."""
    text = (SPEC / "examples.jsonl").read_text(encoding="utf-8")
    exs = [json.loads(x) for x in text.split("\n") if x.strip()]
    data = b"\n".join(line(e["record"]) for e in exs)
    got = answers(data)
    assert len(got) == len(exs)
    for e, g in zip(exs, got):
        if "legal" in g:
            g["legal"], e["expected"]["legal"] = sorted(g["legal"]), sorted(e["expected"]["legal"])
        assert g == e["expected"], e["name"]


def test_record_error_is_one_readable_line():
    e = RecordError("a\nb\u2028c" + "x" * 100_000)
    assert "\n" not in str(e) and len(str(e)) == MAX_MESSAGE and str(e).startswith("a b c")


@pytest.mark.parametrize("argv", [["rules"], ["rules", "online"]])
def test_samloc_rules_into_a_closed_pipe_exits_quietly(argv):
    r, w = os.pipe()
    os.close(r)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "samloc", *argv], stdout=w, stderr=subprocess.PIPE,
                       env=env, timeout=120)
    os.close(w)
    assert p.stderr == b"" and p.returncode == command_args.EXIT_PIPE


@pytest.mark.parametrize("argv", [["replay"], ["rules", "nope"], ["rules", "online", "--set", "x"],
                                  ["demo", "--games", "x"], ["demo", "--players", "9"],
                                  ["bench", "--rules", "bad"],
                                  ["bench", "--games", "0"]])
def test_the_engines_commands_answer_bad_input_in_one_line(argv, capsys):
    from samloc.cli import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"samloc {argv[0]}: "), err
