"""REINFORCE with a learned baseline: the smallest algorithm on the PPO workers' rollouts.

The example of docs/training.md, "Writing an algorithm": one gradient step per batch on
``-log π(a|s) · (G - b(s))`` (b: the critic, or the value head without one) plus the value loss of
both (the workers bootstrap unfinished games from the critic) and an entropy bonus, with the
``reinforce`` section's ``lr``, ``vf_coef``, ``ent_coef`` and ``max_grad_norm``.  It reuses the rollout
workers and their batches as they are (the return ``ret`` they computed with its ``gamma`` and
``gae_lambda``), so it is only this file and its name in the registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..run.algorithm import Algorithm, RunContext
from .on_policy import OnPolicySettings, policy_terms, value_regression


@dataclass
class ReinforceConfig(OnPolicySettings):
    """REINFORCE with a learned baseline (algorithm: reinforce): one gradient step per batch."""


class Reinforce(Algorithm):
    """Monte-Carlo policy gradient with a baseline, on-policy: stale rollouts are not corrected."""

    name = "reinforce"
    Settings = ReinforceConfig

    def learn(self, ctx: RunContext, batches: list[dict[str, Any]]) -> dict[str, float]:
        s, net = self.settings, self.learner.net
        data = self.learner.batch([b["batch"] for b in batches])
        net.train()
        logp, entropy, value, baseline = policy_terms(net, data)
        pg = -(logp * (data["ret"] - baseline).detach()).mean()
        v_loss = 0.5 * value_regression(net, value, baseline, data["ret"])
        loss = pg + s.vf_coef * v_loss - s.ent_coef * entropy
        self.learner.step(loss, s.max_grad_norm)
        net.eval()
        return {"policy": pg.item(), "value": v_loss.item(), "entropy": entropy.item(), "approx_kl": 0.0}
