"""Train RLlib's PPO (new API stack) with its action-masking module at Sâm lốc against the heuristic.

    pip install -e .[rllib]
    python examples/rllib_ppo_masked.py --iterations 10 --num-env-runners 1

The learner plays one seat (a random seat each game) of ``SamLoc-v0`` games
through ``sam_env.integrations.rllib.SamLocMultiAgentEnv``; the other seats are
the heuristic, inside the env.  The module is
``sam_env.integrations.rllib.MaskedPPOTorchModule``: RLlib's default PPO networks
over the observation vector (key ``observations``), logits masked by ``action_mask``.  Each
iteration prints ``learner_la_per_game``: the learner's mean lá over the games
that ended in it.

Before and after training the greedy policy is scored by the project's
duplicate-deal evaluation (``agents.evaluation.evaluate.evaluate``, what ``samloc eval``
runs) against the heuristic: every deal is played once with the policy in
each seat; mean lá per game with its 95% interval.  Ray runs locally, on
127.0.0.1 only.  The last line printed is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np
import ray
import torch
from torch.utils.tensorboard import SummaryWriter

from agents.base import ObsPolicy
from agents.evaluation.evaluate import evaluate
from sam_env.integrations.rllib import GAMES, LA_PER_GAME, LEARNER, init_local_ray, masked_ppo_config
from sam_env.rules import RuleSet
from sam_env.table import Table

OPPONENTS = "heuristic"


def greedy(module: Any) -> ObsPolicy:
    """The learner's RLModule as a project agent: the most probable legal move."""

    def act(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        batch = {"obs": {"observations": torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32)),
                         "action_mask": torch.from_numpy(np.ascontiguousarray(masks))}}
        with torch.no_grad():
            return module.forward_inference(batch)["action_dist_inputs"].argmax(-1).numpy()

    return ObsPolicy(act, name="rllib_ppo")


def score(module: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Mean lá per game against the heuristic (duplicate deals, ``samloc eval``'s numbers)."""
    res = evaluate(greedy(module), OPPONENTS, Table(RuleSet.parse(args.rules), args.players),
                   deals=args.eval_deals, seed=args.eval_seed)
    return {"mean_la": res["mean_score"], "ci95": res["ci95"], "games": res["games"],
            "win_rate": res["win_rate"]}


def log_result(writer: SummaryWriter, result: dict[str, Any], step: int, row: dict[str, Any]) -> None:
    """One iteration in TensorBoard under CleanRL's tags: lá per game, env steps/s, the learner's losses."""
    writer.add_scalar("charts/episodic_return", row[LA_PER_GAME], step)
    writer.add_scalar("charts/SPS", row["env_steps"] / max(row["seconds"], 1e-9), step)
    learner = result.get("learners", {}).get(LEARNER, {})
    for key, tag in (("policy_loss", "losses/policy_loss"), ("vf_loss", "losses/value_loss"),
                     ("entropy", "losses/entropy"), ("mean_kl_loss", "losses/approx_kl"),
                     ("vf_explained_var", "losses/explained_variance")):
        if key in learner:
            writer.add_scalar(tag, float(learner[key]), step)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=10, help="PPO iterations (algo.train() calls)")
    ap.add_argument("--rules", default="hoi_quan_bai", help="rule-set preset")
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0, help="seeds the deals, the opponents and the network")
    ap.add_argument("--num-env-runners", type=int, default=1, help="remote env runners (0: sample here)")
    ap.add_argument("--batch", type=int, default=2000, help="env steps (learner decisions) per iteration")
    ap.add_argument("--minibatch", type=int, default=250)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="the network's layer widths")
    ap.add_argument("--reward-scale", type=float, default=0.05, help="reward = lá x this")
    ap.add_argument("--eval-deals", type=int, default=300, help="deals of each evaluation (x players games)")
    ap.add_argument("--eval-seed", type=int, default=1_000_000,
                    help="the evaluation's deals (not trained on)")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs for the local Ray (default: all)")
    ap.add_argument("--out", default=None, help="the run folder: TensorBoard events and checkpoint/ (default"
                                                " runs/rllib/<rules>_<players>__<seed>__<time>)")
    args = ap.parse_args(argv)
    if min(args.iterations, args.batch, args.minibatch, args.epochs, args.eval_deals, *args.hidden) < 1:
        ap.error("--iterations, --batch, --minibatch, --epochs, --hidden and --eval-deals must be positive")
    if args.num_env_runners < 0:
        ap.error("--num-env-runners must be 0 or more")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    started = not ray.is_initialized()
    if started:
        init_local_ray(args.num_cpus)
    env_config = {"rules": args.rules, "players": args.players, "opponents": OPPONENTS,
                  "reward_scale": args.reward_scale}
    config = (masked_ppo_config(env_config, hidden=tuple(args.hidden))
              .env_runners(num_env_runners=args.num_env_runners)
              .training(train_batch_size_per_learner=args.batch, minibatch_size=args.minibatch,
                        num_epochs=args.epochs, lr=3e-4, gamma=1.0, lambda_=0.95, entropy_coeff=0.01)
              .debugging(seed=args.seed))
    out_dir = os.path.abspath(args.out or os.path.join(
        "runs", "rllib", f"{args.rules}_{args.players}__{args.seed}__{time.strftime('%Y%m%d-%H%M%S')}"))
    writer = SummaryWriter(out_dir)
    algo = config.build_algo()
    try:
        before = score(algo.get_module(LEARNER), args)
        history, steps, seconds = [], 0, 0.0
        for it in range(1, args.iterations + 1):
            t0 = time.perf_counter()
            result = algo.train()
            dt = time.perf_counter() - t0
            er = result["env_runners"]
            steps += int(er["num_env_steps_sampled"])
            seconds += dt
            row = {"iteration": it, "env_steps": int(er["num_env_steps_sampled"]), "games": int(er[GAMES]),
                   LA_PER_GAME: round(float(er[LA_PER_GAME]), 3), "seconds": round(dt, 2)}
            history.append(row)
            log_result(writer, result, steps, row)
            print(f"iteration {it}: {row['env_steps']} env steps, {row['games']} games, "
                  f"lá per game {row[LA_PER_GAME]:+.2f} ({dt:.1f} s)", flush=True)
        after = score(algo.get_module(LEARNER), args)
        checkpoint = algo.save_to_path(os.path.join(out_dir, "checkpoint"))  # Algorithm.from_checkpoint(it)
    finally:
        writer.close()
        algo.stop()
        try:  # the folder Ray made under ~/ray_results for this algorithm, empty: everything is in out_dir
            os.rmdir(algo.logdir)
        except OSError:
            pass
        if started:
            ray.shutdown()
    out = {"rules": args.rules, "players": args.players, "opponents": OPPONENTS,
           "num_env_runners": args.num_env_runners, "env_steps": steps, "train_seconds": round(seconds, 1),
           "env_steps_per_s": round(steps / seconds), "iterations": history, "before": before, "after": after,
           "log_dir": out_dir, "checkpoint": checkpoint}
    print(f"mean lá per game vs {OPPONENTS}: {before['mean_la']:+.2f} before, {after['mean_la']:+.2f} after "
          f"{steps} env steps ({seconds:.0f} s, {out['env_steps_per_s']} env steps/s)")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
