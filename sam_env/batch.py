"""Many games stepped at once: the engine's batched form.

A :class:`GameBatch` holds ``num_games`` independent games of one rule set
and player count as rows of one int32 array, each with its own seeded random
stream, and advances all of them by one decision per :meth:`step` in a single
compiled call.  The benchmark, the vectorized environments and the trainer
all step games through it.
"""

from __future__ import annotations

import numpy as np

from . import core, seeding
from .actions import NUM_ACTIONS
from .cards import DEFAULT_PLAYERS, HAND_SIZE
from .rules import RuleSet


class IllegalActionError(ValueError):
    """An action that is not legal for the seat to act in some game of a batch."""


class GameBatch:
    """``num_games`` games, each restarted with a fresh seeded deal when it ends.

    Game ``g`` of a batch reset with ``seed`` plays the deals of seed
    ``seed + g`` one after another (:mod:`sam_env.seeding`); deals that are
    instant wins need no decision and are skipped (``instant_deals`` counts
    them).
    """

    def __init__(self, rules: RuleSet, players: int = DEFAULT_PLAYERS,
                 num_games: int = 1024, seed: int = 0, autoreset: bool = True):
        self.rules = RuleSet.checked(rules)
        self.players = self.rules.check_players(players)
        if num_games < 1:
            raise ValueError("num_games must be at least 1")
        self.num_games = num_games
        self.autoreset = autoreset
        self.rule_array = self.rules.to_array()
        self.states = core.new_states(num_games)
        self.hands = np.zeros((num_games, core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
        self.rewards = np.zeros((num_games, core.MAX_PLAYERS), dtype=np.int32)
        self.done = np.zeros(num_games, dtype=np.bool_)
        self.masks = np.zeros((num_games, NUM_ACTIONS), dtype=np.int8)
        self.instant_deals = 0
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self.rng = seeding.seed_streams(seed, self.num_games)
        self.instant_deals = int(core.batch_reset(self.states, self.rule_array, self.rng, self.players,
                                                  self.hands))

    @property
    def to_act(self) -> np.ndarray:
        return self.states[:, core.O_TO_ACT]

    @property
    def phase(self) -> np.ndarray:
        return self.states[:, core.O_PHASE]

    @property
    def deals(self) -> np.ndarray:
        """The card ids dealt to each seat of each current game: ``[game, seat, 10]``."""
        return self.hands[:, :self.players]

    def legal_masks(self) -> np.ndarray:
        """``int8[num_games, NUM_ACTIONS]``: the legal actions of each game's seat to act."""
        core.batch_legal_mask(self.states, self.rule_array, self.masks)
        return self.masks

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One decision per game.  Returns ``(rewards[game, seat], done[game])``.

        Rewards are the lá that moved in this step (chop payments when they
        happen, the rest at the end).  Raises IllegalActionError, naming the
        game, if any action is not legal; the games before it have moved on.
        """
        acts = np.ascontiguousarray(actions, dtype=np.int64)
        if acts.shape != (self.num_games,):
            raise ValueError(f"actions must have shape ({self.num_games},), not {acts.shape}")
        bad = core.batch_step(self.states, self.rule_array, acts, self.rng, self.players, self.hands,
                              self.rewards, self.done, self.autoreset)
        if bad >= 0:
            raise IllegalActionError(f"game {bad}: action {int(acts[bad])} is not legal for seat"
                                     f" {int(self.states[bad, core.O_TO_ACT])}")
        return self.rewards, self.done


def play_random(rules: RuleSet, players: int = DEFAULT_PLAYERS,
                games: int = 10_000, seed: int = 0, batch: int = 1024,
                no_sam: bool = True) -> dict[str, int]:
    """Play ``games`` uniformly random games through the batched engine (the benchmark's work).

    Slot ``g`` of the batch starts on deal 0 of seed ``seed + g``; its random
    moves draw from the same stream, so its later deals are its own.
    """
    rs = RuleSet.checked(rules)
    rs.check_players(players)
    batch = max(1, min(batch, games))
    states = core.new_states(batch)
    hands = np.zeros((batch, core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
    rng = seeding.seed_streams(seed, batch)
    g, d, illegal = core.batch_play_random(states, rs.to_array(), rng, players, hands, games, no_sam)
    return {"games": int(g), "decisions": int(d), "illegal": int(illegal)}
