"""Agent conformance, in the spirit of Pgx's api_test: every kind of agent ``make_agent``
builds keeps the contract of agents/base.py, on the same positions of several presets
and player counts (Sâm questions included).

For each kind: every answer is a legal action id; ``act`` and ``act_batch`` agree
(batched kinds); two agents of the same seed answer alike; and an answer depends only
on the seat's own view: the seat's view alone (``Game.from_view``), and state rows with
the other seats' cards dealt again, get the same answers.  Each kind answers once (a
module fixture, every list from a fresh agent of the same seed); one test per property.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from agents import make_agent
from agents.base import Agent, ObsPolicy
from conftest import live_server, play_positions, shuffle_hidden
from sam_env.actions import NUM_ACTIONS
from sam_env.cards import cards_str
from sam_env.game import Game
from sam_env.obs import OBS_SIZE

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "standard"
TABLES = [("hoi_quan_bai", 4), ("s666pg", 5), ("online", 3), ("mien_bac", 2)]
SEED = 7



def linear_policy(seed: int) -> Agent:
    """A fixed linear scorer of the observation in an ObsPolicy: a stand-in for a network trained
    by another library (examples/)."""
    w = np.random.default_rng(seed).standard_normal((OBS_SIZE, NUM_ACTIONS)).astype(np.float32)
    return ObsPolicy(lambda obs, masks: np.where(masks > 0, obs @ w, -np.inf).argmax(1), name="linear")


#: kind -> (spec or factory(seed), positions per table, the file it needs); ``{url}`` is the live test server.
KINDS: dict[str, tuple[Any, int, Path | None]] = {
    "random": ("random", 24, None),
    "heuristic": ("heuristic", 24, None),
    "heuristic:noblock": ("heuristic:noblock", 24, None),
    "checkpoint": (str(SHIPPED), 8, SHIPPED / "model.safetensors"),
    "search": (f"{SHIPPED}+search:candidates=3,worlds=4,horizon=0", 2, SHIPPED / "model.safetensors"),
    "onnx": (str(SHIPPED / "policy.onnx"), 8, SHIPPED / "policy.onnx"),
    "http": ("{url}", 6, None),
    "obs_policy": (linear_policy, 24, None),
}


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    """``samloc serve --agent heuristic`` (its app, under uvicorn) on a free loopback port."""
    from agents.serving.app import create_app

    with live_server(create_app("heuristic")) as url:
        yield url


def _spec(kind: str, request: pytest.FixtureRequest) -> Any:
    spec, _, needs = KINDS[kind]
    if needs is not None and not needs.is_file():
        pytest.skip(f"no {needs}")
    if callable(spec):
        return spec
    return spec.format(url=request.getfixturevalue("live_url")) if "{url}" in spec else spec


def _batch(agent: Agent, games: list[Game], rows: list[np.ndarray], per_table: int) -> list[int]:
    """``act_batch`` table by table (one rules array per call), in the positions' order."""
    out: list[int] = []
    for lo in range(0, len(games), per_table):
        hi = lo + per_table
        masks = np.stack([g.legal_mask() for g in games[lo:hi]]).astype(np.int8)
        acts = agent.act_batch(np.stack(rows[lo:hi]), games[lo].rules_array, None, masks)
        assert acts.shape == (hi - lo,) and np.issubdtype(acts.dtype, np.integer)
        out += [int(a) for a in acts]
    return out


@pytest.fixture(scope="module", params=list(KINDS))
def answers(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """One kind's answers: ``act`` on the full games, ``again`` from a second agent,
    ``view`` on each seat's view; for batched kinds ``batch`` (the engine rows) and
    ``shuffled`` (the rows with the other seats' cards dealt again)."""
    spec = _spec(request.param, request)
    count = KINDS[request.param][1]
    games = [g for i, (rules, n) in enumerate(TABLES) for g in play_positions(count, seed=i,
                                                                              players=n, rules=rules)]
    made: list[Agent] = []

    def fresh() -> Agent:
        made.append(spec(SEED) if callable(spec) else make_agent(spec, seed=SEED))
        return made[-1]

    views = [Game.from_view(g.rules, g.players, g.opener, g.to_act, cards_str(g.hand(g.to_act)), g.events)
             for g in games]
    agent = fresh()
    out: dict[str, Any] = {"kind": request.param, "agent": agent, "games": games,
                           "act": [agent.act(g, g.to_act) for g in games]}
    again = fresh()
    out["again"] = [again.act(g, g.to_act) for g in games]
    seen = fresh()
    out["view"] = [seen.act(v, v.to_act) for v in views]
    if agent.batched:
        out["batch"] = _batch(fresh(), games, [g.state for g in games], count)
        out["shuffled"] = _batch(fresh(), games, [shuffle_hidden(g.state, g.to_act, seed=i)
                                                  for i, g in enumerate(games)], count)
    yield out
    for a in made:
        a.close()


def test_every_answer_is_a_legal_action_id(answers: dict[str, Any]) -> None:
    games = answers["games"]
    for key in ("act", "again", "view", "batch", "shuffled"):
        for g, a in zip(games, answers.get(key, [])):
            assert isinstance(a, int) and g.legal_mask()[a] == 1, f"{answers['kind']} {key}: {a}"
    assert len({len(g.legal_actions()) for g in games}) > 2  # real choices, not forced moves


def test_act_agrees_with_act_batch(answers: dict[str, Any]) -> None:
    if "batch" not in answers:
        pytest.skip(f"{answers['kind']} has no batched form")
    assert answers["batch"] == answers["act"]


def test_the_same_seed_gives_the_same_answers(answers: dict[str, Any]) -> None:
    assert answers["again"] == answers["act"]


def test_answers_read_only_the_seats_own_view(answers: dict[str, Any]) -> None:
    assert answers["view"] == answers["act"], "the seat's view alone changed an answer"
    if "shuffled" in answers:
        assert answers["shuffled"] == answers["batch"], "the other seats' cards changed an answer"


def test_refuses_a_seat_whose_turn_it_is_not(answers: dict[str, Any]) -> None:
    g = answers["games"][0]
    with pytest.raises(ValueError, match="turn"):
        answers["agent"].act(g, (g.to_act + 1) % g.players)
