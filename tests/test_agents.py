"""Agents: specs, legality everywhere, no peeking, determinism, the hand splitter, HTTP."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from agents import HeuristicAgent, RandomAgent, make_agent
from agents.base import Agent
from agents.evaluation.evaluate import evaluate
from agents.players.hand_shape import best_split, workspace
from agents.players.heuristic import decide
from agents.players.heuristic_params import make_params
from agents.players.sam_planner import sam_success_prob
from agents.players.http_agent import AgentError, HttpAgent, view_request
from conftest import shuffle_hidden
from sam_env.actions import ACT_COUNTS, NO_SAM, NUM_ACTIONS, POS_RANK, SAM, SINGLE0, straight_action
from sam_env.cards import cards_str
from sam_env.game import Game
from sam_env.rules import PRESET_NAMES, RuleSet
from sam_env.table import Table

ALL_TABLES = [(p, n) for p in PRESET_NAMES for n in range(2, RuleSet.preset(p).max_players + 1)]


# ---- specs ------------------------------------------------------------------------------
def test_specs_build_the_named_agents():
    assert isinstance(make_agent("random"), RandomAgent)
    assert make_agent("random:uniform").sam_prob == 0.5
    h = make_agent("heuristic:greedy", seed=3)
    assert isinstance(h, HeuristicAgent) and h.name == "heuristic:greedy" and h.seed == 3
    assert make_agent(h) is h
    assert make_agent("http://127.0.0.1:1").name == "http://127.0.0.1:1"


@pytest.mark.parametrize("spec, words", [
    ("randm", "unknown agent spec"), ("heuristic:nope", "unknown heuristic variant"),
    ("./no/such/ckpt", "no such checkpoint directory"), ("nothing.onnx", "no such ONNX file"),
    ("", "non-empty string"), ("random:x", "unknown random variant")])
def test_bad_specs_are_one_line_value_errors(spec, words):
    with pytest.raises(ValueError, match=words) as info:
        make_agent(spec)
    assert "\n" not in str(info.value)


# ---- legality in every preset and player count ------------------------------------------------
@pytest.mark.parametrize("rules, players", ALL_TABLES)
def test_every_agent_move_is_legal_everywhere(rules, players):
    # the evaluator checks each move with the engine and raises on an illegal one
    games = 0
    for a, b in (("heuristic", "random:uniform"), ("heuristic:greedy", "heuristic"),
                 ("heuristic:noblock", "heuristic:spend"), ("random", "heuristic:nosam")):
        r = evaluate(a, b, Table(RuleSet.preset(rules), players), 60, seed=players)
        assert r["zero_sum"]
        games += r["games"]
    assert games >= 480  # 14 tables: over 8,000 games in all


# ---- knowledge: only the seat's own cards and public facts ------------------------------------------
def _positions(rules: str, players: int, count: int, seed: int):
    """(full game, seat to act) at random points of games played by the heuristic and random."""
    rng = random.Random(seed)
    h, r = HeuristicAgent(seed=1), RandomAgent(seed=2)
    out = []
    while len(out) < count:
        g = Game.new(rules, players, seed=rng.randrange(1 << 30))
        stop = rng.randrange(1, 60)
        while g.result is None and len(g.events) < stop:
            s = g.to_act
            g.apply((h if s % 2 else r).act(g, s))
        if g.result is None:
            out.append((g, g.to_act))
    return out


@pytest.mark.parametrize("rules, players",
                         [("hoi_quan_bai", 4), ("s666pg", 5), ("online", 3), ("mien_bac", 2)])
def test_heuristic_never_peeks(rules, players):
    h = HeuristicAgent(seed=9)
    for g, seat in _positions(rules, players, 120, seed=players):
        a = h.act(g, seat)
        assert g.legal_mask()[a] == 1
        view = Game.from_view(g.rules, players, g.opener, seat, cards_str(g.hand(seat)), g.events)
        assert h.act(view, seat) == a
        st = shuffle_hidden(g.state, seat, seed=seat)  # the other seats' cards dealt again: same decision
        assert decide(st, g.rules_array, g.legal_mask(), h.params, h.seed) == a


def test_act_batch_matches_act_and_is_deterministic():
    pos = _positions("hoi_quan_bai", 4, 200, seed=5)
    states = np.stack([g.state for g, _ in pos])
    masks = np.stack([g.legal_mask() for g, _ in pos])
    rule_array = pos[0][0].rules_array
    for spec in ("heuristic", "heuristic:greedy", "random"):
        a1 = make_agent(spec, seed=4).act_batch(states, rule_array, None, masks)
        a2 = make_agent(spec, seed=4).act_batch(states, rule_array, None, masks)
        assert (a1 == a2).all() and (masks[np.arange(len(a1)), a1] == 1).all()
        if spec.startswith("heuristic"):
            agent = make_agent(spec, seed=4)
            assert [agent.act(g, s) for g, s in pos] == a1.tolist()
    r = make_agent("random", seed=4).act_batch(states, rule_array, None, masks)
    assert (r != make_agent("random", seed=5).act_batch(states, rule_array, None, masks)).any()


# ---- the hand splitter against brute force ------------------------------------------------------
def _straights(h: list[int], ace_low: bool):
    """Every straight action the counts ``h`` hold, with the positions it uses."""
    out = []
    lo = 1 if ace_low else 3
    for ln in range(3, 11):
        for top in range(max(ln, lo + ln - 1), 15):
            ranks = [int(POS_RANK[p]) for p in range(top - ln + 1, top + 1)]
            if top - ln + 1 >= lo and len(set(ranks)) == ln and all(h[r] > 0 for r in ranks):
                out.append((straight_action(ln, top), ranks, top - ln + 1 < 3))
    return out


def _brute_best(h: list[int], val: np.ndarray, ace_low: bool) -> float:
    """Any multiset of straights (at most one ace-low), then one set per rank left."""
    best = -1e18

    def rec(h, acc, start, low_used):
        nonlocal best
        rest = acc + sum(val[SINGLE0 + (c - 1) * 13 + r] for r, c in enumerate(h) if c)
        best = max(best, rest)
        cands = _straights(h, ace_low)
        for i, (a, ranks, low) in enumerate(cands):
            if a < start or (low and low_used):
                continue
            h2 = list(h)
            for r in ranks:
                h2[r] -= 1
            rec(h2, acc + val[a], a, low_used or low)

    rec(list(h), 0.0, 0, False)
    return best


@pytest.mark.slow
def test_hand_splitter_finds_the_best_split():
    rng = np.random.default_rng(0)
    wi, wf = workspace()
    for trial in range(400):
        ace_low = trial % 2 == 0
        rule_array = RuleSet.preset("hoi_quan_bai" if ace_low else "s666pg").to_array()
        cards = rng.choice(52, size=int(rng.integers(1, 11)), replace=False)
        val = rng.uniform(-1.5, 0.5, NUM_ACTIONS)
        if trial % 3 == 0:  # straight-heavy hands, straights worth keeping
            lo = int(rng.integers(0, 4))
            run = list(range(lo, lo + int(rng.integers(5, 10))))
            extra = rng.choice(13, 10 - len(run), replace=True).tolist()
            ranks = run + extra
            cards = np.array(sorted({r * 4 + i % 4 for i, r in enumerate(ranks)}))
            val[55:123] += rng.uniform(0.0, 1.5, 68)
        h = np.bincount(cards // 4, minlength=13).astype(np.int64)
        got = best_split(h.copy(), rule_array, val, wi, wf)
        assert got == pytest.approx(_brute_best(h.tolist(), val, ace_low)), cards_str(cards.tolist())
        # the split it reports uses exactly the hand
        used = sum(ACT_COUNTS[wi[6, j]] for j in range(int(wf[17])))
        assert (used == h).all()


# ---- Sâm ----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_sam_declared_only_for_near_unbeatable_hands():
    prm = make_params()
    rule_array = RuleSet.preset("s666pg").to_array()
    u_of = lambda h: np.array([4 - x for x in h], dtype=np.int64)  # noqa: E731
    # 3..Q straight: nothing of length 10 can beat it
    h = np.array([1] * 10 + [0, 0, 0], dtype=np.int64)
    assert sam_success_prob(h, u_of(h), 4, rule_array, prm, 1, 0.0) == 1.0
    # four 2s, a triple of As and 3 low cards: the low cards are beatable, only one may be
    h = np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4], dtype=np.int64)
    assert sam_success_prob(h, u_of(h), 4, rule_array, prm, 1, 0.0) < 0.2
    g = Game.from_deal("s666pg", [["3s", "4s", "5s", "6s", "7s", "8s", "9s", "Ts", "Js", "Qs"],
                                  ["2c", "3c", "4c", "5c", "6c", "7c", "8c", "9c", "Tc", "Jc"],
                                  ["2d", "3d", "4d", "5d", "6d", "7d", "8d", "9d", "Td", "Jd"],
                                  ["2h", "3h", "4h", "5h", "6h", "7h", "8h", "9h", "Th", "Jh"]], opener=0)
    assert HeuristicAgent().act(g, 0) == SAM
    g.apply(SAM)
    assert HeuristicAgent().act(g, 0) == straight_action(10, 12)
    # ordinary hands are not declared: a few percent of random deals at most
    asked = declared = 0
    for i in range(400):
        deal = Game.new("hoi_quan_bai", 4, seed=i)
        if deal.phase == "sam":
            asked += 1
            declared += HeuristicAgent().act(deal, deal.to_act) == SAM
    assert asked > 350 and declared <= 0.05 * asked
    assert make_agent("heuristic:nosam").act(Game.from_deal("s666pg", [
        ["3s", "4s", "5s", "6s", "7s", "8s", "9s", "Ts", "Js", "Qs"],
        ["2c", "3c", "4c", "5c", "6c", "7c", "8c", "9c", "Tc", "Jc"]]), 0) == NO_SAM


# ---- HTTP -----------------------------------------------------------------------------------------
class _Bot(BaseHTTPRequestHandler):
    """A tiny PROTOCOL §4 bot: rebuilds the seat's view and answers the heuristic's move."""

    mode = "ok"
    seen: list[dict] = []

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(body)
        if type(self).mode == "422":
            return self._send(422, {"error": "not this seat's turn"})
        view = Game.from_view(body["rules"], body["players"], body["opener"], body["seat"], body["hand"],
                              body["events"])
        seat = body["seat"]
        a = HeuristicAgent().act(view, seat)
        if type(self).mode == "illegal":  # a card twice
            return self._send(200, {"event": {"seat": seat, "type": "play", "cards": body["hand"][:1] * 2}})
        ev = view.copy().apply(a)
        self._send(200, {"event": ev, "info": {"value": 0.0}})

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def bot_url():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Bot)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    _Bot.mode, _Bot.seen = "ok", []
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_http_agent_plays_through_the_protocol(bot_url):
    remote = make_agent(bot_url)
    assert isinstance(remote, HttpAgent) and not remote.batched
    table = Table(RuleSet.preset("hoi_quan_bai"), 3)
    res = evaluate(remote, "heuristic:greedy", table, 4, seed=1)
    local = evaluate(HeuristicAgent(), "heuristic:greedy", table, 4, seed=1)
    assert res["zero_sum"] and res["games"] == 12 and not res["batched"]
    # the remote bot is the heuristic: same games as playing it locally through the slow path
    assert res["mean_score"] == local["mean_score"]
    body = _Bot.seen[-1]
    assert set(body) == {"format", "rules", "players", "opener", "seat", "hand", "events"}
    assert len(body["hand"]) + sum(len(e.get("cards", [])) for e in body["events"]
                                   if e["seat"] == body["seat"]) == 10
    remote.close()


def test_http_agent_refuses_bad_answers(bot_url):
    g = Game.new("hoi_quan_bai", 4, seed=11)
    while g.phase == "sam" or g.top is None:
        g.apply(HeuristicAgent().act(g, g.to_act))
    remote = HttpAgent(bot_url)
    _Bot.mode = "422"
    with pytest.raises(AgentError, match="422: not this seat's turn"):
        remote.act(g, g.to_act)
    _Bot.mode = "illegal"
    with pytest.raises(AgentError):
        remote.act(g, g.to_act)
    with pytest.raises(AgentError, match="cannot reach"):
        HttpAgent("http://127.0.0.1:9", timeout=0.5).act(g, g.to_act)
    assert view_request(g, g.to_act)["hand"] == cards_str(g.hand(g.to_act))


def test_agent_interface_is_abstract():
    with pytest.raises(TypeError):
        Agent()  # type: ignore[abstract]

    class OnlyAct(Agent):
        def act(self, game, seat):
            return game.legal_actions()[0]

    assert not OnlyAct().batched and RandomAgent().batched and HeuristicAgent().batched
    with pytest.raises(ValueError, match="turn"):
        HeuristicAgent().act(Game.new("hoi_quan_bai", 4, seed=1, opener=0), 2)
