"""``RandomAgent``: uniform over the legal moves, the floor every player must beat."""

from __future__ import annotations

import numpy as np
from numba import njit

from sam_env import core, seeding
from sam_env.actions import NO_SAM, NUM_ACTIONS, SAM
from sam_env.game import Game

from ..base import Agent, check_seat


@njit(cache=True)
def _pick(mask, rng, sam_prob_1e6):
    """Uniform legal action of one mask; the Sâm question is answered apart
    (``sam_prob_1e6`` parts per million say ``sam``)."""
    if mask[SAM] != 0 and mask[NO_SAM] != 0:
        return SAM if core.rng_below(rng, 0, 1_000_000) < sam_prob_1e6 else NO_SAM
    k = 0
    for a in range(NUM_ACTIONS):
        k += mask[a] != 0
    if k == 0:
        return -1
    j = core.rng_below(rng, 0, k)
    for a in range(NUM_ACTIONS):
        if mask[a] != 0:
            if j == 0:
                return a
            j -= 1
    return -1


@njit(cache=True)
def _pick_batch(masks, rng, sam_prob_1e6, out):
    for i in range(masks.shape[0]):
        out[i] = _pick(masks[i], rng, sam_prob_1e6)


class RandomAgent(Agent):
    """Uniform over legal plays.

    The Sâm question is not a play: a uniform choice would declare Sâm in half
    the games and lose 20 lá × (players − 1) almost every time, which measures
    nothing.  So ``sam_prob`` (default 0) is the chance it declares; the spec
    ``random:uniform`` sets it to 0.5 (uniform over every legal action).
    """

    needs_obs = False

    def __init__(self, seed: int = 0, sam_prob: float = 0.0) -> None:
        super().__init__(seed)
        if not 0.0 <= sam_prob <= 1.0:
            raise ValueError(f"sam_prob must be between 0 and 1, not {sam_prob!r}")
        self.sam_prob = float(sam_prob)
        self.name = {0.0: "random", 0.5: "random:uniform"}.get(self.sam_prob, f"random:{sam_prob}")
        self._rng = seeding.stream(self.seed)
        self._ppm = int(round(self.sam_prob * 1_000_000))

    def act(self, game: Game, seat: int) -> int:
        check_seat(game, seat)
        return int(_pick(game.legal_mask(), self._rng, self._ppm))

    def act_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        out = np.empty(masks.shape[0], dtype=np.int64)
        _pick_batch(masks, self._rng, self._ppm, out)
        return out
