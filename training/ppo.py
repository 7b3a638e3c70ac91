"""The learner's update: clipped PPO on masked logits.

The data come with the behaviour policy's log-probabilities, so a batch
generated one update earlier (the workers run while the learner trains) is
still corrected by the importance ratio and held in by the clip.

Two additions to plain PPO, both explained in docs/training.md:

- the value target trains the perfect-information critic when the network
  has one (and the policy's own value head too, which exported models keep);
- the Sâm lesson: at the learner's Sâm decisions (declare or not, and every
  play after it declared), a cross-entropy term towards the heuristic's
  choice, which comes from its Monte-Carlo planner.  A declaration is rare
  and worth ±60 lá, so exploration alone drives its probability to 0 long
  before it meets the hands where declaring pays, and a declared hand is
  played too rarely for PPO alone to learn to play it out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.nets.policy import PolicyNet

from .config import PPOConfig


def concat_batches(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Rollout batches (``RolloutEngine.rollout()["batch"]``, the one place their keys are written) as one."""
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def ppo_update(net: PolicyNet, opt: torch.optim.Optimizer, batch: dict[str, np.ndarray], cfg: PPOConfig,
               gen: torch.Generator) -> dict[str, float]:
    """``cfg.epochs`` passes of minibatch PPO over ``batch``; returns mean losses and diagnostics."""
    net.train()
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in batch.items()}
    n = t["obs"].shape[0]
    mb = min(cfg.minibatch, n)
    sums = {"policy": 0.0, "value": 0.0, "entropy": 0.0, "approx_kl": 0.0, "clipfrac": 0.0, "sam_lesson": 0.0}
    steps = 0
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen)
        for start in range(0, n - mb + 1, mb):
            i = perm[start:start + mb]
            logits, value, baseline = net.train_forward(t["obs"][i], t["mask"][i], t["hid"][i])
            logp_all = torch.log_softmax(logits, dim=-1)
            logp = logp_all.gather(1, t["act"][i][:, None]).squeeze(-1)
            adv = t["adv"][i]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            log_ratio = logp - t["logp"][i]
            ratio = log_ratio.exp()
            pg = -torch.min(ratio * adv, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv).mean()
            ret = t["ret"][i]
            v_loss = 0.5 * (value - ret).pow(2).mean()
            if net.critic is not None:
                v_loss = v_loss + 0.5 * (baseline - ret).pow(2).mean()
            probs = logp_all.exp()
            # illegal actions have probability 0; their (huge negative) log-prob must not enter
            entropy = -(probs * logp_all.masked_fill(t["mask"][i] <= 0, 0.0)).sum(-1).mean()
            loss = pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy
            teach = t["teach"][i]
            asked = teach >= 0
            lesson = torch.zeros(())
            if cfg.sam_lesson_coef > 0 and bool(asked.any()):
                lesson = -logp_all[asked].gather(1, teach[asked].long()[:, None]).mean()
                loss = loss + cfg.sam_lesson_coef * lesson
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
            opt.step()
            with torch.no_grad():
                sums["policy"] += float(pg)
                sums["value"] += float(v_loss)
                sums["entropy"] += float(entropy)
                sums["approx_kl"] += float(((ratio - 1) - log_ratio).mean())
                sums["clipfrac"] += float(((ratio - 1).abs() > cfg.clip).float().mean())
                sums["sam_lesson"] += float(lesson)
            steps += 1
    net.eval()
    return {k: v / max(steps, 1) for k, v in sums.items()}
