"""PPO on the rollout workers' self-play games: its settings (the ``ppo`` section), its loss (clipped PPO
on masked logits, :func:`ppo_update`) and the algorithm, whose update the learner steps.

The data come with the behaviour policy's log-probabilities.  Rollouts a few updates old (the workers run
while the learner trains) are corrected by the importance ratio against them and held in by the clip, as
in PPO.  Rows at least ``ppo.correct_from_lag`` updates old are learned with the decoupled objective of
Hilton et al. (2021, "Batch size-invariance for policy optimization"): the clip is centred on the
learner's policy at the start of the update (the proximal policy), and the objective is weighted by the
importance weight proximal / behaviour truncated at ``ppo.is_clip``, V-trace's rho-bar (Espeholt et al.,
2018).  For the other rows both are the behaviour policy and the weight is 1: plain PPO.  The advantages
stay the worker's (GAE under the behaviour policy's values); V-trace's c-traces would need the
trajectories, which a flat batch no longer has, so the lag is bounded instead (``learner.max_policy_lag``,
the loop's: it drops older rollouts for every algorithm).

Two additions to plain PPO, both explained in docs/training.md:

- the value target trains the perfect-information critic when the network has one (and the policy's own
  value head too, which exported models keep);
- the Sâm lesson: at the learner's Sâm decisions (declare or not, and every play after it declared), a
  cross-entropy term towards the heuristic's choice, which comes from its Monte-Carlo planner.  A
  declaration is rare and worth ±60 lá, so exploration alone drives its probability to 0 long before it
  meets the hands where declaring pays, and a declared hand is played too rarely for PPO alone to learn
  to play it out.

Another algorithm may add terms of its own to each step (:class:`ExtraTerm`): expert iteration
(training/algorithms/expert.py) adds its distillation KL (:func:`training.algorithms.losses.distill_terms`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

from agents.nets.interface import PolicyNetwork

from ..config import LearnerConfig, TrainConfig, need
from ..run.algorithm import Algorithm, RunContext
from ..run.learner import Learner, LearningRate, Progress
from ..run.rollout import RolloutEngine, RolloutTargets
from .losses import Step, explained_variance, minibatch_indices
from .on_policy import OnPolicySettings


ANNEAL_BY = ("decisions", "minutes")


@dataclass
class PPOConfig(OnPolicySettings):
    """Masked PPO with GAE over per-seat trajectories."""

    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 at the end of the budget anneal_by names."""
    anneal_by: str = "decisions"
    """What anneal_lr counts: "decisions" (lr x the share of total_decisions still to train) or "minutes"
    (lr x the share of the stage's minutes still to run: from where the stage began, the run's start without
    stages, to the end of max_minutes; for runs whose budget is the minutes).  A resume that raises the
    budget raises the rate again.  "minutes" reads the wall clock, so it is refused with
    rollout.deterministic."""
    clip: float = 0.2
    """PPO ratio clip."""
    epochs: int = 2
    """Passes over each batch."""
    minibatch: int = 4096
    """Decisions per gradient step, at most: an epoch cuts the batch into ceil(batch / minibatch) minibatches
    of near-equal size, so every decision is learned once per epoch."""
    sam_lesson_coef: float = 0.5
    """Weight of the Sâm lesson: at the learner's Sâm decisions (declare or not, then its plays as the
    declarer), cross-entropy towards the heuristic agent's choice (0: off; see docs/training.md)."""
    correct_from_lag: int = 3
    """Rollouts at least this many updates old are learned with truncated importance weights towards the
    learner's current policy (decoupled PPO with V-trace's truncation, see docs/training.md); younger
    ones with the plain PPO ratio against the behaviour policy (learner.max_policy_lag bounds the age)."""
    is_clip: float = 1.0
    """Truncation of those importance weights (V-trace's rho-bar)."""

    def check(self, cfg: TrainConfig, name: str) -> None:
        super().check(cfg, name)
        need(self.sam_lesson_coef >= 0, f"{name}.sam_lesson_coef must be >= 0")
        need(self.clip > 0 and self.epochs >= 1 and self.minibatch >= 1,
             f"{name}.clip, epochs and minibatch must be positive")
        need(self.correct_from_lag >= 0, f"{name}.correct_from_lag must be >= 0")
        need(self.is_clip > 0, f"{name}.is_clip must be positive")
        need(self.anneal_by in ANNEAL_BY, f"{name}.anneal_by must be one of {', '.join(ANNEAL_BY)},"
             f" not {self.anneal_by!r}")
        if self.anneal_lr and self.anneal_by == "minutes":
            need(cfg.max_minutes > 0, f"{name}.anneal_by minutes needs max_minutes (the minutes it anneals"
                 " over)")
            need(not cfg.rollout.deterministic, f"{name}.anneal_by minutes does not run with"
                 " rollout.deterministic (the rate would follow the wall clock)")


@dataclass(frozen=True)
class ExtraTerm:
    """A term another algorithm adds to PPO's loss at each gradient step (expert iteration's distillation):
    ``loss(net, bf16)`` gives (the term, a tensor of its ``figures``) or None when it has nothing this step;
    the update adds ``coef`` x the term, and returns each figure's mean over the steps it had one and
    ``<name>_steps``, their count."""

    name: str
    figures: tuple[str, ...]
    loss: Callable[[PolicyNetwork, bool], Optional[tuple[torch.Tensor, torch.Tensor]]]
    coef: float = 1.0


@torch.no_grad()
def proximal_logp(net: PolicyNetwork, data: dict[str, torch.Tensor], stale: torch.Tensor, chunk: int,
                  bf16: bool) -> torch.Tensor:
    """Log-probabilities of the taken actions: the current policy's on ``stale`` rows, the behaviour's
    elsewhere."""
    prox = data["logp"].clone()
    rows = stale.nonzero().squeeze(-1)
    for start in range(0, len(rows), chunk):
        i = rows[start:start + chunk]
        with torch.autocast(data["obs"].device.type, torch.bfloat16, enabled=bf16):
            logits, _ = net(data["obs"][i], data["mask"][i])
        prox[i] = torch.log_softmax(logits.float(), -1).gather(1, data["act"][i][:, None]).squeeze(-1)
    return prox


def ppo_update(net: PolicyNetwork, step: Step, data: dict[str, torch.Tensor], cfg: PPOConfig,
               lcfg: LearnerConfig, gen: torch.Generator,
               between_steps: Callable[[], None] | None = None,
               extra: Sequence[ExtraTerm] = ()) -> dict[str, float]:
    """``cfg.epochs`` passes of minibatch PPO over ``data`` (tensors on the network's device, from
    ``compact.expand``, plus ``lag``: each row's policy lag in updates); returns mean losses and diagnostics.

    ``step`` is the learner's gradient step (clip and Adam) on a loss; ``lcfg`` its section (the precision).
    ``between_steps`` runs after every gradient step (the trainer collects rollouts there, so workers
    never wait for a long update).  ``gen`` is a CPU generator, so the minibatches are the same on any device.
    ``extra``: terms added to the loss at each step (:class:`ExtraTerm`); their figures come back too.
    """
    device = data["obs"].device
    bf16 = lcfg.precision == "bf16"
    n = data["obs"].shape[0]
    mb = min(cfg.minibatch, n)
    net.eval()
    stale = data["lag"] >= cfg.correct_from_lag
    prox = proximal_logp(net, data, stale, mb, bf16) if bool(stale.any()) else data["logp"]
    is_weight = (prox - data["logp"]).exp().clamp(max=cfg.is_clip)  # 1 on fresh rows
    net.train()
    names = ("policy", "value", "entropy", "approx_kl", "clipfrac", "sam_lesson")
    sums = torch.zeros(len(names) + 1, device=device)  # and the gradient norm before clipping
    esums = [torch.zeros(len(t.figures), device=device) for t in extra]
    esteps = [0] * len(extra)
    steps = 0
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
            pg = -(is_weight[i] * torch.min(ratio * adv,
                                            ratio.clamp(1 - cfg.clip, 1 + cfg.clip) * adv)).mean()
            ret = data["ret"][i]
            v_loss = 0.5 * (value - ret).pow(2).mean()
            if net.has_critic:
                v_loss = v_loss + 0.5 * (baseline - ret).pow(2).mean()
            # torch's exp on a CPU is ~10x slower than softmax's
            probs = torch.softmax(logits.float(), dim=-1)
            # illegal actions have probability 0; their (huge negative) log-prob must not enter
            entropy = -(probs * logp_all.masked_fill(mask <= 0, 0.0)).sum(-1).mean()
            loss = pg + cfg.vf_coef * v_loss - cfg.ent_coef * entropy
            teach = data["teach"][i]
            asked = teach >= 0
            lesson = torch.zeros((), device=device)
            if cfg.sam_lesson_coef > 0 and bool(asked.any()):
                lesson = -logp_all[asked].gather(1, teach[asked].long()[:, None]).mean()
                loss = loss + cfg.sam_lesson_coef * lesson
            for k, term in enumerate(extra):
                got = term.loss(net, bf16)
                if got is not None:
                    loss = loss + term.coef * got[0]
                    esums[k] += got[1]
                    esteps[k] += 1
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
    for term, sums_k, steps_k in zip(extra, esums, esteps):
        out |= dict(zip(term.figures, (sums_k / steps_k).tolist())) if steps_k else {}
        out[f"{term.name}_steps"] = float(steps_k)
    return out


def update(learner: Learner, settings: PPOConfig, batches: list[dict[str, np.ndarray]], lags: list[int],
           gen: torch.Generator, between_steps: Any = None,
           extra: Sequence[ExtraTerm] = ()) -> dict[str, float]:
    """One PPO update of ``learner`` on packed rollouts; ``lags[k]``: updates between the weights that made
    ``batches[k]`` and these (``samloc bench --learner`` times this)."""
    return ppo_update(learner.net, lambda loss: learner.step(loss, settings.max_grad_norm),
                      learner.batch(batches, lags, sparse=learner.sparse_input()), settings,
                      learner.settings, gen, between_steps, extra)


class PPO(Algorithm):
    """Clipped PPO with a value baseline, learning from every fresh rollout queued."""

    name = "ppo"
    Settings = PPOConfig

    @classmethod
    def targets(cls, cfg: TrainConfig) -> RolloutTargets:
        s: PPOConfig = cfg.section("ppo")
        return RolloutTargets(gamma=s.gamma, gae_lambda=s.gae_lambda, teach=s.sam_lesson_coef > 0)

    def lr_schedule(self) -> LearningRate:
        cfg = self.cfg  # read when asked: a resume's --more-minutes and --more-decisions raise the rate
        return lambda p: annealed_lr(self.settings, p, cfg.total_decisions, cfg.max_minutes)

    def learn(self, ctx: RunContext, batches: list[dict[str, Any]],
              extra: Sequence[ExtraTerm] = ()) -> dict[str, float]:
        """One PPO update on these rollouts (``extra``: terms another algorithm adds to each step)."""
        lags = [self.state.counters.updates - b["version"] for b in batches]
        losses = update(self.learner, self.settings, [b["batch"] for b in batches], lags, self.state.gen,
                        ctx.between_steps, extra)
        return losses | {"policy_lag": float(np.mean(lags)), "policy_lag_max": float(max(lags))}


def annealed_lr(s: PPOConfig, p: Progress, total_decisions: int, max_minutes: float) -> float:
    """``ppo.lr``; with ``ppo.anneal_lr``, times the share of the budget still to go at ``p`` (``anneal_by``:
    the decisions of ``total_decisions``, or the stage's minutes to the end of ``max_minutes``)."""
    if not s.anneal_lr:
        return s.lr
    if s.anneal_by == "decisions":
        return s.lr * max(0.0, 1.0 - p.decisions_trained / total_decisions)
    end = 60.0 * max_minutes
    return s.lr * min(1.0, max(0.0, (end - p.wall_s) / max(end - p.stage_start_s, 1.0)))


def ppo_engine(cfg: TrainConfig, worker_id: int, seed: int) -> RolloutEngine:
    """The rollout engine of PPO's workers, outside Ray (the benches and tests play with it)."""
    return RolloutEngine(cfg, worker_id, seed, PPO.targets(cfg))
