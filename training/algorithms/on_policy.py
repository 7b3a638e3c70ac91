"""What the algorithms on PPO's rollout workers share: their settings' common fields
(:class:`OnPolicySettings`), the value regression every one with a critic trains, and the policy's terms on a
batch.  The contract an algorithm fulfils is the loop's (:mod:`training.run.algorithm`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..config import MAX_BATCH_DECISIONS, Section, TrainConfig, need


@dataclass
class OnPolicySettings(Section):
    """An algorithm on PPO's rollout workers: the returns the workers compute for it, an update's size,
    its learning rate and loss weights."""

    lr: float = 3e-4
    """Adam learning rate."""
    gamma: float = 1.0
    """Discount between one seat's decisions (a game is short and scored at the end); the rollout
    workers' returns use it."""
    gae_lambda: float = 0.95
    """GAE lambda of the rollout workers' advantages and returns (1: Monte-Carlo returns)."""
    batch_decisions: int = 16384
    """Learner decisions gathered before one update (rollouts are taken whole; an update takes every
    rollout waiting, at most learner.queue_rollouts of them)."""
    ent_coef: float = 0.01
    """Entropy bonus."""
    vf_coef: float = 0.5
    """Value loss weight (the value head's, and the critic's when the network has one)."""
    max_grad_norm: float = 0.5
    """Gradient clipping (the gradients' global norm)."""

    def check(self, cfg: TrainConfig, name: str) -> None:
        need(self.lr > 0, f"{name}.lr must be positive")
        need(0 < self.gamma <= 1 and 0 <= self.gae_lambda <= 1,
             f"{name}.gamma must be in (0, 1], {name}.gae_lambda in [0, 1]")
        need(1 <= self.batch_decisions <= MAX_BATCH_DECISIONS, f"{name}.batch_decisions must be from 1 to"
             f" {MAX_BATCH_DECISIONS:,} (the learner expands ~4.5 KB per decision)")
        need(self.ent_coef >= 0 and self.vf_coef >= 0 and self.max_grad_norm > 0,
             f"{name}.ent_coef and vf_coef must be >= 0, max_grad_norm > 0")


def value_regression(net: torch.nn.Module, value: torch.Tensor, base: torch.Tensor,
                     ret: torch.Tensor) -> torch.Tensor:
    """Mean squared error of the value head, and of the critic when the network has one, on returns (the
    critic is the baseline the rollout workers bootstrap from: every algorithm that has one trains it)."""
    loss = (value.float() - ret).pow(2).mean()
    return loss + (base.float() - ret).pow(2).mean() if getattr(net, "has_critic", False) else loss


def policy_terms(net: torch.nn.Module, data: dict[str, torch.Tensor]
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(logp, entropy, value, baseline)`` of a batch through ``net.train_forward``: the taken moves'
    log-probabilities, the policy's mean entropy over the legal moves, the value head and the baseline
    (the critic, or the value head without one)."""
    logits, value, baseline = net.train_forward(data["obs"], data["mask"], data["hid"])
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(logp_all.exp() * logp_all.masked_fill(data["mask"] <= 0, 0.0)).sum(-1).mean()
    return logp_all.gather(1, data["act"][:, None]).squeeze(-1), entropy, value.float(), baseline.float()
