"""Gymnasium environments: ``SamLoc-v0`` (one learning seat) and its batched form.

Importing this module registers ``SamLoc-v0`` (entry point and vector entry
point); ``gymnasium.make("sam_env.gym_env:SamLoc-v0")`` imports it for you::

    env = gymnasium.make("SamLoc-v0", rules="mien_bac", players=4, opponents="random")
    envs = gymnasium.make_vec("SamLoc-v0", num_envs=256, vectorization_mode="vector_entry_point")

One seat learns (``learner_seat``, or a random seat per game); the others are
played by ``opponents``: "random" (always ``no_sam``, then uniform legal
plays) or "random:uniform" (compiled), a callable ``(obs, mask) -> action``,
an agent with ``act_batch(states, rule_array, obs, masks)`` or ``act(game, seat)``, a
name for ``agents.make_agent``, or a list of these, one per seat after the
learner (docs/environments.md).  Observations are ``{"observation": float32[OBS_SIZE],
"action_mask": int8[201]}`` (:mod:`sam_env.obs`); ``info["action_mask"]`` too, and
``action_masks()`` gives it as bools (the method sb3-contrib's MaskablePPO calls).
The reward is the learning seat's lá (chop payments when a chain settles,
the rest at the end) times ``reward_scale``.  Games never truncate.

An illegal action is, by default, replaced by a random legal one and flagged
in ``info["illegal_action"]`` (so generic checkers that sample unmasked
actions work); ``illegal_action="raise"`` makes it an error instead.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from . import core
from .actions import ACTION_NAMES, NUM_ACTIONS
from .cards import DEFAULT_PLAYERS, RANKS
from .obs import OBS_SIZE, OBS_VERSION, obs_bounds
from .rules import DEFAULT_PRESET, RuleSet
from .vector import OpponentGames, OpponentSpec

ENV_ID = "SamLoc-v0"


def observation_space() -> spaces.Dict:
    """The observation space of one seat (shared by the Gymnasium and PettingZoo envs)."""
    low, high = obs_bounds()
    return spaces.Dict({
        "observation": spaces.Box(low=low, high=high, shape=(OBS_SIZE,), dtype=np.float32),
        "action_mask": spaces.Box(low=0, high=1, shape=(NUM_ACTIONS,), dtype=np.int8),
    })


def _check_scale(reward_scale: float) -> float:
    if isinstance(reward_scale, bool) or not isinstance(reward_scale, (int, float)) \
            or not np.isfinite(reward_scale) or reward_scale <= 0:
        raise ValueError(f"reward_scale must be a positive number, not {reward_scale!r}")
    return float(reward_scale)


def render_text(st: np.ndarray, seat: int) -> str:
    """A few lines showing ``seat``'s view of a state row (its own hand, public facts)."""
    n = int(st[core.O_N])
    hand = "".join(RANKS[r] * int(st[core.O_HAND + seat * core.NR + r]) for r in range(core.NR))
    top = int(st[core.O_TOP])
    lines = [f"phase {core.PHASE_NAMES[int(st[core.O_PHASE])]}, seat {seat} (you) holds {hand or '-'}"]
    sizes = ", ".join(f"{s}:{int(st[core.O_SIZE + s])}{' passed' if st[core.O_PASSED + s] else ''}"
                      for s in range(n))
    lines.append(f"cards left {sizes}")
    if top >= 0:
        lines.append(f"top {ACTION_NAMES[top]} by seat {int(st[core.O_LAST])}")
    elif st[core.O_PHASE] == core.PH_PLAY:
        lines.append(f"seat {int(st[core.O_TO_ACT])} leads")
    if st[core.O_PHASE] == core.PH_OVER:
        lines.append(f"over ({core.END_NAMES[int(st[core.O_END])]}), scores "
                     + " ".join(str(int(x)) for x in st[core.O_SCORE:core.O_SCORE + n]))
    return "\n".join(lines) + "\n"


class SamLocEnv(gymnasium.Env):
    """One Sâm lốc game per episode, seen by one learning seat."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4, "obs_version": OBS_VERSION}

    def __init__(self, rules: RuleSet | str | Mapping[str, Any] = DEFAULT_PRESET,
                 players: int = DEFAULT_PLAYERS, opponents: OpponentSpec | Sequence[OpponentSpec] = "random",
                 learner_seat: int | None = None,
                 reward_scale: float = 1.0, illegal_action: str = "random", render_mode: str | None = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        self.games = OpponentGames(RuleSet.parse(rules), players, 1, opponents, learner_seat, illegal_action)
        self.rules = self.games.rules
        self.players = self.games.players
        self.reward_scale = _check_scale(reward_scale)
        self.render_mode = render_mode
        self.observation_space = observation_space()
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self._pending = False   # the next game is already dealt (the previous one just ended)
        self._over = True
        self._last_st = self.games.states[0].copy()

    @property
    def seat(self) -> int:
        """The learning seat of the current game."""
        return int(self.games.learners[0])

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None or not self._pending:
            self.games.reset(seed)
        self._pending = False
        self._over = False
        g = self.games
        obs = {"observation": g.obs[0].copy(), "action_mask": g.masks[0].copy()}
        return obs, {"action_mask": g.masks[0].copy(), "seat": self.seat}

    def step(self, action: Any):
        if self._over:
            raise gymnasium.error.ResetNeeded("the game is over: call reset() before step()")
        a = _action_int(action)
        g = self.games
        me = self.seat
        g.step(np.array([a], dtype=np.int64))
        reward = float(g.delta[0]) * self.reward_scale
        info: dict[str, Any] = {"seat": me, "illegal_action": bool(g.illegal[0])}
        if g.terminated[0]:
            self._over = self._pending = True
            mask = np.zeros(NUM_ACTIONS, dtype=np.int8)
            obs = {"observation": g.final_obs[0].copy(), "action_mask": mask}
            info["action_mask"] = mask.copy()
            info["scores"] = g.final_scores[0, :self.players].copy()
            self._last_st = None
            return obs, reward, True, False, info
        obs = {"observation": g.obs[0].copy(), "action_mask": g.masks[0].copy()}
        info["action_mask"] = g.masks[0].copy()
        return obs, reward, False, False, info

    def action_masks(self) -> np.ndarray:
        """``bool[201]``: the learner's legal actions now (all False once the game is over).

        The method sb3-contrib's MaskablePPO looks for; through ``gymnasium.make``'s
        wrappers reach it with ``env.get_wrapper_attr("action_masks")()`` (as SB3 does).
        """
        if self._over:
            return np.zeros(NUM_ACTIONS, dtype=np.bool_)
        return self.games.masks[0].astype(np.bool_)

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        if self._over and self._pending:
            return "the game is over\n"
        return render_text(self.games.states[0], self.seat)

    @property
    def game(self):
        """The current game as a :class:`~sam_env.game.Game` (needs a logged, non-random-only env)."""
        return self.games.game(0)


def _action_int(action: Any) -> int:
    a = np.asarray(action)
    if a.shape != () or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"an action must be one integer from 0 to {NUM_ACTIONS - 1}, not {action!r}")
    return int(a)


class SamLocVectorEnv(VectorEnv):
    """``num_envs`` games of ``SamLoc-v0`` stepped by the batched engine.

    Autoreset is SAME_STEP: when a game ends, the returned observation is
    already the next game's, and ``info["final_obs"]`` / ``info["final_info"]``
    (``scores``) hold the finished one.  Env ``i`` reset with ``seed`` plays
    the games of ``SamLoc-v0`` reset with ``seed + i``.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": [], "obs_version": OBS_VERSION}

    def __init__(self, num_envs: int = 1, rules: RuleSet | str | Mapping[str, Any] = DEFAULT_PRESET,
                 players: int = DEFAULT_PLAYERS, opponents: OpponentSpec | Sequence[OpponentSpec] = "random",
                 learner_seat: int | None = None, reward_scale: float = 1.0, illegal_action: str = "random",
                 render_mode: str | None = None):
        if render_mode is not None:
            raise ValueError("the vector env has no render modes")
        self.games = OpponentGames(RuleSet.parse(rules), players, num_envs, opponents, learner_seat,
                                   illegal_action)
        self.rules = self.games.rules
        self.players = self.games.players
        self.num_envs = num_envs
        self.reward_scale = _check_scale(reward_scale)
        self.single_observation_space = observation_space()
        self.single_action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.render_mode = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise ValueError(f"seed must be an integer (env i gets seed + i), not {seed!r}")
        super().reset(seed=seed)
        self.games.reset(seed)
        g = self.games
        obs = {"observation": g.obs.copy(), "action_mask": g.masks.copy()}
        return obs, {"action_mask": g.masks.copy(), "seat": g.learners.copy()}

    def step(self, actions: Any):
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs,) or not np.issubdtype(acts.dtype, np.integer):
            raise ValueError(f"actions must be {self.num_envs} integers, not {acts.dtype} {acts.shape}")
        g = self.games
        seats = g.learners.copy()
        g.step(acts)
        rewards = g.delta.astype(np.float64) * self.reward_scale
        term = g.terminated.copy()
        obs = {"observation": g.obs.copy(), "action_mask": g.masks.copy()}
        info: dict[str, Any] = {"action_mask": g.masks.copy(), "seat": g.learners.copy(),
                                "illegal_action": g.illegal.copy()}
        if term.any():
            final = np.full(self.num_envs, None, dtype=object)
            zero = np.zeros(NUM_ACTIONS, dtype=np.int8)
            for i in np.flatnonzero(term):
                final[i] = {"observation": g.final_obs[i].copy(), "action_mask": zero.copy()}
            scores = np.where(term[:, None], g.final_scores[:, :self.players], 0)
            info["final_obs"], info["_final_obs"] = final, term
            info["final_info"] = {"scores": scores, "_scores": term.copy(), "seat": seats,
                                  "_seat": term.copy()}
            info["_final_info"] = term.copy()
        return obs, rewards, term, np.zeros(self.num_envs, dtype=np.bool_), info

    def action_masks(self) -> np.ndarray:
        """``bool[num_envs, 201]``: each learner's legal actions now (after an autoreset, in the
        new game), as ``SamLocEnv.action_masks`` for every env at once."""
        return self.games.masks.astype(np.bool_)


def _register() -> None:
    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="sam_env.gym_env:SamLocEnv",
                           vector_entry_point="sam_env.gym_env:SamLocVectorEnv")


_register()
