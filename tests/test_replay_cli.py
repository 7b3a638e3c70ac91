"""``samloc replay`` records (PROTOCOL §2, §3): exact event shapes, results compared by type
as well as value, messages of one readable line.
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

from sam_env import replay_cli
from sam_env.game import Game, GameError
from sam_env.record import RecordError, replay_report

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
    rc = replay_cli.answer_all(parse_records(data), out)
    reps = [json.loads(line) for line in out.getvalue().split("\n")[:-1]]
    assert rc == (0 if all(r["ok"] for r in reps) else 1)
    for r in reps:
        if not r["ok"]:
            assert set(r) == {"ok", "error_at", "error"} and "\n" not in r["error"]
            assert "Traceback" not in r["error"] and len(r["error"]) <= 300
    return reps


def line(rec: object) -> bytes:
    return json.dumps(rec, ensure_ascii=False).encode()


def run_samloc(*argv: str, stdin: bytes = b"", timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "sam_env.cli", "replay", *argv], input=stdin,
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
        assert rep == {"ok": False, "error_at": i,
                       "error": f"event {i}: a {typ} event has no {field!r} field"
                                f" (its fields are {', '.join({'sam': ['seat', 'type', 'declare'], 'pass': ['seat', 'type'], 'play': ['seat', 'type', 'cards']}[typ])})"}
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



# ---- messages ----
def test_a_deep_value_inside_a_record_is_answered():
    for depth in (200, 900, 5000):
        deep: list = []
        for _ in range(depth):
            deep = [deep]
        for key in ("format", "rules", "opener", "hands", "events", "result"):
            rec = dict(RECORDS[0], **{key: deep})
            rep = replay_report(rec)
            assert rep["ok"] is False and len(rep["error"]) <= 300, (depth, key)


def test_a_huge_value_is_not_echoed_whole():
    rec = dict(RECORDS[0], format="x" * 100_000)
    msg = replay_report(rec)["error"]
    assert msg.startswith('format must be "samloc/1", not "xxx') and len(msg) < 120
    rec = dict(RECORDS[0], hands=[["x" * 100_000] * 10] * RECORDS[0]["players"])
    assert len(replay_report(rec)["error"]) <= 300


def test_record_error_is_one_readable_line():
    e = RecordError("a\nb\u2028c" + "x" * 1000)
    assert "\n" not in str(e) and len(str(e)) == 300
