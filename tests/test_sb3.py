"""Stable-Baselines3 without glue: ``SamLoc-v0``'s ``action_masks()`` for MaskablePPO, and the SB3
``VecEnv`` on the batched engine (``sam_env.integrations.sb3``), checked against SB3's own
``DummyVecEnv`` of ``SamLoc-v0`` envs."""

from __future__ import annotations

import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

import torch  # noqa: E402
from sb3_contrib import MaskablePPO  # noqa: E402
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecMonitor  # noqa: E402

import sam_env.gym_env  # noqa: E402,F401  (registers SamLoc-v0)
from sam_env.actions import NUM_ACTIONS  # noqa: E402
from sam_env.batch import IllegalActionError  # noqa: E402
from sam_env.integrations.sb3 import SamLocVecEnv  # noqa: E402
from sam_env.obs import OBS_SIZE  # noqa: E402


@pytest.fixture(autouse=True)
def _sb3_logs_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3 makes a log folder on every learn() (``/tmp/SB3-<time>`` unless ``SB3_LOGDIR`` says where):
    the tests' stay with their temporary files."""
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3_logs")))


TINY = {"n_steps": 32, "batch_size": 64, "n_epochs": 1, "policy_kwargs": {"net_arch": [16]}, "device": "cpu"}


def random_legal(rng: np.random.Generator, masks: np.ndarray) -> np.ndarray:
    """One uniformly random legal action per row of a bool/int mask batch."""
    return (rng.random(masks.shape) * masks).argmax(1)


def dummy(num_envs: int, **kw) -> DummyVecEnv:
    return DummyVecEnv([lambda: gymnasium.make("SamLoc-v0", **kw) for _ in range(num_envs)])


def same_obs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)


def same_info(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    return all(same_obs(a[k], b[k]) if k == "terminal_observation" else np.array_equal(a[k], b[k]) for k in a)


# ---- SamLoc-v0 for MaskablePPO, as gymnasium.make returns it ---------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"rules": "s666pg", "players": 5, "opponents": "heuristic"}])
def test_sb3_env_checker_passes_on_the_made_env(kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gymnasium.make("SamLoc-v0", **kwargs)
        check_env(env)
        env.close()


def test_action_masks_reach_through_gymnasium_make_wrappers():
    """Gymnasium 1.x wrappers forward no attributes (``env.action_masks`` is hidden), but
    ``get_wrapper_attr`` — what SB3 and sb3-contrib use — finds the env's method."""
    env = gymnasium.make("SamLoc-v0", players=4)
    assert not hasattr(env, "action_masks")
    assert is_masking_supported(env)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(200):
        m = get_action_masks(env)
        assert m.dtype == np.bool_ and m.shape == (NUM_ACTIONS,) and m.any()
        np.testing.assert_array_equal(m, obs["action_mask"] == 1)
        obs, _, term, _, _ = env.step(int(random_legal(rng, m[None])[0]))
        if term:
            ends += 1
            assert not env.get_wrapper_attr("action_masks")().any()   # the game is over: nothing legal
            obs, _ = env.reset()
    assert ends > 10
    venv = dummy(3)   # what MaskablePPO makes of a single env
    obs = venv.reset()
    np.testing.assert_array_equal(get_action_masks(venv), obs["action_mask"] == 1)


def test_vector_env_action_masks_are_its_observed_masks():
    envs = gymnasium.make_vec("SamLoc-v0", num_envs=6, vectorization_mode="vector_entry_point")
    obs, _ = envs.reset(seed=1)
    rng = np.random.default_rng(1)
    for _ in range(50):
        m = envs.action_masks()
        assert m.dtype == np.bool_ and m.shape == (6, NUM_ACTIONS)
        np.testing.assert_array_equal(m, obs["action_mask"] == 1)
        obs, _, _, _, _ = envs.step(random_legal(rng, m))


@pytest.mark.parametrize("make", ["single", "vec"])
def test_maskable_ppo_learns_with_no_wrapper(make):
    """MaskablePPO on ``gymnasium.make("SamLoc-v0")`` and on the VecEnv; ``illegal_action="raise"``
    proves every action it took was inside the masks."""
    torch.set_num_threads(1)
    kw = {"players": 3, "opponents": "random", "illegal_action": "raise", "reward_scale": 1 / 20}
    env = gymnasium.make("SamLoc-v0", **kw) if make == "single" else SamLocVecEnv(num_envs=4, **kw)
    model = MaskablePPO("MultiInputPolicy", env, seed=0, **TINY)
    model.learn(256)
    assert model.num_timesteps >= 256
    obs = model.get_env().reset()
    acts, _ = model.predict(obs, action_masks=get_action_masks(model.get_env()), deterministic=True)
    assert (obs["action_mask"][np.arange(len(acts)), acts] == 1).all()


def test_illegal_action_raise_reaches_sb3_users():
    venv = SamLocVecEnv(num_envs=2, illegal_action="raise")
    obs = venv.reset()
    bad = np.argmin(obs["action_mask"], axis=1)
    with pytest.raises(IllegalActionError, match="not legal for the learning seat"):
        venv.step(bad)


# ---- the VecEnv: SB3's contract, game for game as DummyVecEnv ---------------------------------
@pytest.mark.parametrize("kwargs", [{"players": 4},
                                    {"rules": "mien_bac", "players": 3, "opponents": "heuristic",
                                     "learner_seat": 1, "reward_scale": 0.05}])
def test_vecenv_plays_exactly_as_dummy_vec_env(kwargs):
    """Seeded alike and given the same actions, the VecEnv and SB3's DummyVecEnv of SamLoc-v0 return
    the same observations, rewards, dones, infos (terminal_observation, scores) and reset_infos."""
    n = 4
    ours, theirs = SamLocVecEnv(num_envs=n, **kwargs), dummy(n, **kwargs)
    assert ours.seed(11) == theirs.seed(11) == [11, 12, 13, 14]
    assert same_obs(ours.reset(), theirs.reset())
    rng = np.random.default_rng(2)
    ends = 0
    for _ in range(150):
        masks = get_action_masks(ours)
        np.testing.assert_array_equal(masks, get_action_masks(theirs))
        acts = random_legal(rng, masks)
        o1, r1, d1, i1 = ours.step(acts)
        o2, r2, d2, i2 = theirs.step(acts)
        assert same_obs(o1, o2)
        assert r1.dtype == r2.dtype and d1.dtype == d2.dtype
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(d1, d2)
        assert all(same_info(a, b) for a, b in zip(i1, i2))
        assert all(same_info(a, b) for a, b in zip(ours.reset_infos, theirs.reset_infos))
        ends += int(d1.sum())
    assert ends > 20
    assert ours.get_attr("seat") == theirs.get_attr("seat")


def test_vecenv_contract_shapes_terminals_masks_and_seeds():
    n, scale = 5, 0.5
    venv = SamLocVecEnv(num_envs=n, players=4, reward_scale=scale)
    assert isinstance(venv, VecEnv) and venv.num_envs == n
    assert venv.observation_space == sam_env.gym_env.observation_space()
    assert venv.action_space == gymnasium.spaces.Discrete(NUM_ACTIONS)
    venv.seed(4)
    obs = venv.reset()
    first = obs["observation"].copy()
    assert obs["observation"].shape == (n, OBS_SIZE) and obs["observation"].dtype == np.float32
    assert obs["action_mask"].shape == (n, NUM_ACTIONS) and obs["action_mask"].dtype == np.int8
    mon = VecMonitor(venv)   # SB3's episode statistics over it
    rng = np.random.default_rng(3)
    returns, episodes = np.zeros(n), 0
    for _ in range(200):
        masks = get_action_masks(mon)
        assert masks.any(1).all()   # every game is at a decision of its learner
        obs, rew, done, infos = mon.step(random_legal(rng, masks))
        assert rew.shape == (n,) and done.dtype == np.bool_
        assert all(venv.observation_space[k].contains(obs[k][i]) for k in obs for i in range(n))
        returns += rew
        for i, info in enumerate(infos):
            assert not info["illegal_action"] and not info["TimeLimit.truncated"]
            assert ("terminal_observation" in info) == done[i]
            if done[i]:
                term = info["terminal_observation"]
                assert term["observation"].shape == (OBS_SIZE,) and not term["action_mask"].any()
                assert info["scores"].sum() == 0
                assert returns[i] == pytest.approx(info["scores"][info["seat"]] * scale)
                assert info["episode"]["r"] == pytest.approx(returns[i], abs=1e-5)
                assert venv.reset_infos[i]["seat"] == venv.get_attr("seat", i)[0]
                returns[i], episodes = 0, episodes + 1
    assert episodes > 30

    def run(seed):
        if seed is not None:
            venv.seed(seed)
        out = [venv.reset()["observation"].tobytes()]
        r = np.random.default_rng(0)
        for _ in range(40):
            o, rew, d, _ = venv.step(random_legal(r, get_action_masks(venv)))
            out.append((o["observation"].tobytes(), rew.tobytes(), d.tobytes()))
        return out
    assert run(4) == run(4) != run(5)
    assert run(4)[0] == first.tobytes()
    assert run(None)[0] != first.tobytes()   # no seed: the deal streams go on
    venv._seeds = [4, 6, 7, 8, 9]
    with pytest.raises(ValueError, match="env i gets s \\+ i"):
        venv.reset()


def test_same_seed_same_maskable_ppo_policy():
    torch.set_num_threads(1)

    def weights(seed):
        model = MaskablePPO("MultiInputPolicy", SamLocVecEnv(num_envs=4, players=4), seed=seed, **TINY)
        model.learn(128)
        return torch.cat([p.detach().flatten() for p in model.policy.parameters()])
    a, b, c = weights(5), weights(5), weights(6)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_vecenv_attributes_methods_render_and_errors():
    venv = SamLocVecEnv(num_envs=3, rules="online", players=2, render_mode="ansi")
    venv.seed(0)
    obs = venv.reset()
    assert venv.get_attr("players") == [2, 2, 2] and venv.get_attr("rules", [0])[0].name == "online"
    assert venv.get_attr("render_mode") == ["ansi"] * 3 and venv.render_mode == "ansi"
    assert venv.has_attr("action_masks") and not venv.has_attr("no_such_thing")
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        venv.get_attr("no_such_thing")
    texts = venv.env_method("render")
    assert len(texts) == 3 and all("(you)" in t and "cards left" in t for t in texts)
    assert venv.env_method("render", indices=1) == texts[1:2]
    np.testing.assert_array_equal(venv.env_method("action_masks", indices=[2])[0], obs["action_mask"][2] == 1)
    assert venv.render() is None   # SB3 tiles only rgb_array images; ansi text comes from env_method
    with pytest.warns(UserWarning, match="assumes it is `rgb_array`"):
        assert venv.get_images() == [None] * 3
    assert venv.env_is_wrapped(gymnasium.Wrapper) == [False] * 3
    # reward_scale: one for all games
    venv.set_attr("reward_scale", 0.25)
    assert venv.get_attr("reward_scale") == [0.25] * 3
    with pytest.raises(ValueError, match="one for all games"):
        venv.set_attr("reward_scale", 0.5, indices=[0])
    with pytest.raises(ValueError, match="reward_scale must be a positive number"):
        venv.set_attr("reward_scale", -1)
    with pytest.raises(AttributeError, match="only reward_scale can be set"):
        venv.set_attr("players", 3)
    with pytest.raises(ValueError, match="actions must be 3 integers"):
        venv.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="actions must be 3 integers"):
        venv.step(np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="render_mode must be None or 'ansi'"):
        SamLocVecEnv(num_envs=1, render_mode="human")
    plain = SamLocVecEnv(num_envs=2)
    with pytest.warns(UserWarning, match="no `render_mode`"):
        assert plain.render() is None
    plain.close()
    venv.close()


def test_integrations_are_imported_only_on_demand():
    """``sam_env`` and its Gymnasium face load neither SB3 nor sb3-contrib; the adapter does."""
    code = ("import sys, sam_env, sam_env.gym_env, sam_env.envs, sam_env.integrations;"
            "bad = [m for m in ('stable_baselines3', 'sb3_contrib') if m in sys.modules];"
            "assert not bad, bad;"
            "import sam_env.integrations.sb3; assert 'stable_baselines3' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
