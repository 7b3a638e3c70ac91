"""REINFORCE with a learned baseline: the smallest algorithm on the PPO workers' rollouts.

The example of docs/training.md, "Writing an algorithm": one gradient step per batch on
``-log π(a|s) · (G - V(s))`` plus the value loss and an entropy bonus, with ``ppo.lr``, ``ppo.vf_coef``,
``ppo.ent_coef`` and ``ppo.max_grad_norm``.  It reuses the rollout workers and their batches as they
are (the return ``ret`` they computed), so it is only this file and its name in the registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from .base import Algorithm

if TYPE_CHECKING:  # the loop imports the algorithms: a type only
    from ..loop import RunLoop


class Reinforce(Algorithm):
    """Monte-Carlo policy gradient with a baseline, on-policy: stale rollouts are not corrected."""

    name = "reinforce"

    def learn(self, run: "RunLoop", batches: list[dict[str, Any]]) -> dict[str, float]:
        cfg, net = self.cfg.ppo, self.learner.net
        data = self.learner.batch([b["batch"] for b in batches])
        net.train()
        logits, value, _ = net.train_forward(data["obs"], data["mask"], data["hid"])
        logp_all = torch.log_softmax(logits.float(), dim=-1)
        logp = logp_all.gather(1, data["act"][:, None]).squeeze(-1)
        advantage = (data["ret"] - value.float()).detach()
        entropy = -(logp_all.exp() * logp_all.masked_fill(data["mask"] <= 0, 0.0)).sum(-1).mean()
        pg = -(logp * advantage).mean()
        v_loss = 0.5 * (value.float() - data["ret"]).pow(2).mean()
        loss = pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy
        self.learner.step(loss, cfg.max_grad_norm)
        net.eval()
        return {"policy": pg.item(), "value": v_loss.item(), "entropy": entropy.item(), "approx_kl": 0.0}
