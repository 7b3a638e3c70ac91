"""The environments: Gymnasium SamLoc-v0 and its vector form, the self-play
batch, PettingZoo AEC.  API checkers, masks, rewards, determinism, and that
every form deals and plays the same games for the same seeds and actions."""

from __future__ import annotations

import functools
import json
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from sam_env import core
from sam_env.actions import NO_SAM, NUM_ACTIONS, SAM
from sam_env.batch import IllegalActionError
from sam_env.bench import bench_env
from sam_env.cards import card_str
from sam_env.game import Game
from sam_env.gym_env import SamLocEnv, SamLocVectorEnv
from sam_env.obs import OBS_SIZE
from sam_env.rules import RuleSet
from sam_env.vector import OpponentGames, SelfPlayBatch

PZ_HEURISTIC_WARNINGS = (  # PettingZoo warns so for every Dict-observation env it does not list by name
    "Observation space for each agent probably should be", "Observation is not a NumPy array",
    "Action mask numpy array is all zeros")


def det_policy(obs: np.ndarray, mask: np.ndarray) -> int:
    """A deterministic function of what the seat sees; never declares Sâm (so every seat is asked)."""
    legal = np.flatnonzero(mask)
    if mask[NO_SAM]:
        return NO_SAM
    h = int(np.round(obs.astype(np.float64) @ np.arange(1, OBS_SIZE + 1) * 7)) % len(legal)
    return int(legal[h])


def first_legal(obs: np.ndarray, mask: np.ndarray) -> int:
    return int(np.argmax(mask))


class FirstLegalByGame:
    """An agent in the agents-package style: act(game, seat) with a Game."""

    def __init__(self):
        self.calls = 0

    def act(self, game: Game, seat: int) -> int:
        assert game.to_act == seat and game.hand(seat) is not None
        self.calls += 1
        return game.legal_actions()[0]


class FirstLegalBatch:
    def __init__(self):
        self.rows = 0

    def act_batch(self, states, rule_array, obs, masks):
        assert states.shape[0] == obs.shape[0] == masks.shape[0]
        self.rows += len(states)
        return masks.argmax(1)


# ---- Gymnasium -------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kwargs", [{}, {"rules": "s666pg", "players": 5, "learner_seat": 2},
                                    {"rules": "online", "players": 2, "reward_scale": 0.05},
                                    {"opponents": first_legal}])
def test_check_env_passes_with_warnings_as_errors(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gymnasium.make("SamLoc-v0", **kwargs)
        check_env(env.unwrapped)
        env.close()


def test_registration_and_make_vec_give_the_batched_env():
    assert gymnasium.spec("SamLoc-v0").vector_entry_point == "sam_env.gym_env:SamLocVectorEnv"
    envs = gymnasium.make_vec("SamLoc-v0", num_envs=5, vectorization_mode="vector_entry_point",
                              rules="mien_bac", players=3)
    assert isinstance(envs, SamLocVectorEnv) and not isinstance(envs, gymnasium.vector.SyncVectorEnv)
    assert envs.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
    assert envs.num_envs == 5 and envs.players == 3 and envs.rules.name == "mien_bac"
    obs, info = envs.reset(seed=4)
    assert envs.observation_space.contains(obs)
    assert obs["observation"].shape == (5, OBS_SIZE) and obs["action_mask"].dtype == np.int8
    rng = np.random.default_rng(0)
    ends = 0
    returns = np.zeros(5)
    for _ in range(300):
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in obs["action_mask"]])
        obs, rew, term, trunc, info = envs.step(acts)
        returns += rew
        assert envs.observation_space.contains(obs) and not trunc.any()
        np.testing.assert_array_equal(info["action_mask"], obs["action_mask"])
        assert (obs["action_mask"].sum(1) > 0).all()   # every env is at a decision of its learner
        if term.any():
            ends += int(term.sum())
            assert set(np.flatnonzero(info["_final_obs"])) == set(np.flatnonzero(term))
            for i in np.flatnonzero(term):
                assert returns[i] == info["final_info"]["scores"][i][info["final_info"]["seat"][i]]
                assert info["final_info"]["scores"][i].sum() == 0
                assert info["final_obs"][i]["action_mask"].sum() == 0
                returns[i] = 0
    assert ends > 20
    # the package-qualified id imports the module itself
    gymnasium.make("sam_env.gym_env:SamLoc-v0").close()


def test_episode_return_is_the_final_score_and_scales():
    for scale in (1.0, 0.1):
        env = gymnasium.make("SamLoc-v0", players=4, reward_scale=scale)
        obs, info = env.reset(seed=5)
        rng = np.random.default_rng(1)
        for _ in range(40):
            total, term = 0.0, False
            while not term:
                assert info["action_mask"].sum() > 0
                obs, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
                total += r
            assert info["scores"].sum() == 0
            assert total == pytest.approx(info["scores"][info["seat"]] * scale)
            obs, info = env.reset()
        env.close()


def test_learner_seat_fixed_or_random():
    env = SamLocEnv(players=5, learner_seat=3)
    seats = set()
    for s in range(10):
        _, info = env.reset(seed=s)
        seats.add(info["seat"])
    assert seats == {3}
    env = SamLocEnv(players=5)
    assert len({env.reset(seed=s)[1]["seat"] for s in range(30)}) == 5


def test_illegal_actions_raise_or_are_replaced():
    env = SamLocEnv(illegal_action="raise")
    obs, _ = env.reset(seed=0)
    bad = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    with pytest.raises(IllegalActionError, match="not legal for the learning seat"):
        env.step(bad)
    env = SamLocEnv()
    obs, _ = env.reset(seed=0)
    _, _, _, _, info = env.step(bad)
    assert info["illegal_action"] is True
    env.reset(seed=0)
    with pytest.raises(ValueError, match="one integer"):
        env.step(1.5)
    with pytest.raises(ValueError, match="illegal_action must be"):
        SamLocEnv(illegal_action="ignore")
    with pytest.raises(ValueError, match="opponents must be one spec or a list of 3"):
        SamLocEnv(opponents=["random"])
    with pytest.raises(ValueError, match="is not 'random', a callable"):
        SamLocEnv(opponents=42)
    with pytest.raises(ValueError, match="players must be an integer from 2 to 4"):
        SamLocEnv(rules="online", players=5)
    env = SamLocEnv()
    env.reset(seed=1)
    term = False
    while not term:
        _, _, term, _, _ = env.step(first_legal(None, env.games.masks[0]))
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step(0)


def test_render_ansi():
    env = gymnasium.make("SamLoc-v0", render_mode="ansi")
    env.reset(seed=2)
    text = env.render()
    assert "you" in text and "cards left" in text


# ---- masks equal the engine's legal moves ---------------------------------------------------
@pytest.mark.parametrize("rules,players",
                         [("hoi_quan_bai", 4), ("online", 4), ("s666pg", 5), ("mien_bac", 2)])
def test_masks_are_exactly_the_engine_legal_moves(rules, players):
    """Each mask bit is 1 exactly when the engine's move checker accepts that action (all 201)."""
    sp = SelfPlayBatch(rules, players, num_envs=64, seed=3)
    rng = np.random.default_rng(2)
    seat, obs, mask = sp.reset()
    rule_array = sp.rule_array
    for _ in range(60):
        for g in range(sp.num_envs):
            st = sp.states[g]
            assert seat[g] == st[core.O_TO_ACT]
            ok = [core.check_action(st, rule_array, int(seat[g]), a) == core.OK for a in range(NUM_ACTIONS)]
            np.testing.assert_array_equal(mask[g], np.array(ok, dtype=np.int8))
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        acts = np.where(mask[:, NO_SAM] == 1, NO_SAM, acts)
        seat, obs, mask, _, _ = sp.step(acts)


def test_gym_and_aec_masks_match_game_legal_moves():
    env = SamLocEnv(players=3, opponents=FirstLegalByGame(), learner_seat=1)
    obs, info = env.reset(seed=9)
    for _ in range(200):
        game = env.game
        assert game.to_act == 1
        want = np.zeros(NUM_ACTIONS, np.int8)
        want[game.legal_actions()] = 1
        np.testing.assert_array_equal(obs["action_mask"], want)
        obs, _, term, _, info = env.step(det_policy(obs["observation"], obs["action_mask"]))
        if term:
            obs, info = env.reset()


# ---- determinism ----------------------------------------------------------------------------
def _gym_trajectory(seed: int, steps: int, **kw) -> list:
    env = SamLocEnv(**kw)
    obs, info = env.reset(seed=seed)
    out = [obs["observation"].tobytes()]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, r, term, _, info = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        out.append((obs["observation"].tobytes(), r, term, info["seat"]))
        if term:
            obs, info = env.reset()
            out.append(obs["observation"].tobytes())
    return out


def test_same_seed_same_trajectories_single_and_vector():
    a, b, c = _gym_trajectory(3, 300), _gym_trajectory(3, 300), _gym_trajectory(4, 300)
    assert a == b and a != c

    def vec(seed):
        envs = SamLocVectorEnv(num_envs=6, players=4)
        obs, _ = envs.reset(seed=seed)
        rng = np.random.default_rng(0)
        out = []
        for _ in range(100):
            obs, r, term, _, _ = envs.step(np.array(
                [rng.choice(np.flatnonzero(m)) for m in obs["action_mask"]]))
            out.append((obs["observation"].tobytes(), r.tobytes(), term.tobytes()))
        return out
    assert vec(8) == vec(8) and vec(8) != vec(9)

    def selfplay(seed):
        sp = SelfPlayBatch("online", 4, num_envs=16, seed=seed)
        seat, obs, mask = sp.reset(seed)
        rng = np.random.default_rng(0)
        out = []
        for _ in range(100):
            seat, obs, mask, rew, done = sp.step(np.array([rng.choice(np.flatnonzero(m)) for m in mask]))
            out.append((seat.tobytes(), obs.tobytes(), rew.tobytes(), done.tobytes()))
        return out
    assert selfplay(5) == selfplay(5) and selfplay(5) != selfplay(6)


# ---- every form plays the same games ----------------------------------------------------------
def _single_runs(seed: int, steps: int, **kw) -> list:
    """(obs, reward, terminated) of the learner over ``steps`` steps of SamLoc-v0, games in sequence."""
    env = SamLocEnv(**kw)
    obs, _ = env.reset(seed=seed)
    out = []
    for _ in range(steps):
        o = obs["observation"]
        obs, r, term, _, _ = env.step(det_policy(o, obs["action_mask"]))
        out.append((o.tobytes(), r, term))
        if term:
            obs, _ = env.reset()
    return out


@pytest.mark.parametrize("opponents", ["random", [det_policy, "random", FirstLegalBatch()]])
def test_vector_env_plays_the_single_env_games(opponents):
    """Env i of the vector env reset with seed s is SamLoc-v0 reset with s + i (fast and Python paths)."""
    n_envs, steps = 4, 120
    envs = SamLocVectorEnv(num_envs=n_envs, players=4, opponents=opponents)
    obs, _ = envs.reset(seed=20)
    got = [[] for _ in range(n_envs)]
    for _ in range(steps):
        o = obs["observation"].copy()
        acts = np.array([det_policy(o[i], obs["action_mask"][i]) for i in range(n_envs)])
        obs, r, term, _, _ = envs.step(acts)
        for i in range(n_envs):
            got[i].append((o[i].tobytes(), r[i], bool(term[i])))
    for i in range(n_envs):
        assert got[i] == _single_runs(20 + i, steps, players=4, opponents=opponents)
    assert sum(t for run in got for _, _, t in run) > 5


def test_fast_path_equals_python_path():
    """The compiled all-random-opponent path and the general Python path are the same games."""
    def run(force_python):
        og = OpponentGames(RuleSet.preset("hoi_quan_bai"), 5, num_envs=8, opponents="random")
        og.all_random = not force_python
        og.reset(123)
        rng = np.random.default_rng(4)
        out = []
        for _ in range(150):
            acts = np.array([rng.choice(np.flatnonzero(m)) for m in og.masks])
            acts[::3] = 0  # some illegal actions, replaced from the game's own stream
            og.step(acts)
            out.append((og.obs.tobytes(), og.delta.tobytes(), og.terminated.tobytes(), og.illegal.tobytes(),
                        og.learners.tobytes()))
        return out, og.skipped
    assert run(False) == run(True)


def test_selfplay_batch_plays_the_single_env_games():
    """Game g of the self-play batch (seed s) is SamLoc-v0 (seed s + g) when all seats play alike."""
    n_envs, seed = 3, 40
    sp = SelfPlayBatch("hoi_quan_bai", 4, num_envs=n_envs, seed=seed)
    seat, obs, mask = sp.reset(seed)
    seen = [[] for _ in range(n_envs)]          # seat 0's observations, in order
    returns = [[0.0] for _ in range(n_envs)]     # seat 0's return per game
    for _ in range(400):
        for g in range(n_envs):
            if seat[g] == 0:
                seen[g].append(obs[g].tobytes())
        acts = np.array([det_policy(obs[g], mask[g]) for g in range(n_envs)])
        seat, obs, mask, rew, done = sp.step(acts)
        assert (rew.sum(1) == 0).all()
        for g in range(n_envs):
            returns[g][-1] += rew[g, 0]
            if done[g]:
                returns[g].append(0.0)
    for g in range(n_envs):
        env = SamLocEnv(players=4, opponents=det_policy, learner_seat=0)
        obs1, _ = env.reset(seed=seed + g)
        ret = [0.0]
        for k, want in enumerate(seen[g]):
            assert obs1["observation"].tobytes() == want, f"game slot {g}, learner step {k}"
            obs1, r, term, _, _ = env.step(det_policy(obs1["observation"], obs1["action_mask"]))
            ret[-1] += r
            if term:
                ret.append(0.0)
                obs1, _ = env.reset()
        done_both = min(len(ret), len(returns[g])) - 1   # games finished in both runs
        assert done_both > 2
        assert ret[:done_both] == returns[g][:done_both]


def test_selfplay_rewards_replay_to_the_game_result():
    """Per-seat rewards summed over a game equal the scores of the same game replayed by Game."""
    sp = SelfPlayBatch("mien_bac", 4, num_envs=8, seed=2, copy=False)
    seat, obs, mask = sp.reset()
    deals = [(sp.game_batch.deals[g].copy(), int(sp.states[g, core.O_OPENER])) for g in range(8)]
    actions = [[] for _ in range(8)]
    totals = np.zeros((8, 5))
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(400):
        acts = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        acts = np.where(mask[:, SAM] == 1, NO_SAM, acts)
        for g in range(8):
            actions[g].append(int(acts[g]))
        seat, obs, mask, rew, done = sp.step(acts)
        totals += rew
        for g in np.flatnonzero(done):
            hands, opener = deals[g]
            game = Game(RuleSet.parse("mien_bac"), 4, [list(map(int, h)) for h in hands], opener)
            for a in actions[g]:
                game.apply(a)
            assert game.result is not None
            assert list(game.result.scores) == totals[g, :4].tolist()
            checked += 1
            deals[g] = (sp.game_batch.deals[g].copy(), int(sp.states[g, core.O_OPENER]))
            actions[g], totals[g] = [], 0
    assert checked > 30


def test_selfplay_batch_interface_and_errors():
    sp = SelfPlayBatch(num_envs=4, seed=0)
    assert (sp.num_envs, sp.players, sp.obs_size, sp.num_actions) == (4, 4, OBS_SIZE, NUM_ACTIONS)
    assert sp.rules.name == "hoi_quan_bai" and sp.game_batch.states is sp.states
    seat, obs, mask = sp.reset(1)
    assert seat.dtype == np.int64 and obs.dtype == np.float32 and mask.dtype == np.int8
    before = sp.states.copy()
    acts = mask.argmax(1)
    acts[2] = int(np.flatnonzero(mask[2] == 0)[0])
    with pytest.raises(IllegalActionError, match="game 2: action"):
        sp.step(acts)
    np.testing.assert_array_equal(sp.states, before)   # nothing moved
    with pytest.raises(ValueError, match="actions must have shape"):
        sp.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="num_envs must be a positive integer"):
        SelfPlayBatch(num_envs=0)
    out = sp.step(mask.argmax(1))
    kept = [a.copy() for a in out]
    nxt = sp.step(out[2].argmax(1))   # fresh arrays by default: the next step overwrites none of them
    for a, b, c in zip(out, kept, nxt):
        assert a is not c
        np.testing.assert_array_equal(a, b)


def test_opponent_kinds_play_identically():
    """An act(game, seat) agent, an act_batch agent and a callable with the same choices give one game."""
    def run(opp):
        return _single_runs(6, 150, players=3, learner_seat=0, opponents=opp)
    by_game, by_batch = FirstLegalByGame(), FirstLegalBatch()
    a, b, c = run(by_game), run(by_batch), run(first_legal)
    assert a == b == c
    assert by_game.calls > 100 and by_batch.rows > 100


# ---- PettingZoo -------------------------------------------------------------------------------
@pytest.mark.parametrize("rules,players", [("hoi_quan_bai", 4), ("online", 2), ("s666pg", 5)])
def test_pettingzoo_api_and_seed_tests(rules, players):
    from pettingzoo.test import api_test, seed_test

    from sam_env.pettingzoo_env import env
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for msg in PZ_HEURISTIC_WARNINGS:
            warnings.filterwarnings("ignore", message=msg)
        api_test(env(rules=rules, players=players), num_cycles=200)
        seed_test(functools.partial(env, rules=rules, players=players), num_cycles=200)


def test_pettingzoo_game_matches_selfplay_and_view():
    """AEC seed s deals game 0 of the self-play batch with seed s; rewards sum to the result."""
    from sam_env.obs import encode
    from sam_env.pettingzoo_env import env
    e = env(rules="hoi_quan_bai", players=4)
    e.reset(seed=77)
    sp = SelfPlayBatch("hoi_quan_bai", 4, num_envs=1, seed=77)
    seat, sobs, smask = sp.reset(77)
    totals = {a: 0.0 for a in e.possible_agents}
    views = 0
    for agent in e.agent_iter():
        obs, reward, term, trunc, info = e.last()
        totals[agent] += reward
        if term or trunc:
            e.step(None)
            continue
        assert agent == f"player_{seat[0]}"
        np.testing.assert_array_equal(obs["observation"], sobs[0])
        np.testing.assert_array_equal(obs["action_mask"], smask[0])
        a = det_policy(obs["observation"], obs["action_mask"])
        seat, sobs, smask, _, _ = sp.step(np.array([a]))
        e.step(a)
        views += 1
    assert views > 10
    scores = info["scores"]
    assert [totals[f"player_{i}"] for i in range(4)] == scores and sum(scores) == 0
    # every agent observes its own view, the one encode() gives for the same game
    e.reset(seed=3)
    raw = e.unwrapped
    g = Game.from_deal("hoi_quan_bai", [[card_str(int(c)) for c in raw._hands[s]] for s in range(4)],
                       int(raw.state_row[core.O_OPENER]))
    for _ in range(12):
        for s, agent in enumerate(e.possible_agents):
            np.testing.assert_array_equal(e.observe(agent)["observation"], encode(g, s))
        a = det_policy(*e.observe(e.agent_selection).values())
        e.step(a)
        g.apply(a)
    with pytest.raises(ValueError, match="not legal"):
        e.step(int(np.flatnonzero(e.observe(e.agent_selection)["action_mask"] == 0)[0]))


# ---- benchmark entry point ----------------------------------------------------------------------
def test_bench_env_reports_the_contract_keys(capsys):
    from samloc.commands.bench import main
    assert main(["--env", "--num-envs", "64", "--steps", "6400", "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(last) == {"num_envs", "steps", "seconds", "steps_per_s", "machine"}
    assert last["num_envs"] == 64 and last["steps"] == 6400 and last["steps_per_s"] > 0
    single = bench_env("hoi_quan_bai", 3, 1, 500, 0)
    assert single["num_envs"] == 1 and single["steps"] == 500


def test_core_obs_and_selfplay_import_neither_gymnasium_nor_torch():
    import subprocess
    import sys
    code = ("import sys, sam_env, sam_env.game, sam_env.obs, sam_env.vector;"
            "bad = [m for m in ('gymnasium', 'torch', 'pettingzoo') if m in sys.modules];"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
