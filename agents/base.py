"""The one interface every player implements: random, heuristic, neural, ONNX, remote.

An agent answers one decision for one seat from what that seat may know.  Two
entry points:

* :meth:`Agent.act` — readable form: a :class:`~sam_env.game.Game` (the full game
  or a seat's view from :meth:`Game.from_view`) and the seat to act.
* :meth:`Agent.act_batch` — fast form: engine state rows (``sam_env.core`` layout),
  the rules array, optional observations and the legal masks; one action per row,
  for the seat to act in that row.  The evaluator and the environments use it.

Agents must read only the acting seat's own ``O_HAND`` row and public fields,
and be deterministic for a given ``seed``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np

from sam_env.game import Game
from sam_env.obs import encode, encode_to_act
from sam_env.table import Table


class AgentFailure(RuntimeError):
    """An agent that cannot answer a decision soundly (a damaged model's non-finite output, an
    illegal choice): callers say so rather than guess; the bot server answers 503."""


class Agent(ABC):
    """A player.  Subclasses set ``name`` and implement :meth:`act`
    (and :meth:`act_batch` when they have a fast form)."""

    name: str = "agent"
    #: Whether :meth:`act_batch` needs the ``obs`` argument (``sam_env.obs`` vectors).
    #: True by default so an agent that forgets to say gets them.
    needs_obs: bool = True

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    @abstractmethod
    def act(self, game: Game, seat: int) -> int:
        """A legal action id (``sam_env.actions``) for ``seat``, which must be the seat to act."""

    def act_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        """One legal action per state row (``int64[N]``); ``masks`` is ``int8[N, 201]``."""
        raise NotImplementedError(f"agent {self.name!r} has no batched form; use act()")

    def observations(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None) -> np.ndarray:
        """``obs`` as given, or encoded here for the seat to act in each row (callers may omit it)."""
        return obs if obs is not None else encode_to_act(states, rule_array)

    @property
    def settings(self) -> dict[str, Any]:
        """Settings that change how the agent plays beyond its name (a search's); reports
        record them."""
        return {}

    @property
    def trained_tables(self) -> tuple[Table, ...] | None:
        """The tables a learned agent's network was trained for (its checkpoint's metadata);
        None for agents that play every table alike (rule-based, remote)."""
        return None

    @property
    def replayable(self) -> bool:
        """Whether every choice depends only on the position and the seed, never on what the agent
        played before: then a deal plays the same alone, in any batch or in any order, which is what
        lets ``samloc eval --resume`` continue a run from its finished chunks.  False unless a
        subclass knows (an agent drawing from a running stream, a remote one)."""
        return False

    @property
    def batched(self) -> bool:
        """Whether this agent implements :meth:`act_batch` (the evaluator's fast path)."""
        return type(self).act_batch is not Agent.act_batch

    def close(self) -> None:
        """Release resources (connections, sessions).  Default: nothing."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, seed={self.seed})"


def check_seat(game: Game, seat: int) -> None:
    """Refuse to decide for a seat whose turn it is not (a caller bug, said plainly)."""
    if game.to_act != seat:
        who = "nobody (the game is over)" if game.to_act is None else f"seat {game.to_act}"
        raise ValueError(f"it is {who}'s turn, not seat {seat}'s")


class ObsPolicy(Agent):
    """A policy of observations as an agent: ``fn(obs float32[N, 993], masks int8[N, 201]) -> int[N]``.

    How a network trained elsewhere (SB3, RLlib, a CleanRL loop: ``examples/``) takes a seat in
    :func:`agents.evaluation.evaluate.evaluate`, so it is scored on ``samloc eval``'s duplicate deals."""

    needs_obs = True

    def __init__(self, fn: Callable[[np.ndarray, np.ndarray], Any], name: str = "policy"):
        super().__init__(seed=0)
        self.fn, self.name = fn, name

    def act_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        acts = self.fn(self.observations(states, rule_array, obs), masks)
        return np.asarray(acts, dtype=np.int64).reshape(-1)

    def act(self, game: Game, seat: int) -> int:
        check_seat(game, seat)
        mask = np.asarray(game.legal_mask(), dtype=np.int8)[None, :]
        return int(self.act_batch(game.state[None, :], game.rules_array, encode(game, seat)[None, :],
                                  mask)[0])
