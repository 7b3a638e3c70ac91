"""A2C defined outside the package: an algorithm with its own settings section, in one file.

    PYTHONPATH=examples samloc train --config quick algorithm=custom_algorithm:A2C a2c.lr=3e-4

It learns from PPO's rollout workers as they are: they compute GAE advantages with the ``gamma`` and
``gae_lambda`` of its own section (``targets``, inherited), and it takes one gradient step per batch on
the advantage actor-critic loss through the learner's one step.  The ``a2c`` section is given on the
command line or in YAML, shown by ``--print-config``, checked, saved with the run and restored by
``--resume``; nothing in the ``training`` package names it.  What ``learn`` receives (``obs``, ``mask``,
``hid``, ``act``, ``logp``, ``val``, ``adv``, ``ret``) is in docs/training.md, "Writing an algorithm";
the figures it returns are what the progress display and TensorBoard's ``losses/*`` show.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from training.algorithms import Algorithm, OnPolicySettings, RunContext, policy_terms, value_regression
from training.config import TrainConfig, need


@dataclass
class A2CConfig(OnPolicySettings):
    """Advantage actor-critic (examples/custom_algorithm.py): a step per batch on the workers' advantages."""

    lr: float = 7e-4
    """Adam learning rate."""
    gae_lambda: float = 1.0
    """GAE lambda of the workers' advantages (1: n-step returns bootstrapped where a rollout ends)."""
    normalize_advantage: bool = False
    """Scale each batch's advantages to mean 0 and standard deviation 1."""

    def check(self, cfg: TrainConfig, name: str) -> None:
        super().check(cfg, name)
        need(self.batch_decisions >= 2 or not self.normalize_advantage,
             f"{name}.normalize_advantage needs {name}.batch_decisions >= 2")


class A2C(Algorithm):
    """One gradient step per batch: -log pi(a|s) x A(s, a), the value loss, an entropy bonus."""

    name = "a2c"
    Settings = A2CConfig

    def learn(self, ctx: RunContext, batches: list[dict[str, Any]]) -> dict[str, float]:
        s, net = self.settings, self.learner.net
        data = self.learner.batch([b["batch"] for b in batches])
        adv = data["adv"]
        if s.normalize_advantage:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        net.train()
        logp, entropy, value, baseline = policy_terms(net, data)
        pg = -(logp * adv).mean()
        v_loss = 0.5 * value_regression(net, value, baseline, data["ret"])
        self.learner.step(pg + s.vf_coef * v_loss - s.ent_coef * entropy, s.max_grad_norm)
        net.eval()
        return {"policy": pg.item(), "value": v_loss.item(), "entropy": entropy.item()}
