"""Expert iteration (``algorithm: expert_iteration``): search workers' targets distilled into the policy,
beside PPO.

The stage itself (rounds, search workers, seeds, resume) is described in
:mod:`training.algorithms.expert_search`.  Its pieces, by role: the search workers
(:class:`~training.algorithms.expert_search.SearchWorkers`), the targets they send
(:class:`~training.algorithms.expert_targets.SearchTargets`) and the distillation term
(:func:`~training.algorithms.losses.distill_terms`, one of PPO's :class:`~training.algorithms.ppo.ExtraTerm`).
This module runs them in the loop, round by round: it starts the workers, takes their results into the
targets, learns (PPO's update with the distillation term on each step, or distillation steps alone without
``distill.ppo``), ends a round after ``distill.round_updates`` updates (the round's network and hand belief),
and keeps the stage's state in every checkpoint.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from agents.nets.belief import load_belief, save_belief
from agents.nets.format import BELIEF_META, read_json_file
from agents.players.policy_agent import PolicyAgent
from sam_env.seeding import mix

from ..config import TrainConfig, training_tables
from ..errors import TrainError
from ..run.algorithm import Algorithm, RunContext, Rows
from ..run.learner import LearningRate
from ..run.rollout import RolloutTargets, load_numpy_weights, weights_to_numpy
from ..run.runstate import Restored, RunState
from ..run.workers import WorkerGroup
from ..tools.belief import collect, fit
from .expert_search import BELIEF_STREAM, DistillConfig, DistillCounters, SearchWorkers, belief_net
from .expert_targets import SearchTargets
from .losses import DISTILL_NAMES, distill_terms, distill_update
from .ppo import PPO, ExtraTerm


class ExpertIteration(Algorithm):
    """Search workers and a distillation term, on PPO's rollouts or alone (see the module docstring)."""

    name = "expert_iteration"
    section = "distill"
    Settings = DistillConfig
    reads = ("ppo",)  # PPO's update and learning rate, on the same network

    def __init__(self, cfg: TrainConfig, state: RunState, log: Callable[[str], None]):
        ppo = PPO(cfg, state, log)  # PPO's update and settings, on the same network
        super().__init__(cfg, state, log, learner=ppo.learner)
        self.ppo = ppo
        self.stage_counters = DistillCounters()
        self.round_weights: dict[str, np.ndarray] | None = None
        self.belief: dict[str, Any] | None = None  # {"hidden", "weights", "info"}: the round's hand belief
        self.search_targets = SearchTargets(self.settings.buffer, self.settings.heldout)
        self.workers = SearchWorkers(cfg.seed, cfg.rollout.max_restarts, log)
        self.search_points: deque[tuple[float, int]] = deque(maxlen=20)
        # the counters at the last charts written
        self.marks = dataclasses.replace(self.stage_counters, rounds=[])
        self.held_kl: dict[str, float] = {}  # the last measure on the held-out decisions
        self.round_start_s = 0.0     # how long the last round's start took (this sitting's; 0: none yet)
        self.round_skipped = False   # a round not begun for want of time, said once

    @classmethod
    def targets(cls, cfg: TrainConfig) -> RolloutTargets:
        return PPO.targets(cfg)

    @property
    def batch_decisions(self) -> int:
        return self.ppo.batch_decisions

    def lr_schedule(self) -> LearningRate:
        return self.ppo.lr_schedule()

    @classmethod
    def learns_from_rollouts(cls, cfg: TrainConfig) -> bool:
        return cfg.section(cls.section).ppo

    @classmethod
    def own_workers(cls, cfg: TrainConfig) -> list[WorkerGroup]:
        d = cfg.section(cls.section)
        return [WorkerGroup(cls.section, d.num_workers, d.cpus_per_worker, "search worker")]

    @classmethod
    def dry_run_lines(cls, cfg: TrainConfig) -> list[str]:
        d = cfg.section(cls.section)
        world = "the real deal (world: real)" if d.world == "real" else f"worlds {d.worlds}"
        term = ("regret x" if d.loss == "value" else "KL x") + f" {d.coef:g}"
        return [f"  expert iteration: {d.num_workers} x {d.cpus_per_worker:g} CPU search workers"
                f" (candidates {d.candidates}, {world}, horizon {d.horizon}, critic {d.critic});"
                f" {term}" + (f" at temperature {d.temperature:g} lá" if d.loss == "kl" else "")
                + (f", weighted by regret at stake {d.stake:g}" if d.stake else "")
                + (" beside PPO" if d.ppo else ", no PPO") + f"; rounds of {d.round_updates:,} updates"]

    def begin(self, restored: Restored | None) -> None:
        """A resume restores the stage; a new stage's round 0 searches the starting network."""
        if restored is not None:
            self._restore(restored)
        if self.round_weights is None:
            self.round_weights = self.learner.weights()
            # a stage that begins mid-run: its round 0 from here
            self.stage_counters.round_start = self.state.counters.updates
            if self.cfg.init_from:
                self.belief = self._belief_of(Path(self.cfg.init_from))
            self.stage_counters.rounds = [self._round_record("init_from" if self.belief else "none")]
        self.marks = dataclasses.replace(self.stage_counters, rounds=[])

    # ---- the belief and the round's network ----------------------------------------------------
    def _belief_of(self, ckpt_dir: Path) -> dict[str, Any] | None:
        try:
            net = load_belief(ckpt_dir)
        except ValueError as exc:
            raise TrainError(f"init_from: {exc}") from None
        if net is None:
            return None
        info = read_json_file(ckpt_dir / BELIEF_META)
        return {"hidden": net.hidden, "weights": weights_to_numpy(net),
                "info": {"from": str(ckpt_dir),
                         **{k: info.get(k) for k in ("deals", "decisions", "holdout_nll")}}}

    def _retrain_belief(self) -> str:
        """Learn the hand belief of the round's network (training/tools/belief.py), here, before the search
        uses it; kept only where it beats the round's belief so far on the same held-out decisions of the
        new network (a small ``belief_deals`` can learn a worse one).  Returns "learned" or "kept"."""
        cfg, d = self.cfg, self.settings
        t0 = time.perf_counter()
        net = cfg.model.build()
        load_numpy_weights(net, self.round_weights)
        seed = mix(cfg.seed, BELIEF_STREAM, self.stage_counters.round) >> 32
        obs, tgt = collect(PolicyAgent(net.eval(), seed=seed), d.heuristic_share, d.belief_deals,
                           training_tables(cfg.env), seed)
        try:
            bnet, losses = fit(obs, tgt, hidden=cfg.belief.hidden, epochs=cfg.belief.epochs, seed=seed,
                               incumbent=belief_net(self.belief))
        except ValueError as exc:
            raise TrainError(f"distill.belief_deals={d.belief_deals}: {exc}") from None
        scored = {k: round(v, 5) for k, v in losses.items() if k.endswith("_nll")}
        new, old = losses["holdout_nll"], losses.get("incumbent_nll", float("inf"))
        verdict = "learned" if new < old else "kept"
        seconds = round(time.perf_counter() - t0, 1)
        if verdict == "learned":
            info = {"round": self.stage_counters.round, "deals": d.belief_deals, "decisions": int(len(tgt)),
                    **scored, "seconds": seconds}
            self.belief = {"hidden": cfg.belief.hidden, "weights": weights_to_numpy(bnet), "info": info}
        than = f", the round's belief so far {old:.4f}" if "incumbent_nll" in losses else ""
        self.log(f"round {self.stage_counters.round}: hand belief {verdict} ({d.belief_deals:,} deals,"
                 f" {len(tgt):,} decisions, held-out: new {new:.4f} nats/card{than},"
                 f" uniform {scored['uniform_nll']:.4f}; {seconds:.0f} s)")
        return verdict

    def _round_record(self, belief: str) -> dict[str, Any]:
        """Where a round began (``belief``: init_from, none, learned or kept), for the metadata."""
        c = self.state.counters
        return {"round": self.stage_counters.round, "updates": c.updates,
                "decisions_trained": c.decisions_trained, "searched": self.stage_counters.searched,
                "wall_s": round(c.wall_s, 1), "belief": belief}

    def _next_round(self, ctx: RunContext) -> None:
        """A round ends: the belief for the new network, an evaluation of it, a checkpoint, and the search
        workers' next requests play it."""
        c = self.state.counters
        self.stage_counters.round += 1
        self.stage_counters.round_start = c.updates
        self.round_weights = self.learner.weights()
        belief = self._retrain_belief() if self.settings.belief_deals else "kept"
        self.workers.set_round(self.round_weights, self.stage_counters.round, self.belief)
        ctx.evaluate(if_idle=True, finish_older=True)  # the last round's evaluation is part of the curve
        c.wall_s = ctx.wall()
        self.stage_counters.rounds.append(self._round_record(belief))
        ctx.save()
        self.log(f"round {self.stage_counters.round} begins at update {c.updates}"
                 f" ({self.stage_counters.searched:,} searched decisions so far);"
                 " the search workers play the new network")

    # ---- the search workers ------------------------------------------------------------------------------
    def start(self, ctx: RunContext) -> None:
        d = self.settings
        if self.stage_counters.round == 0 and self.belief is None and d.belief_deals:
            self.stage_counters.rounds[0]["belief"] = self._retrain_belief()
        self.workers.set_round(self.round_weights, self.stage_counters.round, self.belief)
        self.workers.start(ctx.place, d, self.stage_counters)
        if self.state.counters.updates == 0:  # the starting network, measured as every round's is
            ctx.evaluate()

    def collect(self, ctx: RunContext, timeout: float) -> float:
        """Search results first (waiting for them when there are no rollout workers), then rollouts."""
        outs, failures = self.workers.collect(0 if self.rollout_workers else timeout, self.stage_counters)
        self.state.counters.worker_failures += failures
        for out in outs:
            self._take_targets(out)
        return 0 if outs or not self.rollout_workers else timeout

    def _take_targets(self, out: dict[str, Any]) -> None:
        """A search result into the targets, and its counts into the stage's."""
        self.search_targets.add(out["batch"])
        st, d = out["stats"], self.stage_counters
        d.games += st["games"]
        d.decisions += st["decisions"]
        d.searched += len(out["batch"]["cands"])
        d.changed += st["changed"]
        d.la_sum += st["la_sum"]
        d.heuristic_games += st["heuristic_games"]
        d.heuristic_la_sum += st["heuristic_la_sum"]

    def stop(self) -> None:
        self.workers.stop()

    # ---- learning ---------------------------------------------------------------------------------------
    def _sample(self) -> dict[str, torch.Tensor] | None:
        """A distillation minibatch of the targets, or None while none is due (``distill.reuse``)."""
        d = self.settings
        return self.search_targets.sample(d.minibatch, d.reuse, self.state.gen, self.learner.device,
                                          d.temperature, d.stake, d.loss)

    def distill_term(self) -> ExtraTerm:
        """The distillation term on a minibatch of the targets, as PPO adds it to each of its steps."""
        def loss(net: torch.nn.Module, bf16: bool) -> tuple[torch.Tensor, torch.Tensor] | None:
            batch = self._sample()
            return None if batch is None else distill_terms(net, batch, bf16)
        return ExtraTerm("distill", DISTILL_NAMES, loss, self.settings.coef)

    def take(self, ctx: RunContext) -> list[dict[str, Any]]:
        if self.rollout_workers:
            return super().take(ctx)
        fresh = self.search_targets.take_fresh(self.settings.batch_decisions, self.settings.minibatch)
        return [{"searched": fresh}] if fresh else []

    def decisions_in(self, batches: list[dict[str, Any]]) -> int:
        return super().decisions_in(batches) if self.rollout_workers else batches[0]["searched"]

    def learn(self, ctx: RunContext, batches: list[dict[str, Any]]) -> dict[str, float]:
        """With PPO: its update, the distillation term riding on each step; without: distillation steps on
        the targets for the new searched decisions (``distill.reuse`` x them / ``distill.minibatch``)."""
        if self.rollout_workers:
            return self.ppo.learn(ctx, batches, extra=[self.distill_term()])
        d, learner = self.settings, self.learner
        return distill_update(learner.net, lambda loss: learner.step(loss, self.ppo.settings.max_grad_norm),
                              self._sample, math.ceil(d.reuse * batches[0]["searched"] / d.minibatch),
                              self.cfg.learner.precision == "bf16", ctx.between_steps)

    def _search_charts(self, ctx: RunContext, step: int) -> None:
        """What the search workers delivered since the last update: the searching seat's lá, how often the
        search changed the round network's move, the round and the buffer."""
        d, m, b = self.stage_counters, self.marks, ctx.board
        games, heur = d.games - m.games, d.heuristic_games - m.heuristic_games
        searched = d.searched - m.searched
        if games:
            b.scalar("charts/search_la", (d.la_sum - m.la_sum) / games, step)
        if heur:
            b.scalar("charts/search_vs_heuristic_la", (d.heuristic_la_sum - m.heuristic_la_sum) / heur, step)
        if searched:
            b.scalar("charts/search_changed", (d.changed - m.changed) / searched, step)
        b.scalar("charts/round", d.round, step)
        b.scalar("charts/search_buffer", len(self.search_targets.buffer), step)
        self.marks = dataclasses.replace(d, rounds=[])

    def after_update(self, ctx: RunContext) -> None:
        self._search_charts(ctx, self.state.counters.decisions_trained)
        if self.state.counters.updates - self.stage_counters.round_start < self.settings.round_updates:
            return
        left = ctx.seconds_left()
        if left < self.round_start_s:  # the round goes on to the budget's end instead
            if not self.round_skipped:
                self.round_skipped = True
                self.log(f"round {self.stage_counters.round + 1} is not begun: its start (the belief and an"
                         f" evaluation, {self.round_start_s:.0f} s last time) would not end in the"
                         f" {max(left, 0):.0f} s left; round {self.stage_counters.round} goes on")
            return
        t0 = time.perf_counter()
        self._next_round(ctx)
        self.round_start_s = time.perf_counter() - t0

    # ---- what it shows and keeps --------------------------------------------------------------------
    def log_scalars(self, ctx: RunContext, step: int) -> None:
        self.search_points.append((time.perf_counter(), self.stage_counters.searched))
        r = self._search_rate()
        if r is not None:
            ctx.board.scalar("charts/search_decisions_per_s", r, step)
        ctx.board.scalar("charts/searched_decisions", self.stage_counters.searched, step)
        held = self.search_targets.held_out_kl(self.learner.net, self.settings.temperature)
        if held:
            self.held_kl = held
            ctx.board.scalar("losses/distill_kl_heldout", held["distill_kl"], step)
            ctx.board.scalar("charts/search_agreement_heldout", held["search_agreement"], step)
            ctx.board.scalar("losses/distill_regret_heldout", held["distill_regret"], step)

    def _search_rate(self) -> float | None:
        """Searched decisions received per second over the last log intervals."""
        if len(self.search_points) < 2:
            return None
        (t0, n0), (t1, n1) = self.search_points[0], self.search_points[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None

    def display_rows(self) -> tuple[Rows, Rows]:
        d, ls = self.stage_counters, self.losses
        r = self._search_rate()
        text = f"round {d.round}, {d.searched:,} searched" + (f" ({r:,.0f}/s)" if r else "")
        if "distill_kl" in ls:
            text += f", KL {ls['distill_kl']:.3f}, agreement {100 * ls['search_agreement']:.0f}%"
        if self.held_kl:
            text += (f", held out {self.held_kl['distill_kl']:.3f}"
                     f" (regret {self.held_kl['distill_regret']:.2f} lá)")
        rows, _ = super().display_rows()
        return rows + [("search", text)], [("search", text)]

    def eval_note(self, at: dict[str, Any]) -> None:
        at["round"] = self.stage_counters.round

    def metadata(self, meta: dict[str, Any]) -> None:
        d = self.stage_counters
        if not self.settings.ppo:  # the opponent mix the network learned from is the search games'
            meta["heuristic_share"] = self.settings.heuristic_share
        meta["distill"] = {"round": d.round, "round_start_update": d.round_start, "searched": d.searched,
                           "games": d.games, "search_la": round(d.la_sum / d.games, 4) if d.games else None,
                           "rounds": d.rounds, "belief": (self.belief or {}).get("info"),
                           "precision": {str(w): p for w, p in sorted(self.workers.precision.items())}}

    def to_checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        tensors = {f"round.{k}": torch.from_numpy(np.array(v)) for k, v in self.round_weights.items()}
        b = self.belief
        if b:
            tensors |= {f"belief.{k}": torch.from_numpy(np.array(v)) for k, v in b["weights"].items()}
        belief = {"hidden": b["hidden"], "info": b["info"]} if b else None
        return tensors, {"distill": {"counters": dataclasses.asdict(self.stage_counters), "belief": belief,
                                     "precision": {str(w): p for w, p in self.workers.precision.items()}}}

    def _restore(self, restored: Restored) -> None:
        tensors, saved = restored.tensors, restored.state.get("distill")
        if not saved:
            self.log(f"{restored.path} holds no expert-iteration stage:"
                     " it starts at round 0 from this network")
            return
        known = {f.name for f in dataclasses.fields(DistillCounters)}
        self.stage_counters = DistillCounters(**{k: v for k, v in saved["counters"].items() if k in known})
        self.workers.precision = {int(w): p
                                  for w, p in saved.get("precision", {}).items()}  # until they report
        self.round_weights = {k[len("round."):]: v.numpy() for k, v in tensors.items()
                              if k.startswith("round.")}
        b = saved.get("belief")
        if b:
            weights = {k[len("belief."):]: v.numpy() for k, v in tensors.items() if k.startswith("belief.")}
            self.belief = {"hidden": int(b["hidden"]), "weights": weights, "info": b["info"]}

    def saved(self, path: Path) -> None:
        """The round's hand belief beside the weights (``DIR+search`` then searches any checkpoint of the
        stage as the stage did)."""
        if self.belief:
            save_belief(path, belief_net(self.belief),
                        self.belief["info"] | {"distill_round": self.stage_counters.round})

    def summary(self, out: dict[str, Any]) -> None:
        d = self.stage_counters
        out["distill"] = {"round": d.round, "searched": d.searched, "games": d.games,
                          "search_la": round(d.la_sum / d.games, 4) if d.games else None,
                          "changed": round(d.changed / d.searched, 4) if d.searched else None,
                          "heldout": self.held_kl,
                          "rounds": d.rounds,
                          "losses": {k: v for k, v in self.losses.items()
                                     if k.startswith("distill") or k == "search_agreement"}}
