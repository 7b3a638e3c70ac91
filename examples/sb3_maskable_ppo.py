"""Train sb3-contrib's MaskablePPO at Sâm lốc against heuristic opponents, on the batched engine.

    pip install -e .[sb3]
    python examples/sb3_maskable_ppo.py --timesteps 200000 --num-envs 16

The policy plays one seat (a random seat each game) of ``SamLoc-v0`` games
stepped together by ``sam_env.integrations.sb3.SamLocVecEnv``, an SB3
``VecEnv``; MaskablePPO gets the legal moves from it with
``env_method("action_masks")``, and ``illegal_action="raise"`` makes any
action outside them an error.  (``MaskablePPO("MultiInputPolicy",
gymnasium.make("SamLoc-v0", ...))`` works too, one game at a time.)

Before and after training the policy is scored by the project's duplicate-
deal evaluation (``agents.evaluation.evaluate.evaluate``, what ``samloc eval`` runs)
against the same opponents: every deal is played once with the policy in each
seat, and the mean lá per game is reported with its 95% interval.  The last
line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import VecMonitor

from agents.base import ObsPolicy
from agents.evaluation.evaluate import evaluate
from sam_env.integrations.sb3 import SamLocVecEnv
from sam_env.rules import RuleSet
from sam_env.table import Table


def greedy(model: MaskablePPO) -> ObsPolicy:
    """A trained MaskablePPO model as a project agent: the most probable legal move."""

    def act(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        return model.predict({"observation": obs, "action_mask": masks}, action_masks=masks.astype(bool),
                             deterministic=True)[0]

    return ObsPolicy(act, name="maskable_ppo")


def score(model: MaskablePPO, args: argparse.Namespace) -> dict[str, Any]:
    """Mean lá per game against the opponents (duplicate deals, ``samloc eval``'s numbers)."""
    res = evaluate(greedy(model), args.opponents, Table(RuleSet.parse(args.rules), args.players),
                   deals=args.eval_deals, seed=args.eval_seed)
    return {"mean_la": res["mean_score"], "ci95": res["ci95"], "games": res["games"],
            "win_rate": res["win_rate"], "sam_declared": res["sam_declared"]}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--timesteps", type=int, default=200_000, help="learner decisions to train on")
    ap.add_argument("--num-envs", type=int, default=16, help="games stepped together")
    ap.add_argument("--rules", default="hoi_quan_bai", help="rule-set preset")
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--opponents", default="heuristic", help="the other seats (training and evaluation)")
    ap.add_argument("--seed", type=int, default=0, help="seeds the deals, the opponents and the network")
    ap.add_argument("--n-steps", type=int, default=256, help="rollout length per env between updates")
    ap.add_argument("--batch-size", type=int, default=256, help="PPO minibatch size")
    ap.add_argument("--reward-scale", type=float, default=0.05, help="reward = lá x this")
    ap.add_argument("--eval-deals", type=int, default=300, help="deals of each evaluation (x players games)")
    ap.add_argument("--eval-seed", type=int, default=1_000_000,
                    help="the evaluation's deals (not trained on)")
    ap.add_argument("--save", help="write the trained model here (.zip)")
    ap.add_argument("--quiet", action="store_true", help="no SB3 training log")
    args = ap.parse_args(argv)
    if min(args.timesteps, args.num_envs, args.n_steps, args.batch_size, args.eval_deals) < 1:
        ap.error("--timesteps, --num-envs, --n-steps, --batch-size and --eval-deals must be positive")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    venv = VecMonitor(SamLocVecEnv(num_envs=args.num_envs, rules=args.rules, players=args.players,
                                   opponents=args.opponents, reward_scale=args.reward_scale,
                                   illegal_action="raise"))
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=args.n_steps, batch_size=args.batch_size,
                        seed=args.seed, verbose=0 if args.quiet else 1, device="cpu")
    before = score(model, args)
    t0 = time.perf_counter()
    model.learn(args.timesteps)
    seconds = time.perf_counter() - t0
    after = score(model, args)
    if args.save:
        model.save(args.save)
    venv.close()
    out = {"rules": args.rules, "players": args.players, "opponents": args.opponents,
           "timesteps": model.num_timesteps, "num_envs": args.num_envs, "train_seconds": round(seconds, 1),
           "timesteps_per_s": round(model.num_timesteps / seconds), "before": before, "after": after}
    print(f"mean lá per game vs {args.opponents}: {before['mean_la']:+.2f} before, "
          f"{after['mean_la']:+.2f} after {model.num_timesteps} timesteps ({seconds:.0f} s)")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
