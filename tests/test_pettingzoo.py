"""The PettingZoo faces: the AEC env's ``illegal_action`` option and the parallel env
(PettingZoo's checkers, errors, and that it plays exactly the AEC env's games)."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test, seed_test
from test_envs import det_policy

from sam_env import core
from sam_env.batch import IllegalActionError
from sam_env.gym_env import SamLocEnv
from sam_env.pettingzoo_env import SamLocParallelEnv, env, parallel_env, raw_env


def first_illegal(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask == 0)[0])


# ---- AEC: illegal_action ----------------------------------------------------------------------
def test_aec_raises_on_an_illegal_action_by_default_and_nothing_moves():
    e = env(rules="hoi_quan_bai", players=4)
    e.reset(seed=0)
    agent = e.agent_selection
    bad = first_illegal(e.observe(agent)["action_mask"])
    before = e.unwrapped.state_row.copy()
    with pytest.raises(IllegalActionError, match=f"{agent}: action {bad} is not legal now"):
        e.step(bad)
    with pytest.raises(IllegalActionError, match="action 10000 is not legal now"):
        e.step(10_000)
    with pytest.raises(ValueError, match="one integer from 0 to 200"):
        e.step(1.5)
    np.testing.assert_array_equal(e.unwrapped.state_row, before)
    assert e.agent_selection == agent
    with pytest.raises(ValueError, match="illegal_action must be 'raise' or 'random', not 'ignore'"):
        raw_env(illegal_action="ignore")


def test_aec_random_replaces_an_illegal_action_and_says_so():
    e = env(rules="online", players=3, illegal_action="random")
    e.reset(seed=4)
    raw = e.unwrapped
    flags = []
    for agent in e.agent_iter():
        obs, _, term, trunc, info = e.last()
        if term or trunc:
            e.step(None)
            continue
        mask = obs["action_mask"]
        bad = len(flags) % 2 == 0
        before = raw.state_row.copy()
        e.step(first_illegal(mask) if bad else det_policy(obs["observation"], mask))
        assert raw.infos[agent]["illegal_action"] is bad
        flags.append(bad)
        assert not np.array_equal(raw.state_row, before)   # a legal move was made in its place
    assert len(flags) > 10 and sum(info["scores"]) == 0


def _choose(k: int, obs: dict) -> int:
    """Every other decision illegal (replaced), the rest det_policy."""
    mask = obs["action_mask"]
    return first_illegal(mask) if k % 2 == 0 else det_policy(obs["observation"], mask)


def test_aec_replacements_follow_samloc_v0s_seed_convention():
    """Word 1 of the seed replaces illegal actions in both envs: with seat 0 sending illegal
    actions half the time and the other seats playing alike, SamLoc-v0 (learner seat 0) and the
    AEC env play the same games, game after game."""
    seed, steps = 31, 160
    gym = SamLocEnv(players=4, opponents=det_policy, learner_seat=0, illegal_action="random")
    obs, _ = gym.reset(seed=seed)
    want_seen, want_flags, want_returns = [], [], [0.0]
    for k in range(steps):
        want_seen.append(obs["observation"].tobytes())
        obs, r, term, _, info = gym.step(_choose(k, obs))
        want_flags.append(info["illegal_action"])
        want_returns[-1] += r
        if term:
            want_returns.append(0.0)
            obs, _ = gym.reset()

    aec = raw_env(players=4, illegal_action="random")
    aec.reset(seed=seed)
    seen, flags, returns = [], [], [0.0]
    while len(seen) < steps:
        agent = aec.agent_selection
        o = aec.observe(agent)
        if agent == "player_0":
            seen.append(o["observation"].tobytes())
            aec.step(_choose(len(seen) - 1, o))
            flags.append(aec.infos[agent]["illegal_action"])
        else:
            aec.step(det_policy(o["observation"], o["action_mask"]))
        returns[-1] += aec.rewards["player_0"]
        if all(aec.terminations.values()):
            returns.append(0.0)
            aec.reset()
    assert seen == want_seen and flags == want_flags
    done = min(len(returns), len(want_returns)) - 1   # games finished in both
    assert done >= 3 and returns[:done] == want_returns[:done]
    assert any(flags) and not all(flags)


# ---- parallel ---------------------------------------------------------------------------------
@pytest.mark.parametrize("rules,players", [("hoi_quan_bai", 4), ("online", 2), ("s666pg", 5)])
def test_parallel_api_and_seed_tests(rules, players):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(parallel_env(rules=rules, players=players), num_cycles=1000)
        # the seed test sends unmasked actions: replaced from the seed's second word
        parallel_seed_test(functools.partial(parallel_env, rules=rules, players=players,
                                             illegal_action="random"), num_cycles=500)
        seed_test(functools.partial(env, rules=rules, players=players, illegal_action="random"),
                  num_cycles=200)


def _aec_run(seed: int, steps: int, choose) -> list:
    """Every agent's observation and reward after each decision of the AEC env, games in sequence."""
    e = raw_env(players=4, illegal_action="random")
    e.reset(seed=seed)
    out = []
    for k in range(steps):
        agent = e.agent_selection
        e.step(choose(k, e.observe(agent)))
        over = all(e.terminations.values())
        out.append(({a: e.observe(a)["observation"].tobytes() for a in e.possible_agents}, dict(e.rewards),
                    over, e.infos[agent]["illegal_action"], None if over else e.agent_selection))
        if over:
            e.reset()
    return out


def test_parallel_plays_the_aec_games():
    """Same seed, same actions of the seat to act: the same observations, rewards and ends, game
    after game; the others' actions (junk here) are ignored."""
    def choose(k, o):
        mask = o["action_mask"]
        return first_illegal(mask) if k % 5 == 0 else det_policy(o["observation"], mask)

    seed, steps = 12, 250
    p = parallel_env(players=4, illegal_action="random")
    obs, infos = p.reset(seed=seed)
    got, ends = [], 0
    for k in range(steps):
        active = infos["player_0"]["active_agent"]
        assert all(infos[a]["active_agent"] == active for a in p.agents)
        assert [a for a in p.agents if obs[a]["action_mask"].any()] == [active]
        acts = {a: 10_000 for a in p.agents}
        acts[active] = choose(k, obs[active])
        obs, rew, term, trunc, infos = p.step(acts)
        over = all(term.values())
        assert set(term) == set(rew) == set(obs) == set(infos) == set(p.possible_agents)
        assert not any(trunc.values()) and (over or not any(term.values()))
        got.append(({a: obs[a]["observation"].tobytes() for a in p.possible_agents}, rew, over,
                    infos[active]["illegal_action"], None if over else infos["player_0"]["active_agent"]))
        if over:
            ends += 1
            assert p.agents == [] and all(obs[a]["action_mask"].sum() == 0 for a in obs)
            scores = infos["player_0"]["scores"]
            assert all(infos[a]["scores"] == scores for a in p.possible_agents) and sum(scores) == 0
            obs, infos = p.reset()
    assert got == _aec_run(seed, steps, choose)
    assert ends >= 3


def test_parallel_errors():
    p = SamLocParallelEnv(rules="mien_bac", players=3)
    obs, infos = p.reset(seed=1)
    active = infos["player_0"]["active_agent"]
    other = next(a for a in p.agents if a != active)
    with pytest.raises(ValueError, match=f"actions has none for {active}, the agent to act"):
        p.step({other: 0})
    with pytest.raises(ValueError, match="actions must be a dict from agents"):
        p.step({"player_7": 0, active: 0})
    with pytest.raises(ValueError, match="actions must be a dict"):
        p.step([0, 0, 0])
    with pytest.raises(IllegalActionError, match=f"{active}: action"):
        p.step({active: first_illegal(obs[active]["action_mask"])})
    while p.agents:
        a = infos[p.agents[0]]["active_agent"]
        obs, _, _, _, infos = p.step({a: int(np.argmax(obs[a]["action_mask"]))})
    assert int(p.aec.state_row[core.O_PHASE]) == core.PH_OVER
    with pytest.raises(RuntimeError, match="the game is over: call reset"):
        p.step({active: 0})
    assert p.render() is None
    shown = parallel_env(render_mode="ansi")
    shown.reset(seed=0)
    assert "cards left" in shown.render()
