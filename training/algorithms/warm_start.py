"""A new run's warm start: behaviour cloning from the heuristic's games, played inside the run's budget.

Self-play from random weights spends its first minutes learning what any rule bot knows (lead low, keep
pairs, answer a 2 with a quad).  ``warm_start.decisions > 0`` has the heuristic play every seat of
``warm_start.envs`` games on the run's tables, and the network learns, as the games are made, to choose
the heuristic's move (cross-entropy on the masked logits) and what each decision's game brought its seat
(the value head, and the critic, on the Monte-Carlo returns the DMC engine computes).  Nothing made
before the run is read; the games come from the run's seed; the time counts toward ``max_minutes``.
The algorithm then starts from this network with a fresh optimizer.

With Ray up (``remote``) the games are played by a Ray actor while the learner trains on the previous
batch, so a two-core machine plays and learns at once; the batches are the same either way.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Iterator

import numpy as np
import ray
import torch

from sam_env.seeding import mix

from ..run import compact
from ..config import Section, TrainConfig, need
from ..run.learner import Learner
from ..run.rollout import RolloutStream, rollout_actor_class
from .base import value_regression
from .dmc import MonteCarloEngine

STEPS = 16  # decisions per game slot between two learning passes


@dataclasses.dataclass
class WarmStartConfig(Section):
    """Behaviour cloning from the heuristic's games before a new run's first update (this module's
    docstring).  The games are played then, inside the run's budget: its minutes count toward max_minutes."""

    decisions: int = 0
    """Heuristic decisions to clone (0: no warm start); every seat of these games is the heuristic."""
    envs: int = 1024
    """Games played side by side to make them."""
    minibatch: int = 2048
    """Decisions per gradient step."""
    lr: float = 1e-3
    """Adam learning rate while cloning (an optimizer of its own: the algorithm's starts afresh)."""
    value_coef: float = 0.5
    """Weight of the value head's (and the critic's) regression on the games' returns, so the algorithm
    starts with a baseline that knows what the cloned play earns."""
    max_grad_norm: float = 0.5
    """Gradient clipping."""

    def check(self, cfg: TrainConfig, name: str) -> None:
        need(self.decisions >= 0 and self.envs >= 1 and self.minibatch >= 1 and self.lr > 0
             and self.value_coef >= 0 and self.max_grad_norm > 0,
             f"{name}.decisions and value_coef must be >= 0; envs, minibatch, lr and max_grad_norm positive")
        need(not (self.decisions and cfg.init_from), f"{name}.decisions and init_from both give the first"
             " network: choose one")


class HeuristicEngine(MonteCarloEngine):
    """Every seat plays the heuristic; the decisions come out with their whole-game returns."""

    def learner_moves(self, st: RolloutStream, t: int, sel: slice | np.ndarray, act: np.ndarray) -> None:
        gb = st.env.game_batch
        act[sel] = np.asarray(self.heuristic.act_batch(gb.states[sel], gb.ru, st.obs[sel], st.mask[sel]))


def games_config(cfg: TrainConfig) -> TrainConfig:
    """The run's config, its rollouts made the warm start's: every seat in ``warm_start.envs`` games."""
    ro = dataclasses.replace(cfg.rollout, envs_per_worker=cfg.section("warm_start").envs,
                             steps_per_rollout=STEPS, opponent_fraction=0.0)
    return dataclasses.replace(cfg, rollout=ro)


def heuristic_batches(cfg: TrainConfig, weights: dict[str, np.ndarray],
                      remote: bool) -> Iterator[dict[str, Any]]:
    """The warm start's packed batches, one per rollout of :class:`HeuristicEngine` (``remote``: played
    by a Ray actor one batch ahead of the caller)."""
    seed, games = mix(cfg.seed, 0x5EED), games_config(cfg)
    if not remote:
        engine = HeuristicEngine(games, 0, seed)
        while True:
            yield engine.rollout()["batch"]
    # num_cpus=0: it plays while the rollout workers, which hold the run's CPUs, wait for the first weights
    actor = rollout_actor_class(HeuristicEngine).options(num_cpus=0).remote(games, 0)
    try:
        ahead = actor.rollout.remote(weights, 0, [], seed)
        while True:
            out = ray.get(ahead)
            ahead = actor.rollout.remote(weights, 0, [], seed)
            yield out["batch"]
    finally:
        ray.kill(actor)


def clone_heuristic(learner: Learner, cfg: TrainConfig, log: Callable[[str], None],
                    remote: bool = False) -> dict[str, float]:
    """Train ``learner.net`` on ``warm_start.decisions`` of the heuristic's decisions (see the module
    docstring); returns the figures of the last pass and the time it took."""
    ws, t0 = cfg.section("warm_start"), time.perf_counter()
    net = learner.net
    opt = learner.new_optimizer(ws.lr)  # its own: the algorithm's optimizer starts without its moments
    gen = torch.Generator().manual_seed(cfg.seed)
    seen, figures = 0, {}
    batches = heuristic_batches(cfg, learner.weights(), remote)
    while seen < ws.decisions:
        data = compact.expand(compact.to_device(next(batches), learner.device))
        n = int(data["act"].shape[0])
        sums, steps = torch.zeros(3), 0
        net.train()
        for i in torch.randperm(n, generator=gen).to(learner.device).split(ws.minibatch):
            logits, value, base = net.train_forward(data["obs"][i], data["mask"][i], data["hid"][i])
            ce = torch.nn.functional.cross_entropy(logits.float(), data["act"][i])
            ret = data["ret"][i].float()
            v_loss = value_regression(net, value, base, ret)
            learner.step(ce + ws.value_coef * v_loss, ws.max_grad_norm, opt)
            agree = (logits.detach().argmax(-1) == data["act"][i]).float().mean()
            sums += torch.stack([ce.detach(), v_loss.detach(), agree]).cpu()
            steps += 1
        net.eval()
        seen += n
        figures = dict(zip(("cross_entropy", "value_loss", "agreement"), (sums / max(steps, 1)).tolist()))
    batches.close()
    figures |= {"decisions": float(seen), "seconds": time.perf_counter() - t0}
    log(f"warm start: {seen:,} heuristic decisions cloned in {figures['seconds']:.0f} s (agreement "
        f"{figures['agreement']:.1%}, cross-entropy {figures['cross_entropy']:.3f})")
    return figures
