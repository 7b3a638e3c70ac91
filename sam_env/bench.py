"""``samloc bench``: engine and environment throughput on one core, uniformly random legal play.

Every seat answers ``no_sam``, then picks uniformly among its legal moves;
every move is checked for legality.  The last output line is JSON.
(``--agent`` benchmarks are the agents package's: :mod:`agents.bench`.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np

from .actions import NO_SAM
from .batch import play_random
from .rules import RuleSet, RulesError
from .seeding import seed_streams
from .vector import SelfPlayBatch, random_from_masks


def bench_engine(rules: str, players: int, games: int, seed: int, batch: int) -> dict[str, Any]:
    play_random(rules, players, games=min(games, 200), seed=seed + 1, batch=batch)  # compile / warm up
    t0 = time.perf_counter()
    out = play_random(rules, players, games=games, seed=seed, batch=batch)
    dt = time.perf_counter() - t0
    if out["illegal"]:
        raise RuntimeError(f"{out['illegal']} illegal moves were generated")
    return {"games": out["games"], "decisions": out["decisions"], "seconds": round(dt, 4),
            "decisions_per_s": round(out["decisions"] / dt), "games_per_s": round(out["games"] / dt)}


def bench_env(rules: str, players: int, num_envs: int, steps: int, seed: int) -> dict[str, Any]:
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


def _bench_single(rules: str, players: int, steps: int, seed: int) -> dict[str, Any]:
    import gymnasium

    from . import gym_env  # noqa: F401  (registers SamLoc-v0)
    env = gymnasium.make("SamLoc-v0", rules=rules, players=players)
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


AgentBench = Callable[[str, str, int, int, int], dict]


def main(argv: list[str], agent_bench: AgentBench | None = None) -> int:
    """The command; ``--agent`` runs ``agent_bench`` (``agents.bench.bench_agent``, which
    :func:`agents.bench.main` passes: ``samloc bench --agent`` goes there)."""
    ap = argparse.ArgumentParser(prog="samloc bench", description=__doc__)
    ap.add_argument("--rules", default="hoi_quan_bai", help="preset name (default hoi_quan_bai)")
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--games", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=1024, help="games stepped together")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--env", action="store_true", help="benchmark the self-play environment batch instead")
    ap.add_argument("--num-envs", type=int, default=1024,
                    help="with --env: games in the self-play batch; 1 benchmarks one SamLoc-v0 env")
    ap.add_argument("--steps", type=int, default=None,
                    help="with --env: agent steps to take (default 2000000; 200000 with --num-envs 1)")
    ap.add_argument("--agent", metavar="SPEC",
                    help="benchmark matches of this agent against itself (e.g. heuristic) over --games deals")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        RuleSet.parse(args.rules).check_players(args.players)
        if args.games < 1 or args.batch < 1:
            raise RulesError("--games and --batch must be positive")
        if args.agent:
            if agent_bench is None:
                raise ValueError("agent benchmarks are the agents package's: run samloc bench --agent")
            res = agent_bench(args.agent, args.rules, args.players, args.games, args.seed)
        elif args.env:
            steps = args.steps if args.steps is not None else (200_000 if args.num_envs == 1 else 2_000_000)
            res = bench_env(args.rules, args.players, args.num_envs, steps, args.seed)
        else:
            res = bench_engine(args.rules, args.players, args.games, args.seed, args.batch)
    except (RulesError, ValueError) as exc:
        print(f"samloc bench: {exc}", file=sys.stderr)
        return 2
    if not args.json:
        print(f"{args.rules}, {args.players} players: " + ", ".join(f"{k} {v}" for k, v in res.items()))
    print(json.dumps(res))
    return 0
