"""PettingZoo environments: every seat an agent (``player_0`` …), in AEC and parallel form.

::

    from sam_env.pettingzoo_env import env, parallel_env
    e = env(rules="hoi_quan_bai", players=4)
    e.reset(seed=0)
    for agent in e.agent_iter():
        obs, reward, term, trunc, info = e.last()
        action = None if term or trunc else policy(obs["observation"], obs["action_mask"])
        e.step(action)

    p = parallel_env(rules="hoi_quan_bai", players=4)
    obs, infos = p.reset(seed=0)
    while p.agents:
        agent = infos[p.agents[0]]["active_agent"]      # the one seat to act
        o = obs[agent]
        obs, rewards, terms, truncs, infos = p.step({agent: policy(o["observation"], o["action_mask"])})

Observations are ``{"observation": float32[OBS_SIZE], "action_mask":
int8[201]}`` (:mod:`sam_env.obs`); the mask is all zeros for an agent that is
not to act.  Rewards are each seat's lá as they move (chop payments when a
chain settles, the rest at the end) times ``reward_scale``.  A reset with
``seed`` deals the same game as ``SamLoc-v0`` and the self-play batch reset
with that seed; instant-win deals are skipped (no agent has a decision in
them).

``illegal_action`` (default ``"raise"``: IllegalActionError, a ValueError)
may be ``"random"``: the action is replaced by a uniformly random legal one
from word 1 of the seed, as in ``SamLoc-v0``, and the acting agent's info
says ``illegal_action: True`` — for generic tools that send unmasked actions.

The parallel form is PettingZoo's form of a turn-based game
(``pettingzoo.utils.conversions.turn_based_aec_to_parallel``): every step
takes the action of ``infos[a]["active_agent"]`` (the one agent whose mask is
not all zeros) and ignores the others'; observations and rewards go to every
agent.  It plays exactly the AEC env's games.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils import wrappers

from . import core
from .actions import NUM_ACTIONS
from .batch import IllegalActionError
from .cards import DEFAULT_PLAYERS, HAND_SIZE
from .gym_env import _check_scale, observation_space, render_text
from .obs import OBS_SIZE, OBS_VERSION, encode_row
from .rules import DEFAULT_PRESET, RuleSet
from .seeding import fresh_seed, seed_streams
from .vector import random_legal

ILLEGAL_ACTIONS = ("raise", "random")


def env(**kwargs: Any) -> AECEnv:
    """The AEC env wrapped in PettingZoo's order-enforcing wrapper."""
    return wrappers.OrderEnforcingWrapper(raw_env(**kwargs))


def parallel_env(**kwargs: Any) -> ParallelEnv:
    """The parallel form (same arguments as :func:`env`)."""
    return SamLocParallelEnv(**kwargs)


class raw_env(AECEnv):  # noqa: N801  (PettingZoo's naming convention)
    metadata = {"render_modes": ["ansi"], "name": "samloc_v0", "is_parallelizable": False,
                "render_fps": 4, "obs_version": OBS_VERSION}

    def __init__(self, rules: RuleSet | str | Mapping[str, Any] = DEFAULT_PRESET,
                 players: int = DEFAULT_PLAYERS, reward_scale: float = 1.0, illegal_action: str = "raise",
                 render_mode: str | None = None):
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        if illegal_action not in ILLEGAL_ACTIONS:
            raise ValueError(f"illegal_action must be 'raise' or 'random', not {illegal_action!r}")
        self.rules = RuleSet.parse(rules)
        self.players = self.rules.check_players(players)
        self.reward_scale = _check_scale(reward_scale)
        self.illegal_action = illegal_action
        self.render_mode = render_mode
        self.rule_array = self.rules.to_array()
        self.possible_agents = [f"player_{i}" for i in range(self.players)]
        self.observation_spaces = {a: observation_space() for a in self.possible_agents}
        self.action_spaces = {a: spaces.Discrete(NUM_ACTIONS) for a in self.possible_agents}
        self.state_row = np.zeros(core.STATE_SIZE, dtype=np.int32)
        self._hands = np.zeros((core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
        self._rng: np.ndarray | None = None   # word 0 deals, word 1 replaces illegal actions
        self._buf = np.empty(NUM_ACTIONS, dtype=np.int64)

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None or self._rng is None:
            self._rng = seed_streams(fresh_seed() if seed is None else seed, 1, 2)
        core.new_playable_game(self.state_row, self.rule_array, self._rng, 0, self.players, self._hands)
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = self.possible_agents[int(self.state_row[core.O_TO_ACT])]

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        seat = self.possible_agents.index(agent)
        obs = np.empty(OBS_SIZE, dtype=np.float32)
        encode_row(self.state_row, self.rule_array, seat, obs)
        mask = np.zeros(NUM_ACTIONS, dtype=np.int8)
        if int(self.state_row[core.O_TO_ACT]) == seat:
            core.legal_mask(self.state_row, self.rule_array, mask)
        return {"observation": obs, "action_mask": mask}

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        seat = self.possible_agents.index(agent)
        st = self.state_row
        a = np.asarray(action)
        if a.shape != () or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{agent}: an action must be one integer from 0 to {NUM_ACTIONS - 1},"
                             f" not {action!r}")
        replaced = (not 0 <= int(a) < NUM_ACTIONS
                    or core.check_action(st, self.rule_array, seat, int(a)) != core.OK)
        if replaced:
            if self.illegal_action == "raise":
                raise IllegalActionError(f"{agent}: action {int(a)} is not legal now (see the action_mask)")
            a = random_legal(st, self.rule_array, self._rng, 1, self._buf)
        before = st[core.O_SCORE:core.O_SCORE + self.players].copy()
        core.apply_action(st, self.rule_array, int(a))
        delta = st[core.O_SCORE:core.O_SCORE + self.players] - before
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {ag: float(delta[i]) * self.reward_scale for i, ag in enumerate(self.possible_agents)}
        if st[core.O_PHASE] == core.PH_OVER:
            scores = [int(x) for x in st[core.O_SCORE:core.O_SCORE + self.players]]
            end = core.END_NAMES[int(st[core.O_END])]
            self.terminations = dict.fromkeys(self.agents, True)
            self.infos = {ag: {"scores": list(scores), "end": end} for ag in self.agents}
            self.agent_selection = self.possible_agents[(seat + 1) % self.players]
        else:
            self.agent_selection = self.possible_agents[int(st[core.O_TO_ACT])]
        self.infos[agent]["illegal_action"] = replaced   # about this agent's last action
        self._accumulate_rewards()

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        t = int(self.state_row[core.O_TO_ACT])
        return render_text(self.state_row, t if t >= 0 else 0)

    def close(self) -> None:
        pass


class SamLocParallelEnv(ParallelEnv):
    """The AEC game in PettingZoo's parallel form for turn-based games.

    ``step(actions)`` applies ``actions[active_agent]`` (the others are
    ignored, so a tool may send one action per agent); every agent gets its
    observation, its reward and ``info["active_agent"]`` (absent at the end).
    The agents stay ``possible_agents`` for the whole game and all end together.
    """

    metadata = {"render_modes": ["ansi"], "name": "samloc_v0", "render_fps": 4, "obs_version": OBS_VERSION}

    def __init__(self, rules: RuleSet | str | Mapping[str, Any] = DEFAULT_PRESET,
                 players: int = DEFAULT_PLAYERS, reward_scale: float = 1.0, illegal_action: str = "raise",
                 render_mode: str | None = None):
        self.aec = raw_env(rules=rules, players=players, reward_scale=reward_scale,
                           illegal_action=illegal_action, render_mode=render_mode)
        self.rules = self.aec.rules
        self.players = self.aec.players
        self.render_mode = render_mode
        self.possible_agents = self.aec.possible_agents
        self.observation_spaces = self.aec.observation_spaces
        self.action_spaces = self.aec.action_spaces
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        self.aec.reset(seed=seed, options=options)
        self.agents = self.possible_agents[:]
        active = self.aec.agent_selection
        return self._observe_all(), {a: {"active_agent": active} for a in self.agents}

    def step(self, actions: Mapping[str, Any]):
        if not self.agents:
            raise RuntimeError("the game is over: call reset() before step()")
        if not isinstance(actions, Mapping) or not set(actions) <= set(self.possible_agents):
            raise ValueError(f"actions must be a dict from agents ({', '.join(self.possible_agents)})"
                             f" to actions, not {actions!r}")
        agent = self.aec.agent_selection
        if agent not in actions:
            raise ValueError(f"actions has none for {agent}, the agent to act (info['active_agent'])")
        aec = self.aec
        aec.step(actions[agent])
        obs = self._observe_all()
        rewards = dict(aec.rewards)
        over = aec.terminations[agent]
        if over:   # every agent: scores and end
            infos = {a: dict(aec.infos[a]) for a in self.possible_agents}
            self.agents = []
        else:
            infos = {a: {"active_agent": aec.agent_selection} for a in self.possible_agents}
        infos[agent]["illegal_action"] = aec.infos[agent]["illegal_action"]
        terms = dict.fromkeys(self.possible_agents, over)
        truncs = dict.fromkeys(self.possible_agents, False)
        return obs, rewards, terms, truncs, infos

    def _observe_all(self) -> dict[str, dict[str, np.ndarray]]:
        return {a: self.aec.observe(a) for a in self.possible_agents}

    def render(self) -> str | None:
        return self.aec.render()

    def close(self) -> None:
        self.aec.close()
