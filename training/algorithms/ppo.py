"""PPO on the rollout workers' self-play games (:func:`training.ppo.ppo_update` through the learner)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import Algorithm

if TYPE_CHECKING:  # the loop imports the algorithms: a type only
    from ..loop import RunLoop


class PPO(Algorithm):
    """Clipped PPO with a value baseline, learning from every fresh rollout queued."""

    name = "ppo"

    def learn(self, run: "RunLoop", batches: list[dict[str, Any]]) -> None:
        """One PPO update on these rollouts; new weights go out with the next requests."""
        c = self.state.c
        self.anneal()
        lags = [c.updates - b["version"] for b in batches]
        lr = self.learner.opt.param_groups[0]["lr"]
        t0 = time.perf_counter()
        self.losses = self.learner.update([b["batch"] for b in batches], lags, self.state.gen, run.between_steps)
        self.losses["update_s"] = time.perf_counter() - t0
        self.losses["policy_lag"] = float(np.mean(lags))
        self.losses["policy_lag_max"] = float(max(lags))
        run.scheduler.publish(self.learner.weights())
        c.updates += 1
        c.decisions_trained += sum(len(b["batch"]["act"]) for b in batches)
        c.rollouts += len(batches)
        st: dict[str, float] = {}
        for b in batches:
            for k, v in b["stats"].items():
                st[k] = st.get(k, 0) + v
        c.games += int(st["games"])
        c.decisions += int(st["decisions"])
        c.sam_declared += int(st["sam_declared"])
        step = c.decisions_trained
        self.write_losses(run, lr, step)
        if st["vs_heuristic_games"]:
            run.board.scalar("charts/train_vs_heuristic_la", st["vs_heuristic_sum"] / st["vs_heuristic_games"], step)
        if st["vs_pool_games"]:
            run.board.scalar("charts/train_vs_pool_la", st["vs_pool_sum"] / st["vs_pool_games"], step)
        run.board.scalar("charts/sam_declared_per_game", st["sam_declared"] / max(1, st["games"]), step)
        run.board.episodes(st, step)
