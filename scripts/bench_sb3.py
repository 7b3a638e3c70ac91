"""Stable-Baselines3 throughput: ``SamLocVecEnv`` (the batched engine) against SB3's ``DummyVecEnv``
of single ``SamLoc-v0`` envs, with the same games and the same number of envs.

Two figures for each: environment steps per second as MaskablePPO drives them
(``get_action_masks``, then a random legal action per env, then ``step``), and
MaskablePPO ``learn()`` timesteps per second (a small network, torch on one
thread).  Run from the repository root; prints one JSON object::

    python -m scripts.bench_sb3 --num-envs 16 --steps 40000 --learn-steps 8192

``load_avg_1m`` records how busy the machine was.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np


def _envs(kind: str, num_envs: int, kw: dict[str, Any]):
    import gymnasium
    from stable_baselines3.common.vec_env import DummyVecEnv

    import sam_env.gym_env  # noqa: F401  (registers SamLoc-v0)
    from sam_env.integrations.sb3 import SamLocVecEnv
    if kind == "SamLocVecEnv":
        return SamLocVecEnv(num_envs=num_envs, **kw)
    return DummyVecEnv([lambda: gymnasium.make("SamLoc-v0", **kw) for _ in range(num_envs)])


def bench_steps(make: Callable[[], Any], steps: int, seed: int) -> dict[str, Any]:
    """Env steps/s: masks, a random legal action per env, step (as MaskablePPO's rollouts do)."""
    from sb3_contrib.common.maskable.utils import get_action_masks
    venv = make()
    venv.seed(seed)
    venv.reset()
    rng = np.random.default_rng(seed)
    n = venv.num_envs

    def one() -> None:
        masks = get_action_masks(venv)
        venv.step((rng.random(masks.shape) * masks).argmax(1))
    for _ in range(50):   # warm up
        one()
    iters = max(1, steps // n)
    t0 = time.perf_counter()
    for _ in range(iters):
        one()
    dt = time.perf_counter() - t0
    venv.close()
    return {"steps": iters * n, "seconds": round(dt, 3), "steps_per_s": round(iters * n / dt)}


def bench_learn(make: Callable[[], Any], timesteps: int, seed: int, n_steps: int) -> dict[str, Any]:
    """MaskablePPO timesteps/s over ``learn(timesteps)``, after one warm-up rollout."""
    from sb3_contrib import MaskablePPO
    venv = make()
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=n_steps, batch_size=256, n_epochs=4, seed=seed,
                        policy_kwargs={"net_arch": [64, 64]}, device="cpu")
    model.learn(n_steps * venv.num_envs)
    t0 = time.perf_counter()
    model.learn(timesteps, reset_num_timesteps=False)
    dt = time.perf_counter() - t0
    done = model.num_timesteps - n_steps * venv.num_envs
    venv.close()
    return {"timesteps": done, "seconds": round(dt, 3), "timesteps_per_s": round(done / dt)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.bench_sb3", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-envs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=40_000, help="env steps per env benchmark (all envs)")
    ap.add_argument("--learn-steps", type=int, default=8192, help="MaskablePPO timesteps per learn benchmark")
    ap.add_argument("--n-steps", type=int, default=128, help="MaskablePPO rollout length per env")
    ap.add_argument("--rules", default="hoi_quan_bai")
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--opponents", default="random", help="SamLoc-v0 opponents (random, heuristic, ...)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if min(args.num_envs, args.steps, args.learn_steps, args.n_steps) < 1:
        ap.error("--num-envs, --steps, --learn-steps and --n-steps must be positive")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    torch.set_num_threads(1)
    kw = {"rules": args.rules, "players": args.players, "opponents": args.opponents}
    out: dict[str, Any] = {**kw, "num_envs": args.num_envs, "torch_threads": 1}
    for what, run in (("env", lambda m: bench_steps(m, args.steps, args.seed)),
                      ("learn", lambda m: bench_learn(m, args.learn_steps, args.seed, args.n_steps))):
        res = {kind: run(lambda kind=kind: _envs(kind, args.num_envs, kw))
               for kind in ("SamLocVecEnv", "DummyVecEnv")}
        key = "steps_per_s" if what == "env" else "timesteps_per_s"
        res["speedup"] = round(res["SamLocVecEnv"][key] / res["DummyVecEnv"][key], 2)
        out[what] = res
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
