"""PPO with invalid-action masking on SamLoc-v0's vector env, CleanRL-style: one file, top to bottom.

    python examples/cleanrl_ppo_masked.py --total-timesteps 300000 --num-envs 64
    tensorboard --logdir runs/cleanrl

Phases, in file order: 1. config (the ``Args`` dataclass, one flag per
field), 2. agent (actor and critic MLPs; illegal logits set to a large
negative number before the softmax), then ``main``: 3. seeding,
4. environment (``gymnasium.make_vec("SamLoc-v0",
vectorization_mode="vector_entry_point")``: every game in one engine call),
5. rollout, 6. advantages (GAE), 7. PPO update, 8. logging (TensorBoard
``charts/…``, ``losses/…``), 9. evaluation: the greedy policy against the
opponents by the project's duplicate-deal evaluation (``agents.evaluation.evaluate``,
as ``samloc eval``), before training and after.

The env autoresets in the same step (``AutoresetMode.SAME_STEP``): when a
game ends the next observation is already the next game's, ``terminated``
marks the boundary and ``info["final_info"]`` holds the finished game's
scores, so the loop below needs no special case.  The last line is JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np
import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

import sam_env.gym_env  # noqa: F401  (registers SamLoc-v0)
from agents.base import ObsPolicy
from agents.evaluation.evaluate import evaluate
from sam_env.actions import NUM_ACTIONS
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.obs import OBS_SIZE
from sam_env.rules import RuleSet
from sam_env.table import Table


# ---- 1. config ------------------------------------------------------------------------------------
@dataclass
class Args:
    exp_name: str = field(default="cleanrl_ppo_masked", metadata={"help": "the run folder's name starts so"})
    seed: int = field(default=1, metadata={"help": "seeds the deals, the opponents and the network"})
    torch_deterministic: bool = field(default=True, metadata={"help": "torch.backends.cudnn.deterministic"})
    cuda: bool = field(default=False, metadata={"help": "use CUDA when available"})
    log_dir: str = field(default="runs/cleanrl", metadata={"help": "TensorBoard runs go under this folder"})
    save_model: bool = field(default=True,
                             metadata={"help": "save the network (state_dict) in the run folder"})
    # the game
    rules: str = field(default="hoi_quan_bai", metadata={"help": "rule-set preset"})
    players: int = field(default=DEFAULT_PLAYERS, metadata={"help": "players at the table"})
    opponents: str = field(default="heuristic", metadata={"help": "the other seats: random, heuristic, ..."})
    reward_scale: float = field(default=0.05, metadata={"help": "reward = the learner's lá x this"})
    # the algorithm
    total_timesteps: int = field(default=300_000, metadata={"help": "learner decisions to train on"})
    learning_rate: float = field(default=2.5e-4, metadata={"help": "Adam learning rate"})
    num_envs: int = field(default=64, metadata={"help": "games stepped together"})
    num_steps: int = field(default=64, metadata={"help": "steps per env in each rollout"})
    anneal_lr: bool = field(default=True, metadata={"help": "decay the learning rate linearly to 0"})
    gamma: float = field(default=0.99, metadata={"help": "discount factor"})
    gae_lambda: float = field(default=0.95, metadata={"help": "lambda of generalized advantage estimation"})
    num_minibatches: int = field(default=4, metadata={"help": "minibatches per epoch"})
    update_epochs: int = field(default=4, metadata={"help": "epochs over each rollout"})
    norm_adv: bool = field(default=True, metadata={"help": "normalize advantages per minibatch"})
    clip_coef: float = field(default=0.2, metadata={"help": "PPO's surrogate clipping"})
    clip_vloss: bool = field(default=True, metadata={"help": "clip the value loss too"})
    ent_coef: float = field(default=0.01, metadata={"help": "entropy bonus"})
    vf_coef: float = field(default=0.5, metadata={"help": "value loss weight"})
    max_grad_norm: float = field(default=0.5, metadata={"help": "gradient clipping norm"})
    target_kl: float | None = field(default=None, metadata={"help": "stop an update's epochs past this KL"})
    hidden: int = field(default=256, metadata={"help": "width of the two hidden layers (actor and critic)"})
    # the evaluation
    eval_deals: int = field(default=300, metadata={"help": "deals per evaluation (x players games); 0: none"})
    eval_seed: int = field(default=1_000_000, metadata={"help": "the evaluation's deals (not trained on)"})
    # filled in at run time
    batch_size: int = field(default=0, metadata={"help": "(computed) num_envs x num_steps"})
    minibatch_size: int = field(default=0, metadata={"help": "(computed) batch_size / num_minibatches"})
    num_iterations: int = field(default=0, metadata={"help": "(computed) total_timesteps / batch_size"})


def parse_args(argv: list[str] | None) -> Args:
    """One ``--flag-name`` per field of :class:`Args` (booleans take true/false)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    truth = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    for f in dataclasses.fields(Args):
        if f.metadata["help"].startswith("(computed)"):
            continue
        kind = {"bool": lambda s: truth[s.lower()], "int": int, "float": float, "str": str,
                "float | None": lambda s: None if s.lower() == "none" else float(s)}[f.type]
        ap.add_argument("--" + f.name.replace("_", "-"), type=kind, default=f.default,
                        help=f"{f.metadata['help']} (default {f.default})")
    args = Args(**vars(ap.parse_args(argv)))
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    if args.minibatch_size < 1 or args.num_iterations < 1:
        ap.error(f"--total-timesteps must be at least num_envs x num_steps ({args.batch_size}) and "
                 "--num-minibatches at most that")
    return args


# ---- 2. agent ------------------------------------------------------------------------------------
def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class MaskedAgent(nn.Module):
    """Actor and critic over the seat's observation; the legal mask only removes actions."""

    def __init__(self, hidden: int):
        super().__init__()
        self.critic = nn.Sequential(layer_init(nn.Linear(OBS_SIZE, hidden)), nn.Tanh(),
                                    layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
                                    layer_init(nn.Linear(hidden, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(OBS_SIZE, hidden)), nn.Tanh(),
                                   layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
                                   layer_init(nn.Linear(hidden, NUM_ACTIONS), std=0.01))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def masked_logits(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Illegal actions' logits set to -1e8: probability 0, and no gradient through them."""
        return torch.where(mask, self.actor(x), torch.tensor(-1e8, device=x.device))

    def get_action_and_value(self, x: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.masked_logits(x, mask))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def greedy(net: MaskedAgent, device: torch.device) -> ObsPolicy:
    """The network as a project agent (the most probable legal action), for ``agents.evaluation.evaluate``."""

    @torch.no_grad()
    def act(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(obs, device=device)
        return net.masked_logits(x, torch.as_tensor(masks, device=device).bool()).argmax(1).cpu().numpy()

    return ObsPolicy(act, name="cleanrl_ppo_masked")


def score(net: MaskedAgent, args: Args, device: torch.device) -> dict[str, Any] | None:
    """Mean lá per game against the opponents (duplicate deals), or None when ``eval_deals`` is 0."""
    if args.eval_deals < 1:
        return None
    res = evaluate(greedy(net, device), args.opponents, Table(RuleSet.parse(args.rules), args.players),
                   deals=args.eval_deals, seed=args.eval_seed)
    return {"mean_la": res["mean_score"], "ci95": res["ci95"], "games": res["games"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    run_name = f"{args.exp_name}__{args.rules}_{args.players}__{args.seed}__{int(time.time())}"
    writer = SummaryWriter(os.path.join(args.log_dir, run_name))
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n"
                    + "\n".join(f"|{k}|{v}|" for k, v in dataclasses.asdict(args).items()))

    # ---- 3. seeding ---------------------------------------------------------------------------------
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # ---- 4. environment -------------------------------------------------------------------------------
    envs = gymnasium.make_vec("SamLoc-v0", num_envs=args.num_envs, vectorization_mode="vector_entry_point",
                              rules=args.rules, players=args.players, opponents=args.opponents,
                              reward_scale=args.reward_scale, illegal_action="raise")
    assert isinstance(envs.single_action_space, gymnasium.spaces.Discrete), "only discrete actions"

    agent = MaskedAgent(args.hidden).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    before = score(agent, args, device)

    # ---- 5. rollout: storage, then num_steps steps of every env per iteration -------------------
    obs = torch.zeros((args.num_steps, args.num_envs, OBS_SIZE), device=device)
    masks = torch.zeros((args.num_steps, args.num_envs, NUM_ACTIONS), dtype=torch.bool, device=device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long, device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    dones = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)

    global_step = 0
    start_time = time.time()
    next_obs_d, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs_d["observation"], device=device)
    next_mask = torch.as_tensor(next_obs_d["action_mask"], device=device).bool()
    next_done = torch.zeros(args.num_envs, device=device)
    episode_len = np.zeros(args.num_envs, dtype=np.int64)
    finished_la: list[float] = []

    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step], masks[step], dones[step] = next_obs, next_mask, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs, next_mask)
                values[step] = value.flatten()
            actions[step], logprobs[step] = action, logprob

            next_obs_d, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done_np = np.logical_or(terminations, truncations)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs_d["observation"], device=device)
            next_mask = torch.as_tensor(next_obs_d["action_mask"], device=device).bool()
            next_done = torch.as_tensor(next_done_np, dtype=torch.float32, device=device)

            episode_len += 1
            if "final_info" in infos:   # a game ended: its learner's score in lá
                fi = infos["final_info"]
                for i in np.flatnonzero(infos["_final_info"]):
                    la = float(fi["scores"][i][fi["seat"][i]])
                    finished_la.append(la)
                    writer.add_scalar("charts/episodic_return", la, global_step)
                    writer.add_scalar("charts/episodic_length", episode_len[i], global_step)
                    episode_len[i] = 0

        # ---- 6. advantages (GAE), bootstrapped from the value of the next observation ----------------
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards, device=device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal, nextvalues = 1.0 - next_done, next_value
                else:
                    nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                advantages[t] = lastgaelam
            returns = advantages + values

        # ---- 7. PPO update on the flattened batch ----------------------------------------------------
        b_obs = obs.reshape((-1, OBS_SIZE))
        b_masks = masks.reshape((-1, NUM_ACTIONS))
        b_logprobs, b_actions = logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)

        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                mb = b_inds[start:start + args.minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_masks[mb],
                                                                              b_actions[mb])
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                mb_advantages = b_advantages[mb]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb]) ** 2
                    v_clipped = b_values[mb] + torch.clamp(newvalue - b_values[mb], -args.clip_coef,
                                                           args.clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        # ---- 8. logging --------------------------------------------------------------------------------
        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        recent = finished_la[-200:]
        print(f"iteration {iteration}/{args.num_iterations}, step {global_step}, SPS {sps}, "
              f"mean lá of the last {len(recent)} games {np.mean(recent) if recent else float('nan'):+.2f}")

    # ---- 9. evaluation -----------------------------------------------------------------------------------
    seconds = time.time() - start_time
    after = score(agent, args, device)
    envs.close()
    writer.close()
    model_path = os.path.join(args.log_dir, run_name, f"{args.exp_name}.cleanrl_model")  # CleanRL's name
    if args.save_model:  # reload: agent = MaskedAgent(args.hidden); agent.load_state_dict(torch.load(path))
        torch.save(agent.state_dict(), model_path)
        print(f"model saved to {model_path}")
    out = {"rules": args.rules, "players": args.players, "opponents": args.opponents,
           "timesteps": global_step, "train_seconds": round(seconds, 1),
           "steps_per_s": round(global_step / seconds), "games": len(finished_la),
           "before": before, "after": after, "log_dir": os.path.join(args.log_dir, run_name),
           "model": model_path if args.save_model else None}
    if before and after:
        print(f"mean lá per game vs {args.opponents}: {before['mean_la']:+.2f} before, "
              f"{after['mean_la']:+.2f} after")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
