"""RLlib 2.60 (new API stack): the MultiAgentEnv passes RLlib's env checker and plays SamLoc-v0's
games; PPO with the action-masking module samples with one remote env runner and with none (the
example, at a tiny size), and logs the learner's lá per game; an iteration that sampled nothing is an
error.  One Ray for all."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

import ray  # noqa: E402
from ray.rllib.env.wrappers.pettingzoo_env import PettingZooEnv  # noqa: E402
from ray.rllib.utils.pre_checks.env import check_multiagent_environments  # noqa: E402

from sam_env.gym_env import SamLocEnv  # noqa: E402
from sam_env.integrations.rllib import (  # noqa: E402
    GAMES, LA_PER_GAME, LA_SUM, LEARNER, LaPerGame, SamLocMultiAgentEnv, init_local_ray, masked_ppo_config)
from sam_env.pettingzoo_env import env as aec_env  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
pytestmark = [pytestmark, pytest.mark.slow]  # RLlib on a local Ray
ROOT = Path(__file__).resolve().parent.parent


def test_env_checker_passes_and_an_unmasked_action_is_replaced():
    env = SamLocMultiAgentEnv({"players": 4})
    check_multiagent_environments(env)   # resets, then steps a sampled (unmasked) action
    obs, infos = env.reset(seed=3)
    assert set(obs) == set(infos) == {LEARNER} and set(obs[LEARNER]) == {"observations", "action_mask"}
    assert env.get_observation_space(LEARNER).contains(obs[LEARNER])
    bad = int(np.flatnonzero(obs[LEARNER]["action_mask"] == 0)[0])
    _, rew, term, trunc, info = env.step({LEARNER: bad})
    assert info[LEARNER]["illegal_action"] is True and "action_mask" not in info[LEARNER]
    assert set(term) == set(trunc) == {LEARNER, "__all__"} and set(rew) == {LEARNER}


def test_the_aec_env_through_rllibs_wrapper_needs_illegal_action_random():
    """The researcher's path: RLlib's own PettingZoo wrapper; its checker's unmasked action."""
    for illegal_action in ("random", "raise"):
        wrapped = PettingZooEnv(aec_env(players=3, illegal_action=illegal_action))
        for space in wrapped.action_spaces.values():
            space.seed(0)   # the checker samples from them: an illegal action, this seed
        if illegal_action == "random":
            check_multiagent_environments(wrapped)
        else:
            with pytest.raises(ValueError, match="step"):
                check_multiagent_environments(wrapped)


def test_it_plays_samloc_v0s_games():
    """Same seed, same actions: SamLoc-v0's observations, rewards, ends and infos, game after game."""
    kw = {"rules": "online", "players": 3, "opponents": "heuristic", "reward_scale": 0.05}
    ma, gym = SamLocMultiAgentEnv(kw), SamLocEnv(**kw)
    o1, _ = ma.reset(seed=8)
    o2, _ = gym.reset(seed=8)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(200):
        np.testing.assert_array_equal(o1[LEARNER]["observations"], o2["observation"])
        np.testing.assert_array_equal(o1[LEARNER]["action_mask"], o2["action_mask"])
        a = int(rng.choice(np.flatnonzero(o2["action_mask"])))
        o1, r1, t1, _, i1 = ma.step({LEARNER: a})
        o2, r2, t2, _, i2 = gym.step(a)
        assert r1[LEARNER] == r2 and t1[LEARNER] == t1["__all__"] == t2
        assert i1[LEARNER]["seat"] == i2["seat"]
        if t2:
            ends += 1
            assert list(i1[LEARNER]["scores"]) == list(i2["scores"])
            o1, _ = ma.reset()
            o2, _ = gym.reset()
    assert ends > 10


def test_bad_config_and_actions_are_one_line_errors():
    with pytest.raises(ValueError, match=r"env_config has unknown keys \['player'\]"):
        SamLocMultiAgentEnv({"player": 4})
    env = SamLocMultiAgentEnv({"opponents": "random"})
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action_dict has no action for 'learner'"):
        env.step({"player_0": 0})


def test_an_iteration_that_sampled_nothing_is_an_error():
    """RLlib returns such an iteration (remote runners past sample_timeout_s) with only a warning."""
    algo = SimpleNamespace(config=SimpleNamespace(sample_timeout_s=60.0))
    with pytest.raises(RuntimeError, match="iteration 3 sampled no env steps.*sample_timeout_s=60.0"):
        LaPerGame().on_train_result(algorithm=algo, result={"training_iteration": 3})
    result = {"training_iteration": 1, "env_runners": {"num_env_steps_sampled": 10, LA_SUM: -30.0, GAMES: 4}}
    LaPerGame().on_train_result(algorithm=algo, result=result)
    assert result["env_runners"][LA_PER_GAME] == -7.5


@pytest.fixture(scope="module")
def local_ray():
    init_local_ray(num_cpus=2)
    yield
    ray.shutdown()


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)")
def test_the_local_ray_listens_on_loopback_only(local_ray):
    from test_training_ray import LOOPBACK, _descendants, _listening
    seen = _listening(_descendants({os.getpid()}))
    assert len(seen) >= 3, seen   # the driver, GCS, raylet: each serves gRPC
    assert all(addr in LOOPBACK for addr, _ in seen), seen


def test_ppo_with_the_masking_module_samples_with_one_env_runner(local_ray):
    """The checker off (its unmasked action would raise) and illegal actions raising: the masking
    module never picks one; the env compiles in its constructor, not in the timed first sample."""
    env_config = {"players": 4, "opponents": "heuristic", "illegal_action": "raise"}
    config = (masked_ppo_config(env_config, hidden=(32,))
              .environment(disable_env_checking=True)
              .env_runners(num_env_runners=1, rollout_fragment_length=100)
              .training(train_batch_size_per_learner=200, minibatch_size=100, num_epochs=1)
              .debugging(seed=0))
    algo = config.build_algo()
    try:
        result = algo.train()
    finally:
        algo.stop()
    er = result["env_runners"]
    assert er["num_env_steps_sampled"] >= 200
    assert er[GAMES] == er["num_episodes"] > 10
    assert np.isfinite(er[LA_PER_GAME]) and er[LA_PER_GAME] == er[LA_SUM] / er[GAMES]
    assert LEARNER in result["learners"]   # the one module trained


def test_the_example_trains_without_env_runners_and_scores_before_and_after(local_ray, tmp_path):
    path = ROOT / "examples" / "rllib_ppo_masked.py"
    spec = importlib.util.spec_from_file_location("example_rllib_ppo_masked", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = example.main(["--iterations", "2", "--num-env-runners", "0", "--batch", "200", "--minibatch", "100",
                        "--epochs", "1", "--hidden", "32", "--eval-deals", "5", "--rules", "online",
                        "--players", "3", "--out", str(tmp_path / "rl")])
    assert out["log_dir"] == str(tmp_path / "rl") and Path(out["checkpoint"]).parent == tmp_path / "rl"
    assert any(Path(out["checkpoint"]).iterdir())  # the algorithm's state, for Algorithm.from_checkpoint
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # as other tests
    acc = EventAccumulator(out["log_dir"])
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"charts/episodic_return", "charts/SPS", "losses/policy_loss", "losses/value_loss"} <= tags, tags
    assert out["env_steps"] >= 400 and [row["iteration"] for row in out["iterations"]] == [1, 2]
    assert all(row["games"] > 0 and np.isfinite(row[LA_PER_GAME]) for row in out["iterations"])
    for when in ("before", "after"):
        s = out[when]
        assert s["games"] == 15 and s["ci95"][0] <= s["mean_la"] <= s["ci95"][1]


def test_the_masking_module_masks_and_imports_no_deprecated_class() -> None:
    """Illegal moves' logits are the lowest float, legal ones as the network gives them; values come from the
    vector alone; and importing it warns of no deprecated module (RLlib's example masking module builds on
    PPOTorchRLModule, whose import warns)."""
    import subprocess
    import sys

    import torch
    from gymnasium import spaces
    from ray.rllib.core.columns import Columns

    from sam_env.integrations.rllib import MaskedPPOTorchModule, rllib_observation_space

    r = subprocess.run([sys.executable, "-c", "import sam_env.integrations.rllib"], capture_output=True,
                       text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "PPOTorchRLModule" not in r.stderr + r.stdout, r.stderr[-2000:]
    module = MaskedPPOTorchModule(observation_space=rllib_observation_space(),
                                  action_space=spaces.Discrete(201),
                                  model_config={"fcnet_hiddens": [16], "head_fcnet_hiddens": []})
    obs = torch.rand(3, module.observation_space["observations"].shape[0])
    legal = torch.zeros(3, 201, dtype=torch.int8)
    legal[:, [0, 5, 7]] = 1
    batch = {Columns.OBS: {"observations": obs, "action_mask": legal}}
    for out in (module.forward_inference(batch), module.forward_train(batch)):
        logits = out[Columns.ACTION_DIST_INPUTS]
        assert torch.isfinite(logits[:, [0, 5, 7]]).all()
        assert (logits[legal == 0] == torch.finfo(logits.dtype).min).all()
    # batch untouched
    assert module.compute_values(batch).shape == (3,) and isinstance(batch[Columns.OBS], dict)
