"""Pieces of losses and updates that more than one algorithm uses: an epoch's minibatches, the explained
variance of a baseline, and expert iteration's distillation term, which rides on each PPO step
(:func:`training.algorithms.ppo.ppo_update`) or, without PPO, makes steps of its own (:func:`distill_update`).

The distillation term is KL(search target || policy) on a minibatch of decisions the play-time search
answered (training/algorithms/expert_search.py makes them), weighted by ``distill.coef``."""

from __future__ import annotations

from typing import Callable, Optional

import torch

from agents.nets.interface import PolicyNetwork

#: A minibatch of search targets (``obs``, ``mask``, ``target``, ``target_entropy``, ``move``), or None
#: when none is due (training/algorithms/expert_search.py: ``TargetBuffer.sample``).
DistillSampler = Callable[[], Optional[dict]]
DISTILL_NAMES = ("distill_kl", "distill_ce", "search_agreement")
#: The learner's gradient step on a loss, returning the gradient norm before clipping (``Learner.step``).
Step = Callable[[torch.Tensor], torch.Tensor]


@torch.no_grad()
def explained_variance(value: torch.Tensor, ret: torch.Tensor) -> float:
    """1 - Var(return - value) / Var(return) of the baseline the advantages were computed with (1: it
    predicts the returns, 0: no better than their mean; nan for constant returns), as CleanRL logs it."""
    var = ret.float().var()
    return float("nan") if not var > 0 else float(1 - (ret.float() - value.float()).var() / var)


def minibatch_indices(n: int, size: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """One epoch's minibatches of ``n`` rows: a random permutation (``gen``, on the CPU) cut into
    ``ceil(n / size)`` parts whose sizes differ by at most one, none over ``size``: every row is learned
    once per epoch, and no minibatch is a small remainder whose advantages normalize badly."""
    return torch.tensor_split(torch.randperm(n, generator=gen), -(-n // size))


def distill_terms(net: PolicyNetwork, batch: dict[str, torch.Tensor], bf16: bool) -> torch.Tensor:
    """``[KL(target || policy), cross-entropy, agreement]`` on a minibatch of search targets, KL first
    (the loss: cross-entropy less the target's entropy, so it is 0 when the policy is the target).
    Agreement is the share of decisions whose most probable move is the search's own."""
    with torch.autocast(batch["obs"].device.type, torch.bfloat16, enabled=bf16):
        logits, _ = net(batch["obs"], batch["mask"])
    logp = torch.log_softmax(logits.float(), dim=-1)
    # the target is 0 off the candidates, which are legal: illegal moves' (finite) log-probs add 0
    ce = -(batch["target"] * logp).sum(-1).mean()
    agree = (logits.argmax(-1) == batch["move"]).float().mean()
    return torch.stack([ce - batch["target_entropy"].mean(), ce, agree.detach()])


def distill_update(net: PolicyNetwork, step: Step, sample: DistillSampler, steps: int, bf16: bool,
                   between_steps: Callable[[], None] | None = None) -> dict[str, float]:
    """Up to ``steps`` gradient steps (``step``: the learner's) on the distillation term alone (a stage
    without PPO); returns the mean KL, cross-entropy, agreement and gradient norm, and ``distill_steps``
    (steps the sampler fed)."""
    net.train()
    sums = torch.zeros(len(DISTILL_NAMES) + 1)
    done = 0
    for _ in range(steps):
        batch = sample()
        if batch is None:
            break
        terms = distill_terms(net, batch, bf16)
        grad_norm = step(terms[0])
        sums += torch.cat([terms.detach(), grad_norm.float()[None]]).cpu()
        done += 1
        if between_steps is not None:
            between_steps()
    net.eval()
    out = dict(zip((*DISTILL_NAMES, "grad_norm"), (sums / max(done, 1)).tolist()))
    out["distill_steps"] = float(done)
    return out
