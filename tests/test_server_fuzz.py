"""Hypothesis fuzzing of ``POST /v1/act``: malformed and inconsistent requests.

Three sources of bad requests: arbitrary bytes, arbitrary JSON, and valid
requests from real games with one or more mutations (fields dropped, retyped
or added; cards garbled, duplicated, stolen from the table; events edited,
dropped, repeated or swapped; seat, opener, players and rules changed).
Whatever comes in: never a 5xx, a refusal is ``422 {"error": <text>}`` (or
413), and a 200 answer is a legal decision for the request's own view.  Also:
bodies that are empty, deep, huge-numbered or sent with another content type
get a message naming that; events with a null field their kind lacks are
refused; so is a hop count (X-Samloc-Hops) that is not one whole number; and
the play API's bodies (a client seed, where the server deals, and seeds out of
range where it allows them) never get a 5xx either.
"""

from __future__ import annotations

import json
import random
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from agents.players.http_agent import HOPS_HEADER
from agents.serving.app import create_app
from sam_env.actions import NO_SAM
from sam_env.cards import card_str
from sam_env.game import Game, GameError

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])
CONFIGS = [("hoi_quan_bai", 4), ("hoi_quan_bai", 2), ("s666pg", 5), ("mien_bac", 3), ("online", 4)]


@pytest.fixture(scope="module")
def client() -> TestClient:
    with TestClient(create_app("random"), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def seeded() -> TestClient:
    """A server whose operator lets clients choose the deals' seed."""
    with TestClient(create_app("random", allow_client_seed=True), raise_server_exceptions=False) as c:
        yield c


def valid_request(seed: int, depth: int) -> tuple[dict[str, Any], Game]:
    rules, players = CONFIGS[seed % len(CONFIGS)]
    rng = random.Random(seed)
    g = Game.new(rules, players, seed=seed)
    k = 0
    while g.finished:  # an instant-win deal: no seat's view of it can tell that it is over
        k += 1
        g = Game.new(rules, players, seed=seed, deal=k)
    for _ in range(depth):
        if g.finished:
            break
        legal = g.legal_actions()
        g.apply(NO_SAM if NO_SAM in legal and rng.random() < 0.9 else rng.choice(legal))
    s = g.to_act if not g.finished else 0
    req = {"format": "samloc/1", "rules": rules, "players": players, "opener": g.opener, "seat": s,
           "hand": [card_str(c) for c in g.hand(s) or []], "events": list(g.events)}
    return req, g


def refusal(r: Any) -> str:
    """The one-line message of a refusal (never a 5xx)."""
    assert r.status_code < 500, (r.status_code, r.text)
    data = r.json()
    assert set(data) == {"error"} and isinstance(data["error"], str) and data["error"], r.text
    assert "\n" not in data["error"] and len(data["error"]) <= 1000
    return data["error"]


def check(client: TestClient, body: bytes | Any) -> None:
    if isinstance(body, bytes):
        r = client.post("/v1/act", content=body, headers={"content-type": "application/json"})
    else:
        r = client.post("/v1/act", json=body)
    assert r.status_code < 500, (body, r.status_code, r.text)
    assert r.status_code in (200, 413, 422), (r.status_code, r.text)
    data = r.json()
    if r.status_code != 200:
        refusal(r)
        return
    # accepted: the request was a consistent view and the answer is legal in it
    view = Game.from_view(body["rules"], body["players"], body["opener"], body["seat"], body["hand"],
                          body["events"])
    assert data["event"]["seat"] == body["seat"]
    view.apply(data["event"])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20)

CARDISH = st.sampled_from(["3s", "2h", "Tc", "10d", "♠A", "A♠", "1s", "",
                           "3x", "Qd ", "kH"]) | st.text(max_size=4)


@FUZZ
@given(body=st.binary(max_size=300))
def test_bytes(client: TestClient, body: bytes) -> None:
    check(client, body)


@pytest.mark.parametrize("body", [b'{"format": NaN}', b'{"players": Infinity}', b'{"seat": -Infinity}',
                                  b'{"events": [{"seat": NaN, "type": "pass"}]}', b'{"a": 1e999}',
                                  b'{"hand": ["3s"' + b', "4s"' * 5000 + b"]}", b"[" * 5000 + b"]" * 5000])
def test_json_oddities(client: TestClient, body: bytes) -> None:
    check(client, body)


@pytest.mark.parametrize("body,words", [
    (b"", "the body is empty"), (b" \t\r\n", "the body is empty"),
    (b"[" * 5000 + b"]" * 5000, "nests JSON arrays or objects too deeply"),
    (b'{"hand": [' * 2000 + b"]}" * 2000, "nests JSON arrays or objects too deeply"),
    (b'{"players": ' + b"7" * 5000 + b"}", "a number of more than 4300 digits"),
    (b'{"players": -' + b"7" * 5000 + b"}", "a number of more than 4300 digits"),
    (b'{"players": 1e999}', "a number too large to read"), (b'{"players": ' + b"9" * 400 + b'.5}', "large"),
    (b'{"players": NaN}', "NaN is not a JSON number"), (b'{"seat": Infinity}', "Infinity is not a JSON"),
    (b"\xef\xbb\xbf{}", "not valid JSON"), (b'{"a": "\xc3"}', "not UTF-8 text")])
def test_odd_bodies_are_named(client: TestClient, body: bytes, words: str) -> None:
    r = client.post("/v1/act", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and words in refusal(r), r.text


@FUZZ
@given(media=st.sampled_from(["application/json", "application/json; charset=utf-8", "Application/JSON",
                              "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""])
       | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30))
def test_the_body_must_be_sent_as_json(client: TestClient, media: str) -> None:
    """A cross-site form can post text/plain without asking: only application/json is read."""
    req, _ = valid_request(3, 20)
    r = client.post("/v1/act", content=json.dumps(req).encode(), headers={"content-type": media})
    if media.split(";")[0].strip().lower() == "application/json":
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 422 and "Content-Type: application/json" in refusal(r)


HOP_VALUES = (st.integers(0, 10**12).map(str) | st.sampled_from(["", "-1", "+1", "1.0", "0x4", " 3", "1e3",
                                                                 "٣",
                                                                   "4, 4", "9" * 40, "NaN"])
              | st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=12))


@FUZZ
@given(values=st.lists(HOP_VALUES, min_size=1, max_size=2))
def test_hop_headers(client: TestClient, values: list[str]) -> None:
    """The bot servers a request has passed through (X-Samloc-Hops): one whole number, of any size
    for a bot that asks no other (its own count is not passed on); anything else is a 422 naming it."""
    req, _ = valid_request(3, 20)
    headers = [(b"content-type", b"application/json")] + [(HOPS_HEADER.encode(), v.encode()) for v in values]
    r = client.post("/v1/act", content=json.dumps(req).encode(), headers=headers)
    v = values[0].strip(" \t")
    if len(values) == 1 and v.isascii() and v.isdigit() and len(v) <= 9:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 422 and refusal(r).startswith(f"the {HOPS_HEADER} header must be one whole "
                                                              f"number")


@pytest.mark.slow
@FUZZ
@given(body=st.dictionaries(st.sampled_from(["format", "rules", "players", "opener", "seat", "hand", "events",
                                             "extra"]), json_values, max_size=8))
def test_json_shapes(client: TestClient, body: dict) -> None:
    check(client, body)


def mutate(req: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    req = json.loads(json.dumps(req))
    kind = data.draw(st.sampled_from([
        "drop_field", "retype_field", "extra_field", "hand_garble", "hand_dup", "hand_drop", "hand_add",
        "hand_steal", "event_drop", "event_dup", "event_swap", "event_edit", "event_null_field",
        "event_truncate", "seat", "opener", "players", "rules"]))
    fields = ["format", "rules", "players", "opener", "seat", "hand", "events"]
    hand = req.get("hand") if isinstance(req.get("hand"), list) else None   # earlier mutations may
    ev = req.get("events") if isinstance(req.get("events"), list) else None  # have broken these
    played = [c for e in ev or [] if isinstance(e, dict) and e.get("type") == "play"
              and isinstance(e.get("cards"), list) for c in e["cards"]]
    if kind == "drop_field":
        req.pop(data.draw(st.sampled_from(fields)), None)
    elif kind == "retype_field":
        req[data.draw(st.sampled_from(fields))] = data.draw(json_values)
    elif kind == "extra_field":
        req[data.draw(st.text(min_size=1, max_size=6).filter(lambda k: k not in fields))] = 1
    elif kind == "hand_garble" and hand:
        hand[data.draw(st.integers(0, len(hand) - 1))] = data.draw(CARDISH)
    elif kind == "hand_dup" and hand:
        hand.append(hand[0])
    elif kind == "hand_drop" and hand:
        hand.pop()
    elif kind == "hand_add" and hand is not None:
        hand.append(card_str(data.draw(st.integers(0, 51))))
    elif kind == "hand_steal" and hand and played:
        hand[0] = data.draw(st.sampled_from(played))
    elif kind == "event_drop" and ev:
        del ev[data.draw(st.integers(0, len(ev) - 1))]
    elif kind == "event_dup" and ev:
        i = data.draw(st.integers(0, len(ev) - 1))
        ev.insert(i, ev[i])
    elif kind == "event_swap" and ev and len(ev) >= 2:
        i = data.draw(st.integers(0, len(ev) - 2))
        ev[i], ev[i + 1] = ev[i + 1], ev[i]
    elif kind == "event_edit" and ev and isinstance(ev[-1], dict):
        i = len(ev) - 1 - data.draw(st.integers(0, len(ev) - 1))
        if not isinstance(ev[i], dict):
            i = len(ev) - 1
        key = data.draw(st.sampled_from(["seat", "type", "cards", "declare", "zzz"]))
        value = data.draw(st.integers(-1, 6) | st.sampled_from(["play", "pass",
                                                                "sam", "chop"]) | st.booleans()
                          | st.lists(CARDISH, max_size=4) | json_values)
        ev[i] = dict(ev[i], **{key: value})
    elif kind == "event_null_field" and ev and isinstance(ev[-1], dict):
        i = data.draw(st.integers(0, len(ev) - 1))
        if isinstance(ev[i], dict):  # a field its kind lacks, sent as null: refused like any other value
            ev[i] = dict(ev[i], **{data.draw(st.sampled_from(["cards", "declare"])): None})
    elif kind == "event_truncate" and ev is not None:
        req["events"] = ev[:data.draw(st.integers(0, len(ev)))]
    elif kind == "seat":
        req["seat"] = data.draw(st.integers(-2, 6))
    elif kind == "opener":
        req["opener"] = data.draw(st.integers(-2, 6))
    elif kind == "players":
        req["players"] = data.draw(st.integers(0, 7))
    elif kind == "rules":
        req["rules"] = data.draw(st.sampled_from(["hoi_quan_bai", "s666pg", "mien_bac", "online", "x", ""])
                                 | st.fixed_dictionaries({"preset": st.sampled_from(["online", "nope"])},
                                                         optional={"cong": json_values,
                                                                   "bao_mot": st.sampled_from(["enforce", 1]),
                                                                   "max_players": st.integers(0, 9)}))
    return req


@FUZZ
@given(seed=st.integers(0, 10_000), depth=st.integers(0, 60), n=st.integers(1, 3), data=st.data())
def test_mutated_real_requests(client: TestClient, seed: int, depth: int, n: int,
                               data: st.DataObject) -> None:
    req, _ = valid_request(seed, depth)
    for _ in range(n):
        req = mutate(req, data)
    check(client, req)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), depth=st.integers(0, 60))
def test_unmutated_requests_are_answered(client: TestClient, seed: int, depth: int) -> None:
    """The control group: the generator makes valid requests, so the mutations above test something."""
    req, g = valid_request(seed, depth)
    if g.finished and not g.events:
        return  # another seat's instant win at the deal: no seat's view can tell the game is over
    r = client.post("/v1/act", json=req)
    if g.finished:
        assert r.status_code == 422 and "over" in r.json()["error"]
    else:
        assert r.status_code == 200, r.text
        try:
            g.apply(r.json()["event"])
        except GameError as exc:  # pragma: no cover - would be a bug
            pytest.fail(f"illegal answer: {exc}")


# ---- the play page's API ---------------------------------------------------------------------------
SEEDS = st.none() | st.integers(-2**70, 2**70) | st.sampled_from([-1, 0, 2**63 - 1, 2**63, True, 1.5, "11"])
NEW = st.fixed_dictionaries({}, optional={
    "rules": st.sampled_from(["hoi_quan_bai", "online", "x", 3]) | json_values,
    "players": st.integers(-1, 7) | json_values, "seat": st.integers(-1, 6) | json_values, "seed": SEEDS,
    "extra": json_values})
MOVE = st.fixed_dictionaries({}, optional={
    "move": st.sampled_from(["pass", "sam", "no_sam", "fold"]) | json_values,
    "cards": st.lists(CARDISH, max_size=11) | json_values, "extra": json_values})


@pytest.mark.slow
@FUZZ
@given(body=NEW)
def test_new_session_bodies(client: TestClient, seeded: TestClient, body: dict) -> None:
    """Where the server deals, any seed is refused; where it allows one, a seed out of range is a 422,
    not the 500 that -1 once was; a deal is the same for the same seed."""
    r = client.post("/play/api/new", json=body)
    if r.status_code != 200:
        refusal(r)
    assert body.get("seed") is None or r.status_code == 422, r.text
    r = seeded.post("/play/api/new", json=body)
    if r.status_code != 200:
        refusal(r)
        return
    seed = body.get("seed")
    assert seed is None or (type(seed) is int and 0 <= seed < 2**63)
    if seed is not None:
        again = seeded.post("/play/api/new", json=body).json()
        assert again["hand"] == r.json()["hand"] and again["events"] == r.json()["events"]


@pytest.mark.slow
@FUZZ
@given(body=MOVE, seed=st.integers(0, 50))
def test_move_bodies(seeded: TestClient, body: dict, seed: int) -> None:
    new = {"rules": "hoi_quan_bai", "players": 4, "seat": 0, "seed": seed}
    st_ = seeded.post("/play/api/new", json=new).json()
    r = seeded.post(f"/play/api/{st_['session']}/move", json=body)
    if r.status_code != 200:
        assert r.status_code in (404, 422), r.text
        refusal(r)
        assert seeded.get(f"/play/api/{st_['session']}").json()["events"] == st_["events"]  # nothing changed
