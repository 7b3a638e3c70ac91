"""Pieces of losses and updates that more than one algorithm uses: an epoch's minibatches, the explained
variance of a baseline, and expert iteration's distillation term, which rides on each PPO step
(:func:`training.algorithms.ppo.ppo_update`) or, without PPO, makes steps of its own (:func:`distill_update`).

The distillation term is KL(search target || policy) on a minibatch of decisions the play-time search
answered (training/algorithms/expert_search.py makes them), weighted by ``distill.coef``; ``distill.stake``
weights each decision's KL by the lá the policy stands to lose there by the search's values (its regret);
``distill.loss: value`` trains that regret itself instead of the KL."""

from __future__ import annotations

from typing import Callable, Optional

import torch

from agents.nets.interface import PolicyNetwork

#: A minibatch of search targets (``obs``, ``mask``, ``target``, ``target_entropy``, ``move``, ``cands``,
#: ``values``, ``stake``, ``loss``), or None when none is due (training/algorithms/expert_targets.py:
#: ``TargetBuffer.sample``).
DistillSampler = Callable[[], Optional[dict]]
DISTILL_NAMES = ("distill_kl", "distill_ce", "search_agreement", "distill_regret")
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


def distill_terms(net: PolicyNetwork, batch: dict, bf16: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss and ``[KL(target || policy), cross-entropy, agreement, regret]`` on a minibatch of search
    targets.  KL is the cross-entropy less the target's entropy, so 0 when the policy is the target;
    agreement is the share of decisions whose most probable move is the search's own; regret is the lá a
    decision's policy gives away by the search's values, sum_c p(c) (best value - value(c)) over its
    candidates c, p the policy renormalized over them (what it puts elsewhere the search did not value).

    With ``batch["loss"]`` "kl" (``distill.loss``) the loss is the mean KL with each decision weighted by
    ``(1 - stake) + stake * regret / mean regret`` (``batch["stake"]``, ``distill.stake``; 0: the plain
    mean KL): a decision where the policy's choice costs 3 lá counts for more than one where the
    candidates are within a few tenths of each other, which a uniform KL treats alike.  The weights are
    not differentiated through.  With "value" the loss is the mean regret itself: linear in the values,
    so its gradient on one world's values is, on average, its gradient on their mean over the worlds."""
    with torch.autocast(batch["obs"].device.type, torch.bfloat16, enabled=bf16):
        logits, _ = net(batch["obs"], batch["mask"])
    logp = torch.log_softmax(logits.float(), dim=-1)
    # the target is 0 off the candidates, which are legal: illegal moves' (finite) log-probs add 0
    ce_rows = -(batch["target"] * logp).sum(-1)
    kl_rows = ce_rows - batch["target_entropy"]
    agree = (logits.argmax(-1) == batch["move"]).float().mean()
    train_regret = batch.get("loss", "kl") == "value"
    with torch.set_grad_enabled(train_regret and torch.is_grad_enabled()):  # else a measure only
        valid = batch["cands"] >= 0
        on_cands = logp.gather(1, batch["cands"].clamp(min=0)).masked_fill(~valid, -torch.inf)
        values = batch["values"].masked_fill(~valid, -torch.inf)
        lost = (values.max(1, keepdim=True).values - values).masked_fill(~valid, 0.0)
        regret_rows = (torch.softmax(on_cands, dim=1) * lost).sum(1)
    regret = regret_rows.detach()
    if train_regret:
        loss = regret_rows.mean()
    else:
        stake = float(batch.get("stake", 0.0))
        weight = (1 - stake) + stake * regret / regret.mean().clamp(min=1e-6) if stake else None
        loss = kl_rows.mean() if weight is None else (weight * kl_rows).mean()
    return loss, torch.stack([kl_rows.mean().detach(), ce_rows.mean().detach(), agree.detach(),
                              regret.mean()])


def distill_update(net: PolicyNetwork, step: Step, sample: DistillSampler, steps: int, bf16: bool,
                   between_steps: Callable[[], None] | None = None) -> dict[str, float]:
    """Up to ``steps`` gradient steps (``step``: the learner's) on the distillation term alone (a stage
    without PPO); returns the mean KL, cross-entropy, agreement, regret and gradient norm, and
    ``distill_steps`` (steps the sampler fed)."""
    net.train()
    sums = torch.zeros(len(DISTILL_NAMES) + 1)
    done = 0
    for _ in range(steps):
        batch = sample()
        if batch is None:
            break
        loss, terms = distill_terms(net, batch, bf16)
        grad_norm = step(loss)
        sums += torch.cat([terms, grad_norm.float()[None]]).cpu()
        done += 1
        if between_steps is not None:
            between_steps()
    net.eval()
    out = dict(zip((*DISTILL_NAMES, "grad_norm"), (sums / max(done, 1)).tolist()))
    out["distill_steps"] = float(done)
    return out
