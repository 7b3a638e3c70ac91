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
import math
import sys
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
from .on_policy import value_regression
from .dmc import MonteCarloEngine

STEPS = 16  # decisions per game slot between two learning passes
#: Heuristic decisions cloned a second where it was measured (2 cores: 2.01 M in 82 to 176 s,
#: docs/results.md): the dry run's estimate of the warm start's minutes, and the budget check's.
RATE = 15_000
#: The share of max_minutes the warm start may take by that estimate; a budget it would take more of
#: (``max_minutes=2`` on quick) is refused, as it leaves the algorithm nothing to train.
MAX_SHARE = 0.75


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


def estimate_s(ws: WarmStartConfig) -> float:
    """The warm start's seconds by :data:`RATE` (0 without one)."""
    return ws.decisions / RATE


def dry_run_lines(ws: WarmStartConfig, max_minutes: float) -> list[str]:
    """The dry run's line for a new run's warm start (none without one) in a run of ``max_minutes``."""
    if not ws.decisions:
        return []
    share = f", {estimate_s(ws) / (60 * max_minutes):.0%} of max_minutes" if max_minutes else ""
    return [f"  warm start:  {ws.decisions:,} heuristic decisions cloned before the first update, about"
            f" {estimate_s(ws) / 60:.1f} minutes{share} (at ~{RATE:,}/s, as on 2 cores)"]


def budget_problem(ws: WarmStartConfig, max_minutes: float) -> str:
    """The one line refusing a new run whose warm start would take (nearly) all of ``max_minutes``,
    leaving nothing to train ('' when the budget holds it)."""
    est = estimate_s(ws)
    if not ws.decisions or not max_minutes or est <= MAX_SHARE * 60 * max_minutes:
        return ""
    least = math.ceil(est / 60 / MAX_SHARE * 2) / 2
    return (f"max_minutes={max_minutes:g} leaves nothing to train: the warm start alone"
            f" (warm_start.decisions={ws.decisions:,}) takes about {est / 60:.1f} minutes (~{RATE:,}"
            f" decisions/s, as on 2 cores); give max_minutes={least:g} or more, or fewer"
            " warm_start.decisions (0: none)")


class _Progress:
    """The warm start's progress as the run's display shows the algorithm's (``display``): a rich bar on
    a terminal, else a plain line every ``log_every_s``, or nothing."""

    def __init__(self, name: str, display: str, every_s: float, total: int):
        self.name, self.every_s = name, every_s
        self.total, self.t0, self.last = total, time.perf_counter(), 0.0
        mode = display
        self.mode = ("rich" if sys.stdout.isatty() else "plain") if mode == "auto" else mode
        self.bar: Any = None

    def __enter__(self) -> "_Progress":
        if self.mode == "rich":
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn  # a terminal only
            self.bar = Progress(TextColumn("[bold]warm start[/] cloning the heuristic"), BarColumn(),
                                TextColumn("{task.completed:,.0f} of {task.total:,.0f} decisions"),
                                TextColumn("{task.fields[note]}"), TimeRemainingColumn())
            self.bar.__enter__()
            self.task = self.bar.add_task("warm start", total=self.total, note="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def update(self, seen: int, figures: dict[str, float]) -> None:
        note = f"agreement {figures['agreement']:.1%}" if figures else ""
        if self.bar is not None:
            self.bar.update(self.task, completed=min(seen, self.total), note=note)
            return
        now = time.perf_counter()
        if self.mode != "plain" or now - self.last < self.every_s:
            return
        self.last, spent = now, now - self.t0
        left = spent * max(self.total - seen, 0) / seen if seen >= 0.05 * self.total else None
        eta = "?" if left is None else f"{int(left) // 60}:{int(left) % 60:02d}"  # first batches: small
        print(f"[{self.name}] warm start: {seen:,} of {self.total:,} heuristic decisions cloned"
              f" ({min(seen / self.total, 1):.0%}), {note or 'first batch'}, ETA {eta}", flush=True)


class HeuristicEngine(MonteCarloEngine):
    """Every seat plays the heuristic; the decisions come out with their whole-game returns."""

    def learner_moves(self, st: RolloutStream, t: int, sel: slice | np.ndarray, act: np.ndarray) -> None:
        gb = st.env.game_batch
        act[sel] = np.asarray(self.heuristic.act_batch(gb.states[sel], gb.rule_array, st.obs[sel],
                                                       st.mask[sel]))


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
    opt = learner.new_optimizer(ws.lr)  # its own: the algorithm's optimizer starts without its moments
    gen = torch.Generator().manual_seed(cfg.seed)
    seen, figures = 0, {}
    batches = heuristic_batches(cfg, learner.weights(), remote)
    with _Progress(cfg.name, cfg.display, cfg.log_every_s, ws.decisions) as progress:
        while seen < ws.decisions:
            progress.update(seen, figures)
            data = compact.expand(compact.to_device(next(batches), learner.device))
            seen += int(data["act"].shape[0])
            figures = _learn_batch(learner, data, opt, gen, ws)
        progress.update(seen, figures)
    batches.close()
    figures |= {"decisions": float(seen), "seconds": time.perf_counter() - t0}
    log(f"warm start: {seen:,} heuristic decisions cloned in {figures['seconds']:.0f} s (agreement "
        f"{figures['agreement']:.1%}, cross-entropy {figures['cross_entropy']:.3f})")
    if cfg.max_minutes and figures["seconds"] >= 60 * cfg.max_minutes:
        log(f"warm start: it took all of max_minutes={cfg.max_minutes:g}: the run stops before its first"
            " update (give more minutes, or fewer warm_start.decisions)")
    return figures


def hook(learner: Learner, cfg: TrainConfig, log: Callable[[str], None]) -> dict[str, float]:
    """The warm start as the run loop's hook before a new run's first update (``training.launch``): the
    clone, its games played by a Ray actor, when ``warm_start.decisions`` asks for one ({} without)."""
    return clone_heuristic(learner, cfg, log, remote=True) if cfg.section("warm_start").decisions else {}


def _learn_batch(learner: Learner, data: dict[str, torch.Tensor], opt: Any, gen: torch.Generator,
                 ws: WarmStartConfig) -> dict[str, float]:
    """One pass of the clone over a batch of the heuristic's decisions; its mean figures."""
    net = learner.net
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
    return dict(zip(("cross_entropy", "value_loss", "agreement"), (sums / max(steps, 1)).tolist()))
