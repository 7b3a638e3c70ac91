"""The fast batched encoder is bit-identical to today's (``tests/obs_reference.py``): observations,
seats and legal masks of :class:`SelfPlayBatch` and of the opponent games, over many random games
on every preset and player count, through auto-resets, explicit resets and both copy modes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CONFIGS, config_id

from obs_reference import encode_row as reference_row, reference_mask_batch
from sam_env import core, obs
from sam_env.actions import NUM_ACTIONS, SAM
from sam_env.obs import OBS_SIZE
from sam_env.rules import RuleSet
from sam_env.vector import IllegalActionError, OpponentGames, SelfPlayBatch


def expected(states: np.ndarray, rule_array: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = states.shape[0]
    seats = np.empty(n, dtype=np.int64)
    o = np.full((n, OBS_SIZE), np.nan, dtype=np.float32)  # NaN: a cell the encoder failed to write
    m = np.full((n, NUM_ACTIONS), 7, dtype=np.int8)
    reference_mask_batch(states, rule_array, o, m, seats)
    return seats, o, m


def random_legal(masks: np.ndarray, rng: np.random.Generator, sam_rate: float) -> np.ndarray:
    """Uniform among legal moves, except that Sâm is declared only at ``sam_rate``."""
    u = np.where(masks != 0, rng.random(masks.shape), -1.0)
    u[:, SAM] = np.where(masks[:, SAM] != 0, rng.random(len(masks)) < sam_rate, -1.0) * 2.0
    return np.argmax(u, axis=1)


def same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    bad = np.argwhere(got.view(np.uint32) != want.view(np.uint32)) if got.dtype == np.float32 \
        else np.argwhere(got != want)
    assert not len(bad), f"{what}: {len(bad)} cells differ, first at {tuple(bad[0])}"


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
@pytest.mark.parametrize("copy", [True, False])
def test_selfplay_batch_matches_the_reference(config, copy):
    rules, players = config
    rs = RuleSet.parse(rules)
    rng = np.random.default_rng(players)
    sp = SelfPlayBatch(rs, players, num_envs=48, seed=11, copy=copy)
    seat, o, m = sp.reset(seed=5)
    ended = 0
    for step in range(400):
        want = expected(sp.states, sp.rule_array)
        for got, exp, what in zip((seat, o, m), want, ("seat", "obs", "mask")):
            same_bits(got, exp, f"{config_id(config)} step {step} {what}")
        if step == 200:  # an explicit reset in mid-game
            seat, o, m = sp.reset(seed=99)
            continue
        seat, o, m, _, done = sp.step(random_legal(m, rng, sam_rate=0.1))
        ended += int(done.sum())
    assert ended > 48, "too few games ended to exercise the auto-resets"


@pytest.mark.parametrize("config", CONFIGS[::3], ids=config_id)
def test_opponent_games_match_the_reference(config):
    rules, players = config
    rs = RuleSet.parse(rules)
    rng = np.random.default_rng(1)
    env = OpponentGames(rs, players, num_envs=32, opponents="random:uniform")
    env.reset(seed=3)
    ended = 0
    for step in range(150):
        _, o, m = expected(env.states, env.rule_array)
        # the reference encodes the seat to act: here that is always the learning seat
        assert (env.states[:, core.O_TO_ACT] == env.learners).all()
        same_bits(env.obs, o, f"step {step} obs")
        same_bits(env.masks, m, f"step {step} mask")
        env.step(random_legal(env.masks, rng, sam_rate=0.1))
        ended += int(env.terminated.sum())
    assert ended > 0


def test_single_row_encoders_match_the_reference():
    """``encode_row`` (one row, its own rules block) and ``encode_batch`` for any observer seat."""
    sp = SelfPlayBatch("s666pg", 5, num_envs=64, seed=2)
    rng = np.random.default_rng(0)
    for _ in range(60):
        sp.step(random_legal(sp.masks, rng, sam_rate=0.2))
        seats = rng.integers(0, 5, size=64)
        want = np.empty((64, OBS_SIZE), dtype=np.float32)
        for g in range(64):
            reference_row(sp.states[g], sp.rule_array, seats[g], want[g])
        got = np.full((64, OBS_SIZE), np.nan, dtype=np.float32)
        obs.encode_batch(sp.states, sp.rule_array, seats, got)
        same_bits(got, want, "encode_batch")
        one = np.full(OBS_SIZE, np.nan, dtype=np.float32)
        obs.encode_row(sp.states[7], sp.rule_array, seats[7], one)
        same_bits(one, want[7], "encode_row")


@pytest.mark.parametrize("copy", [True, False])
def test_an_illegal_action_leaves_the_observations(copy):
    """A refused step moves no game, and the batch's seats, observations and masks stay as they were."""
    sp = SelfPlayBatch("online", 3, num_envs=16, seed=4, copy=copy)
    rng = np.random.default_rng(2)
    for _ in range(30):
        sp.step(random_legal(sp.masks, rng, sam_rate=0.1))
    before = [a.copy() for a in (sp.seats, sp.obs, sp.masks, sp.states)]
    acts = random_legal(sp.masks, rng, sam_rate=0.1)
    acts[5] = int(np.flatnonzero(sp.masks[5] == 0)[0])
    with pytest.raises(IllegalActionError, match="game 5: action"):
        sp.step(acts)
    for got, want, what in zip((sp.seats, sp.obs, sp.masks, sp.states), before,
                               ("seat", "obs", "mask", "state")):
        same_bits(got, want, what)
