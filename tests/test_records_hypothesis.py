"""Property tests for parsing and records: malformed input of every kind gets
the clear PROTOCOL §3 error — ``{"ok": false, "error_at": ..., "error": ...}``
— and never an exception; ``samloc replay`` exits 1 (bad record) or 2 (usage)
with one line and no traceback.  Cards and move strings round trip.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sam_env.actions import ACTION_NAMES, NUM_ACTIONS, move_str, parse_move
from sam_env.cards import CardError, card_str, parse_card
from sam_env.game import Game
from sam_env.record import replay, replay_report
from sam_env.rules import PRESET_NAMES, RuleSet
from samloc.commands import replay as replay_cli

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12)


def _records() -> list[dict]:
    """Finished and unfinished records of seeded random games, every preset."""
    out = []
    for i, preset in enumerate(PRESET_NAMES * 3):
        rng = random.Random(i)
        g = Game.new(preset, 2 + i % 3, seed=i)
        stop = rng.randrange(200) if i % 3 == 2 else 10**9  # every third game stops early
        while not g.finished and len(g.events) < stop:
            g.apply("no_sam" if g.phase == "sam" else rng.choice(g.legal_moves()))
        out.append(g.to_record())
    return out


RECORDS = _records()
FINISHED = [r for r in RECORDS if "result" in r and r["events"]]


def assert_bad(rep: dict, error_at: object = "any") -> str:
    """The PROTOCOL §3 shape of a bad record; returns its message."""
    assert rep["ok"] is False and set(rep) == {"ok", "error_at", "error"}, rep
    assert rep["error_at"] is None or isinstance(rep["error_at"], int)
    if error_at != "any":
        assert rep["error_at"] == error_at, rep
    msg = rep["error"]
    assert isinstance(msg, str) and msg and "\n" not in msg and "Traceback" not in msg
    json.dumps(rep)  # always serialisable
    return msg


def assert_well_formed(rep: dict, record: object) -> None:
    if rep["ok"]:
        assert rep["finished"] in (True, False)
        if not rep["finished"]:
            assert rep["legal"] and isinstance(rep["to_act"], int)
    else:
        msg = assert_bad(rep)
        events = record.get("events") if isinstance(record, dict) else None
        if rep["error_at"] is not None:
            assert isinstance(events, list) and 0 <= rep["error_at"] < len(events)
            assert msg.startswith(f"event {rep['error_at']}: ")


# ---- anything at all ---------------------------------------------------------------------
@SETTINGS
@given(JSON)
def test_any_json_value_is_answered(value):
    assert_well_formed(replay_report(value), value)


@SETTINGS
@given(st.sampled_from(RECORDS), st.data())
def test_any_field_of_any_type_is_answered(record, data):
    rec = copy.deepcopy(record)
    key = data.draw(st.sampled_from(sorted(rec) + ["extra"]))
    rec[key] = data.draw(JSON)
    rep = replay_report(rec)
    assert_well_formed(rep, rec)
    if key == "extra":
        assert "unknown record field" in assert_bad(rep)


@SETTINGS
@given(st.sampled_from(RECORDS), st.data())
def test_any_event_value_is_answered(record, data):
    rec = copy.deepcopy(record)
    assume(rec["events"])
    i = data.draw(st.integers(0, len(rec["events"]) - 1))
    ev = data.draw(JSON | st.fixed_dictionaries(
        {"seat": st.integers(-1, 5) | JSON, "type": st.sampled_from(["sam", "pass", "play", "x"]) | JSON},
        optional={"cards": st.lists(st.text(max_size=3) | st.sampled_from([card_str(c) for c in range(52)]),
                                    max_size=4) | JSON, "declare": st.booleans() | JSON}))
    rec["events"][i] = ev
    rep = replay_report(rec)
    assert_well_formed(rep, rec)
    if not rep["ok"] and rep["error_at"] is not None:
        assert rep["error_at"] >= i  # the events before it are the original, legal ones


# ---- each kind of malformed record ----------------------------------------------------------
@SETTINGS
@given(st.sampled_from(RECORDS), st.data())
def test_unknown_card(record, data):
    bad = data.draw(st.text(max_size=4))
    with contextlib.suppress(CardError):
        parse_card(bad)
        assume(False)
    rec = copy.deepcopy(record)
    s = data.draw(st.integers(0, rec["players"] - 1))
    rec["hands"][s][data.draw(st.integers(0, 9))] = bad
    assert "unknown card" in assert_bad(replay_report(rec), None)


@SETTINGS
@given(st.sampled_from(RECORDS), st.data())
def test_card_dealt_twice(record, data):
    rec = copy.deepcopy(record)
    n = rec["players"]
    s, t = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    i, j = data.draw(st.integers(0, 9)), data.draw(st.integers(0, 9))
    assume((s, i) != (t, j))
    rec["hands"][s][i] = rec["hands"][t][j]
    assert "twice" in assert_bad(replay_report(rec), None)


@SETTINGS
@given(st.sampled_from(RECORDS), st.data())
def test_wrong_hand_size(record, data):
    rec = copy.deepcopy(record)
    s = data.draw(st.integers(0, rec["players"] - 1))
    if data.draw(st.booleans()):
        del rec["hands"][s][data.draw(st.integers(0, 9))]
    else:
        used = {c for h in rec["hands"] for c in h}
        rec["hands"][s].append(data.draw(st.sampled_from(sorted({card_str(c) for c in range(52)} - used))))
    assert "cards; a hand has 10" in assert_bad(replay_report(rec), None)


@SETTINGS
@given(st.sampled_from(RECORDS), st.text(max_size=12), st.text(max_size=12), JSON)
def test_unknown_preset_or_parameter(record, name, param, value):
    known = {"preset"} | set(RuleSet().to_dict())
    rec = copy.deepcopy(record)
    if name in PRESET_NAMES:
        rec["rules"] = {"preset": record["rules"] if isinstance(record["rules"], str) else "online"}
        assume(param not in known)
        rec["rules"][param] = value
        assert "unknown rule parameter" in assert_bad(replay_report(rec), None)
    else:
        rec["rules"] = name if param == "" else {"preset": name}
        assert "preset" in assert_bad(replay_report(rec), None)


@SETTINGS
@given(st.sampled_from(RECORDS), st.data())
def test_wrong_players_or_opener(record, data):
    rec = copy.deepcopy(record)
    key = data.draw(st.sampled_from(["players", "opener"]))
    rec[key] = data.draw(st.integers(-3, 9).filter(lambda v: not 0 <= v < 6)
                         | st.sampled_from([True, "2", 2.0]))
    if key == "players" and rec[key] in range(2, 6):
        return
    assert_bad(replay_report(rec), None)


@SETTINGS
@given(st.sampled_from(RECORDS), st.data())
def test_illegal_event_is_named_by_its_index(record, data):
    """An event by the wrong seat, or playing cards the seat does not hold."""
    rec = copy.deepcopy(record)
    assume(rec["events"])
    i = data.draw(st.integers(0, len(rec["events"]) - 1))
    g = replay({**rec, "events": rec["events"][:i], "result": None})
    n, seat = g.players, g.to_act
    if data.draw(st.booleans()):
        other = (seat + data.draw(st.integers(1, n - 1))) % n
        ev = dict(rec["events"][i], seat=other)
        want = f"it is seat {seat}'s turn"
    else:
        foreign = [c for s in range(n) if s != seat for c in g.hand(s)]
        ev = {"seat": seat, "type": "play", "cards": [card_str(data.draw(st.sampled_from(foreign)))]}
        want = "does not hold"
    rec["events"] = rec["events"][:i] + [ev]
    rec.pop("result", None)
    assert want in assert_bad(replay_report(rec), i)


@SETTINGS
@given(st.sampled_from(FINISHED), st.sampled_from(["pass", "sam", "play"]), st.integers(0, 4))
def test_events_after_the_end(record, typ, seat):
    rec = copy.deepcopy(record)
    ev = {"seat": seat % rec["players"], "type": typ}
    if typ == "sam":
        ev["declare"] = False
    if typ == "play":
        ev["cards"] = rec["hands"][ev["seat"]][:1]
    rec["events"].append(ev)
    assert "already over" in assert_bad(replay_report(rec), len(rec["events"]) - 1)


@SETTINGS
@given(st.sampled_from(FINISHED), st.data())
def test_truncated_record(record, data):
    rec = copy.deepcopy(record)
    cut = data.draw(st.integers(0, len(rec["events"]) - 1))
    rec["events"] = rec["events"][:cut]
    assert "not finished" in assert_bad(replay_report(rec), None)  # its result claims an end
    del rec["result"]
    rep = replay_report(rec)
    assert rep["ok"] and not rep["finished"] and rep["legal"]


@SETTINGS
@given(st.sampled_from(FINISHED), st.data())
def test_a_wrong_result_is_a_bad_record(record, data):
    rec = copy.deepcopy(record)
    key = data.draw(st.sampled_from(["end", "winner", "scores", "instant", "den", "chops"]))
    value = data.draw(JSON)
    assume(value != rec["result"][key])
    rec["result"][key] = value
    assert f"result.{key}" in assert_bad(replay_report(rec), None)


@SETTINGS
@given(st.sampled_from(RECORDS), st.sampled_from(["format", "rules", "players", "opener", "hands", "events"]))
def test_missing_field(record, key):
    rec = copy.deepcopy(record)
    del rec[key]
    assert_bad(replay_report(rec), None)


# ---- the command line -------------------------------------------------------------------
def _run_cli(argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = replay_cli.main(argv)
    finally:
        sys.stdin = old
    return rc, out.getvalue(), err.getvalue()


def _check_cli(rc: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err
    if rc == 1:  # bad records: one JSON answer per record, at least one bad
        lines = out.splitlines()
        reps = [json.loads(line) for line in lines]
        assert reps and not all(r["ok"] for r in reps)
        for r in reps:
            if not r["ok"]:
                assert_bad(r)
    else:
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, (rc, out, err)


@SETTINGS
@given(st.binary(max_size=300))
def test_garbage_bytes_on_stdin(data):
    _check_cli(*_run_cli(["-", "--json"], data))


@SETTINGS
@given(st.text(max_size=300) | JSON.map(json.dumps))
def test_garbage_text_on_stdin(text):
    _check_cli(*_run_cli(["-", "--json"], text.encode("utf-8", "surrogatepass")))


@SETTINGS
@given(st.lists(st.sampled_from(RECORDS) | JSON, min_size=1, max_size=4))
def test_json_lines_answer_each_record_in_order(items):
    text = "\n".join(json.dumps(x) for x in items)
    rc, out, err = _run_cli(["-", "--json"], text.encode())
    reps = [json.loads(line) for line in out.split("\n")[:-1]]
    assert len(reps) == len(items)
    for n, (x, r) in enumerate(zip(items, reps), 1):
        if _is_json(x):
            assert r == replay_report(x)
        else:  # Python writes NaN and Infinity, which JSON (so samloc/1) does not have
            assert r == {"ok": False, "error_at": None, "error": r["error"]}
            assert r["error"].startswith(f"line {n} is not valid JSON (")
            assert "is not a JSON number" in r["error"]
    assert rc == (0 if all(r["ok"] for r in reps) else 1) and err == ""


def _is_json(value: object) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("argv, stdin, code", [
    (["-", "--json"], b"\xff\xfe not utf-8 \x00", None),
    (["-", "--json"], b"[" * 50_000, 1),
    (["-", "--json"], b'{"format": "samloc/1"}', 1),
    (["-"], b"{}\n[]\n", 1),
    ([], b"", 2),
    (["--no-such-flag", "-"], b"", 2),
    (["/no/such/file.jsonl"], b"", 2),
])
def test_samloc_replay_command(argv, stdin, code):
    """The installed command: exit status, one line, never a traceback."""
    p = subprocess.run([sys.executable, "-m", "samloc", "replay", *argv], input=stdin,
                       capture_output=True, timeout=120)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    assert "Traceback" not in out + err
    assert p.returncode in ((1, 2) if code is None else (code,))
    if p.returncode == 1:
        assert err == "" and all(line for line in out.splitlines())
    else:
        assert out == "" and len(err.strip().splitlines()) >= 1
        assert "error" in err.lower() or "cannot" in err or "usage" in err.lower() or "argument" in err


# ---- cards and moves as text -----------------------------------------------------------------
def test_every_card_round_trips():
    for c in range(52):
        text = card_str(c)
        assert parse_card(text) == c
        assert parse_card(text.lower()) == c and parse_card(f" {text.upper()} ") == c
        sym = text[:-1].replace("T", "10") + "♣♠♦♥"["csdh".index(text[-1])]
        assert parse_card(sym) == c


@SETTINGS
@given(st.text(max_size=5))
def test_card_parsing_never_guesses(text):
    try:
        c = parse_card(text)
    except CardError as exc:
        assert "\n" not in str(exc)
        return
    norm = text.strip().upper().replace("10", "T")
    assert card_str(c)[0] == norm[0] and len(norm) == 2


def test_every_move_string_round_trips():
    assert len(set(ACTION_NAMES)) == NUM_ACTIONS
    for a in range(NUM_ACTIONS):
        name = move_str(a)
        assert parse_move(name) == a
        assert parse_move(name.lower()) == a and parse_move(name.replace("T", "10")) == a


@SETTINGS
@given(st.text(alphabet="3456789TJQKA2tjqka01 _nopasm", max_size=10))
def test_move_parsing_never_guesses(text):
    try:
        a = parse_move(text)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert move_str(a) == text.strip().upper().replace("10", "T") or move_str(a) == text.strip().lower()


def test_integer_card_ids_in_a_record_are_refused():
    from sam_env.record import replay_report
    rec = {"format": "samloc/1", "rules": "hoi_quan_bai", "players": 2, "opener": 0,
           "hands": [list(range(10)), list(range(10, 20))], "events": []}
    rep = replay_report(rec)
    assert rep == {"ok": False, "error_at": None,
                   "error": 'hand of seat 0 must be a list of cards written like "Ts"'}
