"""The learner's update: clipped PPO on masked logits.

The data come with the behaviour policy's log-probabilities.  Rollouts a
few updates old (the workers run while the learner trains) are corrected by
the importance ratio against them and held in by the clip, as in PPO.  Rows
at least ``learner.correct_from_lag`` updates old are learned with the
decoupled objective of Hilton et al. (2021, "Batch size-invariance for
policy optimization"): the clip is centred on the learner's policy at the
start of the update (the proximal policy), and the objective is weighted by
the importance weight proximal / behaviour truncated at ``learner.is_clip``,
V-trace's rho-bar (Espeholt et al., 2018).  For the other rows both are the
behaviour policy and the weight is 1: plain PPO.  The advantages stay the
worker's (GAE under the behaviour policy's values); V-trace's c-traces
would need the trajectories, which a flat batch no longer has, so the lag
is bounded instead (``learner.max_policy_lag``).

Two additions to plain PPO, both explained in docs/training.md:

- the value target trains the perfect-information critic when the network
  has one (and the policy's own value head too, which exported models keep);
- the Sâm lesson: at the learner's Sâm decisions (declare or not, and every
  play after it declared), a cross-entropy term towards the heuristic's
  choice, which comes from its Monte-Carlo planner.  A declaration is rare
  and worth ±60 lá, so exploration alone drives its probability to 0 long
  before it meets the hands where declaring pays, and a declared hand is
  played too rarely for PPO alone to learn to play it out.

Expert iteration (``training/distill.py``) adds a third term: KL(search
target || policy) on minibatches of decisions the play-time search answered,
weighted by ``distill.coef`` (:func:`distill_terms`), riding on each PPO step
or, without PPO, as steps of their own (:func:`distill_update`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import torch

from agents.nets.interface import PolicyNetwork

from .config import LearnerConfig

if TYPE_CHECKING:  # the algorithm imports this loss: its settings' type only
    from .algorithms.ppo import PPOConfig


@torch.no_grad()
def explained_variance(value: torch.Tensor, ret: torch.Tensor) -> float:
    """1 - Var(return - value) / Var(return) of the baseline the advantages were computed with (1: it
    predicts the returns, 0: no better than their mean; nan for constant returns), as CleanRL logs it."""
    var = ret.float().var()
    return float("nan") if not var > 0 else float(1 - (ret.float() - value.float()).var() / var)


@torch.no_grad()
def proximal_logp(net: PolicyNetwork, data: dict[str, torch.Tensor], stale: torch.Tensor, chunk: int,
                  bf16: bool) -> torch.Tensor:
    """Log-probabilities of the taken actions: the current policy's on ``stale`` rows, the behaviour's elsewhere."""
    prox = data["logp"].clone()
    rows = stale.nonzero().squeeze(-1)
    for start in range(0, len(rows), chunk):
        i = rows[start:start + chunk]
        with torch.autocast(data["obs"].device.type, torch.bfloat16, enabled=bf16):
            logits, _ = net(data["obs"][i], data["mask"][i])
        prox[i] = torch.log_softmax(logits.float(), -1).gather(1, data["act"][i][:, None]).squeeze(-1)
    return prox


#: A minibatch of search targets (``obs``, ``mask``, ``target``, ``target_entropy``, ``move``), or None
#: when none is due (training/distill.py: ``TargetBuffer.sample``).
DistillSampler = Callable[[], Optional[dict]]
DISTILL_NAMES = ("distill_kl", "distill_ce", "search_agreement")
#: The learner's gradient step on a loss, returning the gradient norm before clipping (``Learner.step``).
Step = Callable[[torch.Tensor], torch.Tensor]


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


def minibatch_indices(n: int, size: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """One epoch's minibatches of ``n`` rows: a random permutation (``gen``, on the CPU) cut into
    ``ceil(n / size)`` parts whose sizes differ by at most one, none over ``size``: every row is learned
    once per epoch, and no minibatch is a small remainder whose advantages normalize badly."""
    return torch.tensor_split(torch.randperm(n, generator=gen), -(-n // size))


def ppo_update(net: PolicyNetwork, step: Step, data: dict[str, torch.Tensor], cfg: PPOConfig,
               lcfg: LearnerConfig, gen: torch.Generator,
               between_steps: Callable[[], None] | None = None, distill: DistillSampler | None = None,
               distill_coef: float = 0.0) -> dict[str, float]:
    """``cfg.epochs`` passes of minibatch PPO over ``data`` (tensors on the network's device, from
    ``compact.expand``, plus ``lag``: each row's policy lag in updates); returns mean losses and diagnostics.

    ``step`` is the learner's gradient step (clip and Adam) on a loss.
    ``between_steps`` runs after every gradient step (the trainer collects rollouts there, so workers
    never wait for a long update).  ``gen`` is a CPU generator, so the minibatches are the same on any device.
    ``distill``: at each step, a minibatch of search targets whose KL term joins the loss with weight
    ``distill_coef`` (none when it answers None); its means come back as ``distill_kl`` ... .
    """
    device = data["obs"].device
    bf16 = lcfg.precision == "bf16"
    n = data["obs"].shape[0]
    mb = min(cfg.minibatch, n)
    net.eval()
    stale = data["lag"] >= lcfg.correct_from_lag
    prox = proximal_logp(net, data, stale, mb, bf16) if bool(stale.any()) else data["logp"]
    is_weight = (prox - data["logp"]).exp().clamp(max=lcfg.is_clip)  # 1 on fresh rows
    net.train()
    names = ("policy", "value", "entropy", "approx_kl", "clipfrac", "sam_lesson")
    sums = torch.zeros(len(names) + 1, device=device)  # and the gradient norm before clipping
    dsums = torch.zeros(len(DISTILL_NAMES), device=device)
    steps = dsteps = 0
    for _ in range(cfg.epochs):
        for i in minibatch_indices(n, mb, gen):
            i = i.to(device)
            mask = data["mask"][i]
            with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
                logits, value, baseline = net.train_forward(data["obs"][i], mask, data["hid"][i])
            logp_all = torch.log_softmax(logits.float(), dim=-1)
            value, baseline = value.float(), baseline.float()
            logp = logp_all.gather(1, data["act"][i][:, None]).squeeze(-1)
            adv = data["adv"][i]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            log_ratio = logp - prox[i]
            ratio = log_ratio.exp()
            pg = -(is_weight[i] * torch.min(ratio * adv, ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv)).mean()
            ret = data["ret"][i]
            v_loss = 0.5 * (value - ret).pow(2).mean()
            if net.has_critic:
                v_loss = v_loss + 0.5 * (baseline - ret).pow(2).mean()
            probs = torch.softmax(logits.float(), dim=-1)  # torch's exp on a CPU is ~10x slower than softmax's
            # illegal actions have probability 0; their (huge negative) log-prob must not enter
            entropy = -(probs * logp_all.masked_fill(mask <= 0, 0.0)).sum(-1).mean()
            loss = pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy
            teach = data["teach"][i]
            asked = teach >= 0
            lesson = torch.zeros((), device=device)
            if cfg.sam_lesson_coef > 0 and bool(asked.any()):
                lesson = -logp_all[asked].gather(1, teach[asked].long()[:, None]).mean()
                loss = loss + cfg.sam_lesson_coef * lesson
            dbatch = distill() if distill is not None else None
            if dbatch is not None:
                terms = distill_terms(net, dbatch, bf16)
                loss = loss + distill_coef * terms[0]
                dsums += terms.detach()
                dsteps += 1
            grad_norm = step(loss)
            with torch.no_grad():  # summed on the device: no host sync per step
                sums += torch.stack([pg, v_loss, entropy, ((ratio - 1) - log_ratio).mean(),
                                     ((ratio - 1).abs() > cfg.clip).float().mean(), lesson,
                                     grad_norm.float()]).detach()
            steps += 1
            if between_steps is not None:
                between_steps()
    net.eval()
    out = dict(zip((*names, "grad_norm"), (sums / max(steps, 1)).tolist()))
    out["explained_variance"] = explained_variance(data["val"], data["ret"])
    out["stale_fraction"] = float(stale.float().mean())
    out["is_weight"] = float(is_weight.mean())
    if distill is not None:
        out |= dict(zip(DISTILL_NAMES, (dsums / max(dsteps, 1)).tolist())) if dsteps else {}
        out["distill_steps"] = float(dsteps)
    return out
