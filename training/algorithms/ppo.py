"""PPO on the rollout workers' self-play games: its settings (the ``ppo`` section) and the algorithm;
the loss is :func:`training.ppo.ppo_update`, stepped by the learner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..config import TrainConfig, need
from ..learner import Learner
from ..ppo import DistillSampler, ppo_update
from ..rollout import RolloutEngine, RolloutTargets
from .base import Algorithm, OnPolicySettings

if TYPE_CHECKING:  # the loop imports the algorithms: a type only
    from ..loop import RunLoop


@dataclass
class PPOConfig(OnPolicySettings):
    """Masked PPO with GAE over per-seat trajectories."""

    anneal_lr: bool = False
    """Decay the learning rate linearly to 0 at total_decisions (a resume that raises total_decisions
    raises the rate again: lr x the share still to train)."""
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

    def check(self, cfg: TrainConfig, name: str) -> None:
        super().check(cfg, name)
        need(self.sam_lesson_coef >= 0, f"{name}.sam_lesson_coef must be >= 0")
        need(self.clip > 0 and self.epochs >= 1 and self.minibatch >= 1,
             f"{name}.clip, epochs and minibatch must be positive")


def update(learner: Learner, settings: PPOConfig, batches: list[dict[str, np.ndarray]], lags: list[int],
           gen: torch.Generator, between_steps: Any = None, distill: DistillSampler | None = None,
           distill_coef: float = 0.0) -> dict[str, float]:
    """One PPO update of ``learner`` on packed rollouts; ``lags[k]``: updates between the weights that made
    ``batches[k]`` and these (``samloc bench --learner`` times this)."""
    return ppo_update(learner.net, lambda loss: learner.step(loss, settings.max_grad_norm),
                      learner.batch(batches, lags, sparse=learner.sparse_input()), settings, learner.cfg.learner, gen, between_steps,
                      distill, distill_coef)


class PPO(Algorithm):
    """Clipped PPO with a value baseline, learning from every fresh rollout queued."""

    name = "ppo"
    Settings = PPOConfig
    #: search targets whose KL term rides on each PPO step, with its weight (expert iteration sets them)
    distill: DistillSampler | None = None
    distill_coef = 0.0

    @classmethod
    def targets(cls, cfg: TrainConfig) -> RolloutTargets:
        s: PPOConfig = cfg.section("ppo")
        return RolloutTargets(gamma=s.gamma, gae_lambda=s.gae_lambda, teach=s.sam_lesson_coef > 0)

    def learning_rate(self) -> float:
        """``ppo.lr``; with ``ppo.anneal_lr``, for the share of ``total_decisions`` still to train."""
        s = self.settings
        if not s.anneal_lr:
            return s.lr
        return s.lr * max(0.0, 1.0 - self.state.c.decisions_trained / self.cfg.total_decisions)

    def learn(self, run: "RunLoop", batches: list[dict[str, Any]]) -> dict[str, float]:
        """One PPO update on these rollouts."""
        lags = [self.state.c.updates - b["version"] for b in batches]
        losses = update(self.learner, self.settings, [b["batch"] for b in batches], lags, self.state.gen,
                        run.between_steps, self.distill, self.distill_coef)
        return losses | {"policy_lag": float(np.mean(lags)), "policy_lag_max": float(max(lags))}


def ppo_engine(cfg: TrainConfig, worker_id: int, seed: int) -> RolloutEngine:
    """The rollout engine of PPO's workers, outside Ray (the benches and tests play with it)."""
    return RolloutEngine(cfg, worker_id, seed, PPO.targets(cfg))
