"""Engine and environment throughput on one core, uniformly random legal play (``samloc bench``).

Every seat answers ``no_sam``, then picks uniformly among its legal moves;
every move is checked for legality.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .actions import NO_SAM
from .batch import play_random
from .rules import RuleSet
from .seeding import seed_streams
from .vector import SelfPlayBatch, random_from_masks


def bench_engine(rules: RuleSet, players: int, games: int, seed: int, batch: int) -> dict[str, Any]:
    play_random(rules, players, games=min(games, 200), seed=seed + 1, batch=batch)  # compile / warm up
    t0 = time.perf_counter()
    out = play_random(rules, players, games=games, seed=seed, batch=batch)
    dt = time.perf_counter() - t0
    if out["illegal"]:
        raise RuntimeError(f"{out['illegal']} illegal moves were generated")
    return {"games": out["games"], "decisions": out["decisions"], "seconds": round(dt, 4),
            "decisions_per_s": round(out["decisions"] / dt), "games_per_s": round(out["games"] / dt)}


def bench_env(rules: RuleSet, players: int, num_envs: int, steps: int, seed: int) -> dict[str, Any]:
    """Agent steps per second with random legal actions (``no_sam`` to every Sâm
    question, as ``samloc bench``), observations and masks built.

    ``num_envs > 1``: the :class:`SelfPlayBatch` (steps = games × batch steps).
    ``num_envs == 1``: one Gymnasium ``SamLoc-v0`` (learning seat vs random
    opponents; steps = ``env.step`` calls).
    """
    if num_envs < 1 or steps < 1:
        raise ValueError("--num-envs and --steps must be positive")
    if num_envs == 1:
        return _bench_single(rules, players, steps, seed)
    sp = SelfPlayBatch(rules, players, num_envs, seed=seed)
    rng = seed_streams(seed + 1_000_003, num_envs)
    acts = np.zeros(num_envs, dtype=np.int64)
    for _ in range(20):  # compile and warm up
        random_from_masks(sp.masks, rng, acts)
        sp.step(acts)
    iters = max(1, steps // num_envs)
    t0 = time.perf_counter()
    for _ in range(iters):
        random_from_masks(sp.masks, rng, acts)
        sp.step(acts)
    dt = time.perf_counter() - t0
    total = iters * num_envs
    return {"num_envs": num_envs, "steps": total, "seconds": round(dt, 4), "steps_per_s": round(total / dt)}


def _bench_single(rules: RuleSet, players: int, steps: int, seed: int) -> dict[str, Any]:
    import gymnasium  # optional: only this form needs it, and the rules core never imports it

    # "module:id": gymnasium imports the module that registers SamLoc-v0; made as a user makes it,
    # wrappers and all
    env = gymnasium.make("sam_env.gym_env:SamLoc-v0", rules=rules, players=players)
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(200):  # warm up
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, r, term, trunc, info = env.step(a)
        if term:
            obs, info = env.reset()
    t0 = time.perf_counter()
    for _ in range(steps):
        mask = obs["action_mask"]
        if mask[NO_SAM]:
            a = NO_SAM
        else:
            legal = np.flatnonzero(mask)
            a = int(legal[rng.integers(len(legal))])
        obs, r, term, trunc, info = env.step(a)
        if term:
            obs, info = env.reset()
    dt = time.perf_counter() - t0
    env.close()
    return {"num_envs": 1, "steps": steps, "seconds": round(dt, 4), "steps_per_s": round(steps / dt)}
