"""RLlib (2.60, new API stack): one learning seat against fixed opponents, as a MultiAgentEnv.

::

    from sam_env.integrations.rllib import masked_ppo_config
    algo = masked_ppo_config({"rules": "hoi_quan_bai", "players": 4, "opponents": "heuristic"}).build_algo()
    result = algo.train()
    result["env_runners"]["learner_la_per_game"]       # the learner's mean lá per finished game

Why a learning seat against opponents played inside the env: every seat
mapped to one trained policy in a zero-sum game makes the summed return zero
and ``episode_return_mean`` meaningless.  Here the opponents (any
``SamLoc-v0`` opponent spec, ``"heuristic"`` by default) are part of the
environment, as in ``SamLoc-v0``, so the one agent ``"learner"`` — a random
seat per game unless ``learner_seat`` is fixed — is the only one RLlib
sees; its return is its lá per game (times ``reward_scale``).  The env is a
thin adapter over :class:`sam_env.gym_env.SamLocEnv` and plays exactly its
games for the same seed and actions.

Observations are ``{"observations": float32[OBS_SIZE], "action_mask":
int8[201]}``, the keys :class:`MaskedPPOTorchModule` reads: RLlib's default PPO
network over the vector, its logits masked to the legal moves (RLlib's own example
module of this builds on a deprecated class and warns).  An
illegal action is replaced by a random legal one by default
(``illegal_action="random"``), so RLlib's env checker, which samples an
unmasked action, passes.

:class:`LaPerGame` logs the learner's lá per finished game
(``learner_la_per_game``, the mean over the games that ended in the
iteration, and ``learner_games``), and turns an iteration that sampled no
env steps into an error: RLlib's remote env runners give up after
``sample_timeout_s`` and the algorithm then returns an empty iteration with
only a log warning.

Importing this module imports ray; nothing in ``sam_env`` imports it.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np
import ray
import torch
from gymnasium import spaces
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from ..actions import NUM_ACTIONS
from ..gym_env import SamLocEnv, observation_space

#: The one agent id, and the id of the module that learns.
LEARNER = "learner"
#: Metric keys (under ``result["env_runners"]``).
LA_PER_GAME = "learner_la_per_game"
LA_SUM = "learner_la_sum"
GAMES = "learner_games"
#: The ``env_config`` keys, as ``SamLoc-v0`` takes them (``render_mode`` excepted).
ENV_KEYS = ("rules", "players", "opponents", "learner_seat", "reward_scale", "illegal_action")


def rllib_observation_space() -> spaces.Dict:
    """The learner's observation space, with the keys RLlib's masking module expects."""
    base = observation_space()
    return spaces.Dict({"observations": base["observation"], "action_mask": base["action_mask"]})


class SamLocMultiAgentEnv(MultiAgentEnv):
    """``SamLoc-v0`` for RLlib: one agent, :data:`LEARNER`, the opponents inside the env.

    ``config`` (RLlib's ``env_config``) takes :data:`ENV_KEYS`; defaults as
    ``SamLoc-v0`` except ``opponents="heuristic"``.  Each episode is one game;
    the learner acts at every env step (it is the only agent), so every step
    is an agent step and every episode ends with ``terminateds["__all__"]``.
    """

    def __init__(self, config: Mapping[str, Any] | None = None):
        super().__init__()
        cfg = dict(config or {})
        unknown = sorted(set(cfg) - set(ENV_KEYS))
        if unknown:
            raise ValueError(f"env_config has unknown keys {unknown}; it takes {list(ENV_KEYS)}")
        cfg.setdefault("opponents", "heuristic")
        self.game = SamLocEnv(**cfg)
        _compile_now(self.game, cfg)
        self.agents = self.possible_agents = [LEARNER]
        self.observation_spaces = {LEARNER: rllib_observation_space()}
        self.action_spaces = {LEARNER: spaces.Discrete(NUM_ACTIONS)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.game.reset(seed=seed, options=options)
        return {LEARNER: _obs(obs)}, {LEARNER: _info(info)}

    def step(self, action_dict: Mapping[str, Any]):
        if LEARNER not in action_dict:
            raise ValueError(f"action_dict has no action for {LEARNER!r}: {action_dict!r}")
        obs, reward, term, trunc, info = self.game.step(action_dict[LEARNER])
        return ({LEARNER: _obs(obs)}, {LEARNER: reward}, {LEARNER: term, "__all__": term},
                {LEARNER: trunc, "__all__": trunc}, {LEARNER: _info(info)})


def _compile_now(game: SamLocEnv, cfg: dict[str, Any]) -> None:
    """Play one game on a scratch env with the same opponents, so that numba compiles (or loads from
    its cache) the engine and the opponents' kernels here, in the env runner's constructor.

    Otherwise that happens in RLlib's first ``sample()``, which a remote env runner must finish
    within ``sample_timeout_s`` (60 s): a cold compile can take longer on a busy machine (26 to 68 s
    measured on 2 shared cores), and PPO then returns an iteration of 0 env steps with only a warning.
    """
    scratch = SamLocEnv(**{**cfg, "opponents": [o.spec for o in game.games.opponents]})
    obs, _ = scratch.reset(seed=0)
    over = False
    while not over:
        obs, _, over, _, _ = scratch.step(int(np.argmax(obs["action_mask"])))


def _obs(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"observations": obs["observation"], "action_mask": obs["action_mask"]}


def _info(info: dict[str, Any]) -> dict[str, Any]:
    """The gym info without its copy of the mask (it is in the observation)."""
    return {k: v for k, v in info.items() if k != "action_mask"}


class LaPerGame(RLlibCallback):
    """The learner's lá per finished game as RLlib metrics; an empty iteration is an error.

    Each env runner sums lá and games (``reduce="sum"``, per iteration); the
    mean is taken once in the algorithm, so it weighs every game alike
    whatever the number of env runners (a logged "mean" would average the
    runners' means).
    """

    def on_episode_end(self, *, episode, metrics_logger=None, **kwargs) -> None:
        info = episode.agent_episodes[LEARNER].get_infos(-1)
        metrics_logger.log_value(LA_SUM, float(info["scores"][info["seat"]]), reduce="sum")
        metrics_logger.log_value(GAMES, 1, reduce="sum")

    def on_train_result(self, *, algorithm, result: dict, **kwargs) -> None:
        runners = result.get("env_runners", {})
        if not runners.get("num_env_steps_sampled"):
            raise RuntimeError(
                f"iteration {result.get('training_iteration')} sampled no env steps: the remote env runners"
                f" returned nothing within sample_timeout_s={algorithm.config.sample_timeout_s} (a slow first"
                " sample: imports, the compiled engine's cache, a busy machine); raise it, or None waits")
        games = int(runners.get(GAMES, 0))
        runners[LA_PER_GAME] = float(runners.get(LA_SUM, 0.0)) / games if games else float("nan")


class MaskedPPOTorchModule(DefaultPPOTorchRLModule):
    """RLlib's default PPO networks, built for the observation vector; the logits of illegal moves are set
    to the lowest float, so they are never sampled and carry no gradient."""

    def __init__(self, *, observation_space: spaces.Dict, **kwargs: Any):
        super().__init__(observation_space=observation_space["observations"], **kwargs)
        self.observation_space = observation_space  # what the env runners give it: the vector and the mask

    @staticmethod
    def _split(batch: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """(the legal moves, the batch with the observation vector alone); the batch itself is unchanged."""
        obs = batch[Columns.OBS]
        return obs["action_mask"], {**batch, Columns.OBS: obs["observations"]}

    @staticmethod
    def _masked(out: dict[str, Any], legal: Any) -> dict[str, Any]:
        logits = out[Columns.ACTION_DIST_INPUTS]
        out[Columns.ACTION_DIST_INPUTS] = logits.masked_fill(legal <= 0, torch.finfo(logits.dtype).min)
        return out

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        legal, vector = self._split(batch)
        return self._masked(super()._forward(vector, **kwargs), legal)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        legal, vector = self._split(batch)
        return self._masked(super()._forward_train(vector, **kwargs), legal)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
        return super().compute_values(self._split(batch)[1], embeddings)


def masked_ppo_config(env_config: Mapping[str, Any] | None = None, *,
                      hidden: tuple[int, ...] = (256, 256)) -> PPOConfig:
    """PPO on :class:`SamLocMultiAgentEnv` with :class:`MaskedPPOTorchModule` and :class:`LaPerGame`.

    Add ``.env_runners(...)``, ``.training(...)``, ``.debugging(seed=...)`` as usual.
    """
    spec = RLModuleSpec(module_class=MaskedPPOTorchModule,
                        model_config={"fcnet_hiddens": list(hidden), "head_fcnet_hiddens": []})
    return (PPOConfig()
            .environment(SamLocMultiAgentEnv, env_config=dict(env_config or {}))
            .multi_agent(policies={LEARNER}, policy_mapping_fn=lambda agent_id, episode, **kw: LEARNER,
                         policies_to_train=[LEARNER])
            .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={LEARNER: spec}))
            .callbacks(LaPerGame))


def init_local_ray(num_cpus: int | None = None) -> None:
    """Start a new Ray of this process's own that listens on 127.0.0.1 only, without a dashboard.

    As ``samloc train`` starts its embedded Ray (docs/training.md, "Ray: private here"): never
    one found running on the machine, since whoever reaches Ray's ports can run code on it.
    Workers get one thread each for OpenMP/MKL and this process's ``PYTHONPATH``.
    """
    from ray._private import ray_constants
    env_vars = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if os.environ.get("PYTHONPATH"):
        env_vars["PYTHONPATH"] = os.environ["PYTHONPATH"]
    # Ray binds every server to loopback alone when its node address is 127.0.0.1, and keeps that
    # address only where it offers no multi-node clusters: this switch.
    clusters, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
    try:
        ray.init(address="local", _node_ip_address="127.0.0.1",
                 num_cpus=num_cpus or max(2, os.cpu_count() or 2), include_dashboard=False,
                 runtime_env={"env_vars": env_vars}, log_to_driver=False, logging_level="error")
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = clusters
