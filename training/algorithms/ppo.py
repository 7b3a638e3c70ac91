"""PPO on the rollout workers' self-play games: :func:`training.ppo.ppo_update`'s loss on the learner."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..learner import Learner
from ..ppo import DistillSampler, ppo_update
from .base import Algorithm

if TYPE_CHECKING:  # the loop imports the algorithms: a type only
    from ..loop import RunLoop


def update(learner: Learner, batches: list[dict[str, np.ndarray]], lags: list[int], gen: torch.Generator,
           between_steps: Any = None, distill: DistillSampler | None = None) -> dict[str, float]:
    """One PPO update of ``learner`` on packed rollouts; ``lags[k]``: updates between the weights that made
    ``batches[k]`` and these (``samloc bench --learner`` times this)."""
    cfg = learner.cfg
    return ppo_update(learner.net, lambda loss: learner.step(loss, cfg.ppo.max_grad_norm),
                      learner.batch(batches, lags), cfg.ppo, cfg.learner, gen, between_steps, distill,
                      cfg.distill.coef)


class PPO(Algorithm):
    """Clipped PPO with a value baseline, learning from every fresh rollout queued."""

    name = "ppo"
    #: search targets whose KL term rides on each PPO step (expert iteration sets it; None: plain PPO)
    distill: DistillSampler | None = None

    def learn(self, run: "RunLoop", batches: list[dict[str, Any]]) -> dict[str, float]:
        """One PPO update on these rollouts."""
        lags = [self.state.c.updates - b["version"] for b in batches]
        losses = update(self.learner, [b["batch"] for b in batches], lags, self.state.gen, run.between_steps,
                        self.distill)
        return losses | {"policy_lag": float(np.mean(lags)), "policy_lag_max": float(max(lags))}
