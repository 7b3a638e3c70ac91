"""The bot server (PROTOCOL §4) through FastAPI's TestClient: answers, refusals, the play API.

The big check: 10,000 valid requests taken from random games of every preset
and player count get 100% legal answers (the event applies to the real game),
and the same request always gets the same answer.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():  # Starlette's notice about httpx, at import
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from agents.serving.app import create_app  # noqa: E402
from agents.serving.bots import Bot, view_key  # noqa: E402
from agents.serving.edge import MAX_BODY  # noqa: E402
from agents.serving.sessions import MAX_SEED, MAX_SESSIONS, SESSIONS_PER_CLIENT, SessionStore  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402
from sam_env.actions import NO_SAM  # noqa: E402
from sam_env.cards import card_str  # noqa: E402
from sam_env.game import Game  # noqa: E402
from sam_env.record import replay_report  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [("hoi_quan_bai", p) for p in (2, 3, 4, 5)] + [("s666pg", p) for p in (2, 3, 4, 5)] \
    + [("mien_bac", p) for p in (2, 3, 4)] + [("online", p) for p in (2, 3, 4)]


def view_request(g: Game, seat: int | None = None) -> dict[str, Any]:
    """The /v1/act body for the seat to act (or ``seat``) of a full game."""
    s = g.to_act if seat is None else seat
    return {"format": "samloc/1", "rules": g.rules.to_record(), "players": g.players, "opener": g.opener,
            "seat": s, "hand": [card_str(c) for c in g.hand(s) or []], "events": list(g.events)}


def random_positions(count: int, seed: int, configs=CONFIGS) -> list[tuple[Game, dict[str, Any]]]:
    """(game copy, request) at every decision of seeded random games, spread over ``configs``."""
    rng = random.Random(seed)
    out: list[tuple[Game, dict[str, Any]]] = []
    k = 0
    while len(out) < count:
        rules, players = configs[k % len(configs)]
        g = Game.new(rules, players, seed=seed * 100_000 + k)
        k += 1
        sam_ok = rng.random() < 0.2          # some games with Sâm declarations, most played out
        while not g.finished and len(out) < count:
            out.append((g.copy(), view_request(g)))
            legal = g.legal_actions()
            g.apply(NO_SAM if NO_SAM in legal and not sam_ok else rng.choice(legal))
    return out


@pytest.fixture(scope="module")
def client() -> TestClient:
    with TestClient(create_app("random"), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def heuristic_client() -> TestClient:
    with TestClient(create_app("heuristic", allow_client_seed=True), raise_server_exceptions=False) as c:
        yield c


def test_health_and_info(client: TestClient) -> None:
    assert client.get("/v1/health").json() == {"ok": True}
    info = client.get("/v1/info").json()
    assert info["name"] == "random" and info["checkpoint"] is None
    assert info["rules"] == ["hoi_quan_bai", "mien_bac",
                             "online", "s666pg"]  # PRESET_NAMES: the default first, then by name
    assert info["players"] == [2, 3, 4, 5]
    assert {s["rules"]: s["players"] for s in info["supports"]}["mien_bac"] == [2, 3, 4]


def test_answer_is_a_legal_event_of_the_seat(heuristic_client: TestClient) -> None:
    g = Game.new("hoi_quan_bai", 4, seed=11)
    while not g.finished:
        r = heuristic_client.post("/v1/act", json=view_request(g))
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) <= {"event", "info"}
        ev = body["event"]
        assert ev["seat"] == g.to_act and ev["type"] in ("sam", "pass", "play")
        if ev["type"] == "play":
            assert set(ev["cards"]) <= {card_str(c) for c in g.hand(g.to_act)}
        g.apply(ev)  # raises if the answer were illegal
        assert r.headers["server-timing"].startswith("decide;dur=")
    assert g.result is not None


def _error(r) -> str:
    assert r.status_code == 422, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"]
    return body["error"]


def _mid_game(seed: int = 0, decisions: int = 12) -> Game:
    rng = random.Random(seed)
    g = Game.new("hoi_quan_bai", 4, seed=seed)
    for _ in range(decisions):
        legal = g.legal_actions()
        g.apply(NO_SAM if NO_SAM in legal else rng.choice(legal))
    assert not g.finished
    return g


def test_refusals_name_the_problem(client: TestClient) -> None:
    g = _mid_game()
    good = view_request(g)
    s = good["seat"]
    played = next(ev for ev in good["events"] if ev["type"] == "play" and ev["seat"] != s)
    own_played = [e for e in good["events"] if e["type"] == "play" and e["seat"] == s]
    post = lambda body: client.post("/v1/act", json=body)  # noqa: E731
    assert post(good).status_code == 200

    def raw(data: bytes) -> str:
        return _error(client.post("/v1/act", content=data, headers={"content-type": "application/json"}))

    assert "not valid JSON" in raw(b'{"format": ')
    assert "not valid JSON" in raw(b"\xff\xfe")
    assert "JSON object" in raw(b"[1, 2]")
    assert "unknown field 'bogus'" in _error(post({**good, "bogus": 1}))
    assert "missing field 'hand'" in _error(post({k: v for k, v in good.items() if k != "hand"}))
    assert "format" in _error(post({**good, "format": "samloc/2"}))
    assert "players" in _error(post({**good, "players": "4"}))
    assert "players must be an integer from 2 to 5" in _error(post({**good, "players": 6}))
    assert "unknown preset 'poker'" in _error(post({**good, "rules": "poker"}))
    assert "unknown rule parameter 'x'" in _error(post({**good, "rules": {"preset": "hoi_quan_bai", "x": 1}}))
    assert "unknown card 'Zz'" in _error(post({**good, "hand": good["hand"][:-1] + ["Zz"]}))
    dup = good["hand"][:-1] + [good["hand"][0]]
    assert "twice" in _error(post({**good, "hand": dup}))
    assert "not the 10 it was dealt" in _error(post({**good, "hand": good["hand"][:-1]}))
    # a card another seat already played, in place of one of ours
    stolen = good["hand"][:-1] + [played["cards"][0]]
    assert played["cards"][0] in _error(post({**good, "hand": stolen}))
    if own_played:  # a card this seat already played, still in its hand
        again = good["hand"][:-1] + [own_played[0]["cards"][0]]
        assert "already played" in _error(post({**good, "hand": again}))
    assert f"seat {s}'s turn" in _error(post(view_request(g, (s + 1) % 4)))
    bad_event = [dict(good["events"][0], type="fold")] + good["events"][1:]
    assert "events[0].type" in _error(post({**good, "events": bad_event}))
    extra_key = [dict(good["events"][0], note="x")] + good["events"][1:]
    assert "unknown field 'note' in events[0]" in _error(post({**good, "events": extra_key}))
    i = good["events"].index(played)
    illegal = good["events"][:i] + [dict(played, seat=(played["seat"] + 1) % 4)] + good["events"][i + 1:]
    assert _error(post({**good, "events": illegal})).startswith(f"event {i}:")
    not_list = good["events"][:i] + [dict(played, cards=played["cards"][0])] + good["events"][i + 1:]
    assert f"events[{i}].cards" in _error(post({**good, "events": not_list}))
    assert "opener" in _error(post({**good, "opener": 9}))


def test_body_messages_name_the_real_problem(client: TestClient) -> None:
    def raw(data: bytes, content_type: str = "application/json") -> str:
        return _error(client.post("/v1/act", content=data, headers={"content-type": content_type}))

    assert raw(b"") == "the body is empty: send a JSON object"
    assert raw(b" \n") == "the body is empty: send a JSON object"
    assert raw(b"[" * 5000 + b"]" * 5000) == "the body nests JSON arrays or objects too deeply"
    assert raw(b'{"players": ' + b"1" * 5000 + b"}") == "the body has a number of more than 4300 digits"
    assert raw(b'{"players": NaN}') == "the body is not valid JSON (NaN is not a JSON number)"
    assert raw(b'{"players": -Infinity}') == "the body is not valid JSON (-Infinity is not a JSON number)"
    assert raw(b'{"players": 1e999}') == "the body has a number too large to read: 1e999"
    assert raw(b'{"a": "\xe9"}') == "the body is not valid JSON (not UTF-8 text: byte 8)"
    assert raw(b'{"a": 1,}').startswith("the body is not valid JSON (Expecting property name")
    assert raw(b'{"players": 4}', "text/plain") == \
        "send the body as JSON, with Content-Type: application/json (not 'text/plain')"
    assert "JSON object" in raw(b'"format"')


def test_event_shapes_are_exact_null_fields_included(client: TestClient) -> None:
    """A field the event's kind does not have is refused even when it is null (PROTOCOL §2)."""
    good = view_request(_mid_game())
    post = lambda events: _error(client.post("/v1/act", json={**good, "events": events}))  # noqa: E731
    first = {kind: next(i for i, e in enumerate(good["events"]) if e["type"] == kind)
             for kind in ("sam", "pass", "play")}
    for kind, field, value in (("pass", "cards", None), ("pass", "cards", []), ("pass", "declare", None),
                               ("sam", "cards", None), ("sam", "cards", ["3s"]), ("play", "declare", None),
                               ("play", "declare", False)):
        i = first[kind]
        events = [dict(e) for e in good["events"]]
        events[i][field] = value
        assert post(events) == f"event {i}: a {kind} event has no {field!r} field (its fields are " \
            + {"sam": "seat, type, declare", "pass": "seat, type", "play": "seat, type, cards"}[kind] + ")"


def test_finished_game_is_refused(client: TestClient) -> None:
    rng = random.Random(3)
    g = Game.new("s666pg", 3, seed=3)
    while not g.finished:
        legal = g.legal_actions()
        g.apply(NO_SAM if NO_SAM in legal else rng.choice(legal))
    loser = next(s for s in range(3) if s != g.result.winner)
    assert "already over" in _error(client.post("/v1/act", json=view_request(g, loser)))


def test_oversized_body_is_413(client: TestClient) -> None:
    g = _mid_game()
    body = view_request(g)
    body["events"] = body["events"] * (MAX_BODY // 100)
    data = json.dumps(body).encode()
    assert len(data) > MAX_BODY
    r = client.post("/v1/act", content=data, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "larger than" in r.json()["error"]

    def chunks():  # no Content-Length: the limit is enforced while reading
        for i in range(0, len(data), 4096):
            yield data[i:i + 4096]
    r = client.post("/v1/act", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_unknown_routes_answer_json(client: TestClient) -> None:
    r = client.get("/v2/act")
    assert r.status_code == 404 and "error" in r.json()
    r = client.get("/v1/act")
    assert r.status_code == 405 and "error" in r.json()


@pytest.mark.slow
def test_ten_thousand_requests_all_legal_and_repeatable(client: TestClient) -> None:
    positions = random_positions(10_000, seed=1)
    answers = {}
    for k, (game, req) in enumerate(positions):
        r = client.post("/v1/act", json=req)
        assert r.status_code == 200, (req, r.text)
        ev = r.json()["event"]
        game.apply(ev)  # the engine, on the full game, accepts it: it is legal
        if k % 20 == 0:
            answers[k] = ev
    for k, ev in answers.items():  # the same request, later: the same answer
        assert client.post("/v1/act", json=positions[k][1]).json()["event"] == ev
    # hand order does not change the answer either
    game, req = positions[7]
    shuffled = dict(req, hand=list(reversed(req["hand"])))
    assert client.post("/v1/act", json=shuffled).json() == client.post("/v1/act", json=req).json()


def test_random_bot_varies_with_the_server_seed() -> None:
    positions = [p for p in random_positions(300, seed=2) if len(p[0].legal_actions()) > 2][:60]
    answers = []
    for seed in (0, 1):
        with TestClient(create_app("random", seed=seed)) as c:
            answers.append([c.post("/v1/act", json=req).json()["event"] for _, req in positions])
    assert answers[0] != answers[1]


def test_view_key_ignores_hand_order_but_not_the_view() -> None:
    g = _mid_game()
    s = g.to_act
    a = Game.from_view(g.rules, 4, g.opener, s, g.hand(s), g.events)
    b = Game.from_view(g.rules, 4, g.opener, s, list(reversed(g.hand(s))), g.events)
    assert view_key(a, s) == view_key(b, s)
    g.apply(g.legal_actions()[0])
    c = Game.from_view(g.rules, 4, g.opener, g.to_act, g.hand(g.to_act), g.events)
    assert view_key(c, g.to_act) != view_key(a, s)


def test_bad_agent_spec_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown agent spec"):
        Bot("grandmaster")
    with pytest.raises(ValueError, match="temperature"):
        Bot("heuristic", temperature=1.0)


def test_serve_cli_usage_errors() -> None:
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--agent", "nope.onnx"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "nope.onnx" in r.stderr and "Traceback" not in r.stderr


def test_shipped_checkpoints_are_found_at_their_documented_place(tmp_path, monkeypatch) -> None:
    """$SAMLOC_CHECKPOINTS, else ./checkpoints, else the checkout's own; none: a line naming the variable."""
    from agents.serving.shipped import ENV_VAR, NoCheckpoints, checkpoints_dir, shipped_models

    (tmp_path / "mine" / "bot").mkdir(parents=True)
    (tmp_path / "mine" / "bot" / "policy.onnx").write_bytes(b"")
    (tmp_path / "mine" / "no_model").mkdir()
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "mine"))
    assert shipped_models() == [tmp_path / "mine" / "bot"]
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nope"))
    with pytest.raises(NoCheckpoints, match=ENV_VAR):
        checkpoints_dir()
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.chdir(tmp_path)
    assert checkpoints_dir() == ROOT / "checkpoints"  # run from a checkout: its own
    (tmp_path / "checkpoints").mkdir()
    assert checkpoints_dir() == tmp_path / "checkpoints"


def test_serve_without_shipped_checkpoints_says_where_to_put_them(tmp_path) -> None:
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--port", "0"], capture_output=True,
                       text=True,
                       cwd=tmp_path, timeout=120, env=dict(os.environ, SAMLOC_CHECKPOINTS=str(tmp_path / "x"),
                                                           PYTHONPATH=str(ROOT)))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"samloc serve: SAMLOC_CHECKPOINTS={tmp_path / 'x'} is not a folder of checkpoints"]


@pytest.mark.slow
def test_serve_runs_from_any_directory(tmp_path) -> None:
    """The play page's files are package data, found beside the code, not from the working directory."""
    import httpx
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "samloc", "serve", "--agent", "heuristic",
                             "--port", str(port)],
                            cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        t0 = time.time()
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.time() - t0 < 120
            time.sleep(0.2)
        assert httpx.get(f"http://127.0.0.1:{port}/play").status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/play/static/play.js").status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.slow
def test_server_imports_no_torch() -> None:
    code = ("import sys, warnings; warnings.simplefilter('ignore');"
            "from fastapi.testclient import TestClient; from agents.serving.app import create_app;"
            "from sam_env.game import Game; from sam_env.cards import card_str;"
            "g = Game.new('hoi_quan_bai', 4, seed=1); s = g.to_act;"
            "c = TestClient(create_app('heuristic')).__enter__();"
            "r = c.post('/v1/act', json={'format': 'samloc/1', 'rules': 'hoi_quan_bai', 'players': 4,"
            " 'opener': g.opener, 'seat': s, 'hand': [card_str(x) for x in g.hand(s)], 'events': []});"
            "assert r.status_code == 200, r.text;"
            "print(sorted(m for m in ('torch', 'gymnasium', 'ray') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


# ---- the play page's API ---------------------------------------------------------------------
def _play_out(c: TestClient, st: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The person plays random legal choices (declining Sâm) until the game is over."""
    for _ in range(300):
        if st["result"] is not None:
            return st
        assert st["your_turn"] and st["legal"]
        moves = [m["move"] for m in st["legal"]]
        if "no_sam" in moves:
            body: dict[str, Any] = {"move": "no_sam"}
        else:
            m = rng.choice(st["legal"])
            body = {"move": "pass"} if m["move"] == "pass" else {"cards": m["cards"]}
        r = c.post(f"/play/api/{st['session']}/move", json=body)
        assert r.status_code == 200, r.text
        st = r.json()
    raise AssertionError("the game did not end")


def test_play_session_games_totals_and_opener(heuristic_client: TestClient) -> None:
    c, rng = heuristic_client, random.Random(0)
    assert c.get("/play").status_code == 200 and "Sâm lốc" in c.get("/play").text
    assert c.get("/play/static/play.js").status_code == 200
    opts = c.get("/play/api/options").json()
    assert opts["bot"] == "heuristic" and len(opts["supports"]) == 4
    st = c.post("/play/api/new", json={"rules": "mien_bac", "players": 3, "seat": 2, "seed": 7}).json()
    totals = [0, 0, 0]
    for game_no in range(1, 4):
        assert st["game"] == game_no and st["seat"] == 2 and len(st["hand"]) + sum(
            1 for e in st["events"] if e["seat"] == 2 and e["type"] == "play") >= 1
        st = _play_out(c, st, rng)
        res = st["result"]
        assert sum(res["scores"]) == 0
        totals = [t + x for t, x in zip(totals, res["scores"])]
        assert st["totals"] == totals and len(st["history"]) == st["played"] == game_no
        # the log carries every event in order: with the revealed hands they replay to the same result
        events = [{k: e[k] for k in ("seat", "type", "cards", "declare") if k in e} for e in st["events"]]
        assert [e["i"] for e in st["events"]] == list(range(len(events)))
        hands = [list(st["reveal"][s]) for s in range(3)]
        for e in events:
            if e["type"] == "play":
                hands[e["seat"]] += e["cards"]
        record = {"format": "samloc/1", "rules": "mien_bac", "players": 3, "opener": st["opener"],
                  "hands": hands, "events": events, "result": res}
        assert replay_report(record)["ok"] is True
        winner = res["winner"]
        prev_opener = st["opener"]
        st = c.post(f"/play/api/{st['session']}/again").json()
        assert st["opener"] == (prev_opener if winner is None else winner)  # RULES §4
        assert st["totals"] == totals


def test_play_refuses_illegal_choices(heuristic_client: TestClient) -> None:
    c = heuristic_client
    for seed in range(40):
        st = c.post("/play/api/new",
                    json={"rules": "hoi_quan_bai", "players": 4, "seat": 0, "seed": seed}).json()
        if st["result"] is None and st["phase"] == "play" and st["top"] is None:
            break
        if st["result"] is None and st["phase"] == "sam":
            st = c.post(f"/play/api/{st['session']}/move", json={"move": "no_sam"}).json()
            if st["result"] is None and st["top"] is None:
                break
    else:
        pytest.skip("no deal where the person leads")
    sid, hand = st["session"], st["hand"]
    post = lambda body: c.post(f"/play/api/{sid}/move", json=body)  # noqa: E731
    assert "may not pass" in _error(post({"move": "pass"}))
    singles = {card[0]: card for card in hand}
    if len(singles) >= 2:
        a, b = sorted(singles.values())[:2]
        if a[0] != b[0]:
            assert "not a combination" in _error(post({"cards": [a, b]}))
    other = next(card_str(x) for x in range(52) if card_str(x) not in hand)
    assert "does not hold" in _error(post({"cards": [other]}))
    assert "select the cards" in _error(post({"cards": []}))
    assert "either" in _error(post({}))
    assert "finish this game first" in _error(c.post(f"/play/api/{sid}/again"))
    assert c.get(f"/play/api/{sid}").json()["events"] == st["events"]  # nothing changed
    assert c.post("/play/api/nope/move", json={"move": "pass"}).status_code == 404
    assert "players" in _error(c.post("/play/api/new", json={"rules": "online", "players": 5}))
    assert "seat" in _error(c.post("/play/api/new", json={"rules": "online", "players": 3, "seat": 3}))


def test_play_page_seats_the_heuristic_where_the_shipped_model_cannot_play():
    model = Path(__file__).resolve().parents[1] / "checkpoints" / "standard" / "policy.onnx"
    if not model.exists():
        pytest.skip("no shipped bot")
    with TestClient(create_app(str(model), allow_client_seed=True)) as c:
        opts = c.get("/play/api/options").json()
        assert {s["rules"] for s in opts["supports"]} == {"hoi_quan_bai", "s666pg", "mien_bac", "online"}
        assert opts["model_supports"] == [{"rules": "hoi_quan_bai", "players": [4]}]
        assert c.post("/play/api/new",
                      json={"rules": "online", "players": 3, "seat": 0, "seed": 1}).json()["bot"] \
            == "heuristic (stand-in: no trained bot for this table)"
        assert c.post("/play/api/new", json={"rules": "hoi_quan_bai", "players": 4, "seat": 0,
                                             "seed": 1}).json()["bot"] == "standard"
        # the protocol endpoint still refuses tables the model was not trained for
        r = c.post("/v1/act", json={"format": "samloc/1", "rules": "online", "players": 3, "opener": 0,
                                    "seat": 0,
                                    "hand": ["3s", "4s", "5s", "6s", "7s", "8s", "9s", "Ts", "Js", "Qs"],
                                    "events": []})
        assert r.status_code == 422 and "no bot here plays online with 3 players" in r.json()["error"]


def test_the_deal_is_the_servers_unless_the_operator_allows_a_seed(heuristic_client: TestClient) -> None:
    new = {"rules": "hoi_quan_bai", "players": 4, "seat": 0}
    with TestClient(create_app("heuristic")) as c:
        assert _error(c.post("/play/api/new", json={**new, "seed": 7})) == (
            "this server deals its own cards: a seed is accepted only where the operator allows it"
            " (samloc serve --allow-client-seed)")
        deals = [c.post("/play/api/new", json={**new, "seed": None}).json() for _ in range(4)]
        assert len({json.dumps([d["hand"], d["events"]]) for d in deals}) == 4  # the server's own deals
    c = heuristic_client  # allow_client_seed=True
    for bad in (-1, MAX_SEED + 1, 2**200):
        assert _error(c.post("/play/api/new", json={**new, "seed": bad})) == \
            f"seed must be an integer from 0 to {MAX_SEED}"
    assert "seed" in _error(c.post("/play/api/new", json={**new, "seed": True}))
    assert "seed" in _error(c.post("/play/api/new", json={**new, "seed": "11"}))
    a, b = (c.post("/play/api/new", json={**new, "seed": MAX_SEED}).json() for _ in range(2))
    assert a["hand"] == b["hand"] and a["events"] == b["events"] and a["session"] != b["session"]


def test_every_answer_carries_the_security_headers(client: TestClient) -> None:
    for r in (client.get("/play"), client.get("/play/static/play.js"), client.get("/v1/info"),
              client.get("/nope"), client.post("/v1/act", content=b"x" * (MAX_BODY + 1),
                                                headers={"content-type": "application/json"})):
        assert r.headers["x-frame-options"] == "DENY", r.url
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"


# ---- the play sessions' store -------------------------------------------------------------------------
def test_one_client_cannot_push_out_other_peoples_sessions() -> None:
    """512 new sessions from one address used to evict every idle session; now it evicts its own."""
    new = {"rules": "hoi_quan_bai", "players": 4, "seat": 0}
    app = create_app("heuristic")
    with TestClient(app, client=("10.0.0.1", 5000)) as person, \
            TestClient(app, client=("10.0.0.2", 5000)) as flood:
        mine = person.post("/play/api/new", json=new).json()
        for _ in range(MAX_SESSIONS + 8):
            assert flood.post("/play/api/new", json=new).status_code == 200
        assert person.get(f"/play/api/{mine['session']}").json()["hand"] == mine["hand"]
        store = app.state.sessions
        assert store.count("10.0.0.2") == SESSIONS_PER_CLIENT and store.count() == SESSIONS_PER_CLIENT + 1


def test_a_full_store_makes_room_only_from_sessions_idle_long_enough(tmp_path: Path) -> None:
    now = [0.0]
    store = SessionStore(tmp_path / "s.db", limit=4, per_client=2, min_idle_s=60, clock=lambda: now[0])
    for i, (sid, client) in enumerate([("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")]):
        now[0] = float(i)
        store.add(sid, client, {"n": i})
    now[0] = 30.0
    with pytest.raises(StarletteHTTPException) as full:  # nobody idle for a minute yet: refused
        store.add("c1", "c", {})
    assert full.value.status_code == 503 and full.value.headers == {"Retry-After": "60"}
    now[0] = 100.0
    assert store.get("a1") == ({"n": 0}, 0)  # a look is use: a1 is no longer the idlest
    now[0] = 101.0
    store.add("c1", "c", {})                  # a2 (idle since t=1) makes room
    assert _ids(store) == {"a1", "b1", "b2", "c1"}
    store.add("c2", "c", {})                  # full again: b1, idle the longest, goes
    store.add("c3", "c", {})                  # over c's share: its own c1 goes, nobody else's
    assert _ids(store) == {"a1", "b2", "c2", "c3"}
    state, version = store.get("c2")
    store.put("c2", {"n": 9}, version)
    with pytest.raises(StarletteHTTPException) as stale:  # another worker moved it on meanwhile
        store.put("c2", {"n": 10}, version)
    assert stale.value.status_code == 409 and store.get("c2")[0] == {"n": 9}
    with pytest.raises(StarletteHTTPException) as gone:
        store.get("a2")
    assert gone.value.status_code == 404
    store.close()


def _ids(store: SessionStore) -> set[str]:
    """The sessions kept, read without touching them (a get would count as use)."""
    return {row[0] for row in store.db.execute("SELECT id FROM sessions")}


def test_stores_on_one_file_share_their_sessions(tmp_path: Path) -> None:
    """What each worker process opens: a session one adds, the other continues; a stale write is a 409."""
    a, b = SessionStore(tmp_path / "s.db"), SessionStore(tmp_path / "s.db")
    a.add("x", "10.0.0.1", {"move": 0})
    state, version = b.get("x")
    b.put("x", {"move": 1}, version)
    with pytest.raises(StarletteHTTPException) as stale:
        a.put("x", {"move": 2}, version)
    assert stale.value.status_code == 409 and a.get("x") == ({"move": 1}, version + 1)
    a.close()
    b.close()
