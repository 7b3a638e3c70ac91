"""Stable-Baselines3: :class:`SamLocVecEnv`, an SB3 ``VecEnv`` on the batched engine.

SB3 has its own ``VecEnv`` API and refuses Gymnasium vector envs; its
``DummyVecEnv`` of ``SamLoc-v0`` envs steps the games one by one in Python.
This adapter steps every game in one call of
:class:`~sam_env.gym_env.SamLocVectorEnv` (one compiled call with random
opponents) and answers SB3 as a ``DummyVecEnv`` of ``SamLoc-v0`` would, seed
for seed, so either can stand for the other::

    from sb3_contrib import MaskablePPO
    from sam_env.integrations.sb3 import SamLocVecEnv
    venv = SamLocVecEnv(num_envs=16, rules="hoi_quan_bai", players=4, opponents="heuristic")
    MaskablePPO("MultiInputPolicy", venv, seed=0).learn(100_000)

- ``seed(s)`` then ``reset()``: env ``i`` plays the games of ``SamLoc-v0``
  reset with ``s + i`` (the same games as ``DummyVecEnv`` seeded ``s``);
  ``reset()`` without a seed continues the deal streams.
- ``step_async``/``step_wait``: ``(obs, rewards float32[N], dones bool[N],
  infos)``.  When a game ends the returned observation is already the next
  game's; ``infos[i]`` holds the finished one's ``terminal_observation`` and
  ``scores``, and ``reset_infos[i]`` the new one's.  Games never truncate
  (``TimeLimit.truncated`` is always False).
- ``env_method("action_masks")``: each learner's legal actions as bools, what
  MaskablePPO asks for at every step.  ``get_attr``/``env_method`` reach, for
  each game, what one ``SamLoc-v0`` offers: ``seat``, ``rules``, ``players``,
  ``reward_scale``, ``render_mode``, the spaces, ``action_masks()``,
  ``render()``; ``set_attr`` sets ``reward_scale`` (one for all games).
- ``render_mode="ansi"``: ``env_method("render")`` returns each game's text;
  ``render()`` itself follows SB3 (nothing to tile: it returns None).

Needs the ``sb3`` extra (``pip install -e .[sb3]``).  Nothing in ``sam_env``
imports this module; import it yourself.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Mapping

import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from ..actions import NUM_ACTIONS
from ..cards import DEFAULT_PLAYERS
from ..gym_env import SamLocEnv, SamLocVectorEnv, _check_scale, render_text
from ..rules import DEFAULT_PRESET, RuleSet
from ..vector import OpponentSpec

__all__ = ["SamLocVecEnv"]


class _GameView:
    """What ``get_attr``/``set_attr``/``env_method`` reach for game ``i``: one ``SamLoc-v0``'s face."""

    def __init__(self, owner: SamLocVecEnv, i: int):
        self._owner = owner
        self._i = i

    @property
    def seat(self) -> int:
        """The learning seat of this game."""
        return int(self._owner.vector_env.games.learners[self._i])

    @property
    def rules(self) -> RuleSet:
        return self._owner.vector_env.rules

    @property
    def players(self) -> int:
        return self._owner.vector_env.players

    @property
    def reward_scale(self) -> float:
        return self._owner.vector_env.reward_scale

    @property
    def render_mode(self) -> str | None:
        return self._owner.render_mode

    @property
    def observation_space(self):
        return self._owner.observation_space

    @property
    def action_space(self):
        return self._owner.action_space

    @property
    def metadata(self) -> dict[str, Any]:
        return self._owner.metadata

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"a SamLoc game of the VecEnv has no attribute {name!r}")

    def action_masks(self) -> np.ndarray:
        """``bool[201]``: the learner's legal actions now (as ``SamLocEnv.action_masks``)."""
        return self._owner.vector_env.games.masks[self._i].astype(np.bool_)

    def render(self) -> str | None:
        """The learner's view of this game as text (``render_mode="ansi"``), else None."""
        if self._owner.render_mode != "ansi":
            return None
        return render_text(self._owner.vector_env.games.states[self._i], self.seat)


class SamLocVecEnv(VecEnv):
    """``num_envs`` games of ``SamLoc-v0`` as one SB3 ``VecEnv`` (arguments as ``SamLoc-v0``'s)."""

    def __init__(self, num_envs: int = 8, rules: RuleSet | str | Mapping[str, Any] = DEFAULT_PRESET,
                 players: int = DEFAULT_PLAYERS, opponents: OpponentSpec | Sequence[OpponentSpec] = "random",
                 learner_seat: int | None = None, reward_scale: float = 1.0, illegal_action: str = "random",
                 render_mode: str | None = None):
        if render_mode is not None and render_mode not in SamLocEnv.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        #: The Gymnasium vector env that steps the games (its ``games`` is the batch engine).
        self.vector_env = SamLocVectorEnv(num_envs, rules, players, opponents, learner_seat, reward_scale,
                                          illegal_action)
        self.render_mode = render_mode
        self._views = [_GameView(self, i) for i in range(num_envs)]
        self._actions: np.ndarray | None = None
        super().__init__(num_envs, self.vector_env.single_observation_space,
                         self.vector_env.single_action_space)  # reads get_attr("render_mode")
        self.metadata = dict(SamLocEnv.metadata)   # as DummyVecEnv: its envs' metadata

    # -- stepping ------------------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        self._actions = None   # a pending step_async is cancelled, as SB3 says
        obs, info = self.vector_env.reset(seed=self._batch_seed())
        self.reset_infos = [{"action_mask": info["action_mask"][i], "seat": int(info["seat"][i])}
                            for i in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()   # SamLoc-v0 has no reset options
        return obs

    def _batch_seed(self) -> int | None:
        """The one seed of the batch: SB3's per-env seeds must be None or ``s, s + 1, …`` (``seed(s)``)."""
        seeds = self._seeds
        if all(s is None for s in seeds):
            return None
        first = seeds[0]
        if first is None or any(s != first + i for i, s in enumerate(seeds)):
            raise ValueError(f"the games are seeded together: env i gets s + i (seed(s)), not seeds {seeds}")
        return int(first)

    def step_async(self, actions: np.ndarray) -> None:
        acts = np.asarray(actions)
        if acts.size != self.num_envs or not np.issubdtype(acts.dtype, np.integer):
            raise ValueError(f"actions must be {self.num_envs} integers, not {acts.dtype} {acts.shape}")
        self._actions = acts.reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async(actions)")
        g = self.vector_env.games
        seats = g.learners.tolist()
        acts, self._actions = self._actions, None
        obs, rewards, term, _, info = self.vector_env.step(acts)
        masks, illegal = info["action_mask"], info["illegal_action"].tolist()
        infos: list[dict[str, Any]] = [
            {"seat": seats[i], "illegal_action": illegal[i], "action_mask": masks[i],
             "TimeLimit.truncated": False} for i in range(self.num_envs)]
        for i in np.flatnonzero(term).tolist():
            infos[i]["action_mask"] = np.zeros(NUM_ACTIONS, dtype=np.int8)
            infos[i]["scores"] = info["final_info"]["scores"][i].copy()
            infos[i]["terminal_observation"] = info["final_obs"][i]
            self.reset_infos[i] = {"action_mask": masks[i].copy(), "seat": int(info["seat"][i])}
        return obs, rewards.astype(np.float32), term, infos

    def close(self) -> None:
        self.vector_env.close()

    # -- what SB3 reaches per game -------------------------------------------------------------
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(self._views[i], attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if attr_name != "reward_scale":
            raise AttributeError(f"only reward_scale can be set on the SamLoc games, not {attr_name!r}")
        if sorted(self._get_indices(indices)) != list(range(self.num_envs)):
            raise ValueError("reward_scale is one for all games: set it with indices=None")
        self.vector_env.reward_scale = _check_scale(value)

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None,
                   **method_kwargs) -> list[Any]:
        idx = list(self._get_indices(indices))
        if method_name == "action_masks" and not method_args and not method_kwargs:
            return list(self.vector_env.action_masks()[idx])   # MaskablePPO's call, at every step: one copy
        return [getattr(self._views[i], method_name)(*method_args, **method_kwargs) for i in idx]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]   # the games are no Gymnasium envs to wrap

    def get_images(self) -> Sequence[np.ndarray | None]:
        warnings.warn(f"The render mode is {self.render_mode}, but this method assumes it is `rgb_array`"
                      " to obtain images.")   # as DummyVecEnv says for envs without rgb_array
        return [None for _ in range(self.num_envs)]
