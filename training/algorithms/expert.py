"""Expert iteration as an algorithm: search workers' targets distilled into the policy, beside PPO.

The stage itself (rounds, search workers, the buffer, seeds, resume) is described in
:mod:`training.algorithms.expert_search`, which holds its pieces; this part runs them in the loop: it
starts the search workers, takes their results into the buffer, learns (PPO's update with a distillation
minibatch on each step, or distillation steps alone without ``distill.ppo``), ends a round after
``distill.round_updates`` updates, and keeps its state in every checkpoint.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import ray
import torch
from ray.exceptions import RayActorError, RayTaskError

from agents.nets.belief import load_belief, save_belief
from agents.nets.format import BELIEF_META, read_json_file
from agents.players.policy_agent import PolicyAgent
from agents.players.search import rates_text
from sam_env.seeding import mix

from ..tools.belief import collect, fit
from ..config import TrainConfig, training_tables
from .expert_search import (BELIEF_STREAM, HOLD_EVERY, DistillConfig, DistillCounters, TargetBuffer,
                       _search_actor_class, belief_net, kl_to_targets, search_request_seed)
from ..errors import TrainError
from ..run.rollout import RolloutTargets, load_numpy_weights, weights_to_numpy
from ..run.runstate import Restored, RunState
from ..run.workers import WorkerGroup, WorkerHealth, arrived
from .base import Algorithm, Rows
from .losses import distill_update
from .ppo import PPO

if TYPE_CHECKING:  # the loop imports the algorithms: a type only
    from ..run.loop import RunLoop


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
        self.ppo.distill_coef = self.settings.coef
        self.d = DistillCounters()
        self.round_weights: dict[str, np.ndarray] | None = None
        self.belief: dict[str, Any] | None = None  # {"hidden", "weights", "info"}: the round's hand belief
        self.precision: dict[int, str] = {}        # each search worker's rollouts, as it last reported
        self.buffer = TargetBuffer(self.settings.buffer)
        self.held = TargetBuffer(self.settings.heldout) if self.settings.heldout else None  # never trained on
        self.drawn = self.received = self.fresh = 0  # this sitting's draws into minibatches, arrivals
        self.search_actors: list[Any] = []
        self.search_placement: list[dict[str, Any]] = []
        self.search_health = WorkerHealth("search worker", 0, cfg.rollout.max_restarts)
        self.search_pending: dict[Any, tuple[int, int]] = {}
        self.search_points: deque[tuple[float, int]] = deque(maxlen=20)
        self.marks = dataclasses.replace(self.d, rounds=[])  # the counters at the last charts written
        self.held_kl: dict[str, float] = {}  # the last measure on the held-out decisions
        self.round_start_s = 0.0     # how long the last round's start took (this sitting's; 0: none yet)
        self.round_skipped = False   # a round not begun for want of time, said once

    @classmethod
    def targets(cls, cfg: TrainConfig) -> RolloutTargets:
        return PPO.targets(cfg)

    @property
    def batch_decisions(self) -> int:
        return self.ppo.batch_decisions

    def learning_rate(self) -> float:
        return self.ppo.learning_rate()

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
            self.d.round_start = self.state.c.updates  # a stage that begins mid-run: its round 0 from here
            if self.cfg.init_from:
                self.belief = self._belief_of(Path(self.cfg.init_from))
            self.d.rounds = [self._round_record("init_from" if self.belief else "none")]
        self.marks = dataclasses.replace(self.d, rounds=[])

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
        seed = mix(cfg.seed, BELIEF_STREAM, self.d.round) >> 32
        obs, tgt = collect(PolicyAgent(net.eval(), seed=seed), d.heuristic_share, d.belief_deals,
                           training_tables(cfg), seed)
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
            info = {"round": self.d.round, "deals": d.belief_deals, "decisions": int(len(tgt)), **scored,
                    "seconds": seconds}
            self.belief = {"hidden": cfg.belief.hidden, "weights": weights_to_numpy(bnet), "info": info}
        than = f", the round's belief so far {old:.4f}" if "incumbent_nll" in losses else ""
        self.log(f"round {self.d.round}: hand belief {verdict} ({d.belief_deals:,} deals,"
                 f" {len(tgt):,} decisions, held-out: new {new:.4f} nats/card{than},"
                 f" uniform {scored['uniform_nll']:.4f}; {seconds:.0f} s)")
        return verdict

    def _round_record(self, belief: str) -> dict[str, Any]:
        """Where a round began (``belief``: init_from, none, learned or kept), for the metadata."""
        c = self.state.c
        return {"round": self.d.round, "updates": c.updates, "decisions_trained": c.decisions_trained,
                "searched": self.d.searched, "wall_s": round(c.wall_s, 1), "belief": belief}

    def _put_round(self) -> None:
        """The round's network and belief in Ray's object store, for every search request of the round."""
        self.round_ref = ray.put(self.round_weights)
        b = self.belief
        self.belief_ref = ray.put({"hidden": b["hidden"], "weights": b["weights"]}) if b else None

    def _next_round(self, run: "RunLoop") -> None:
        """A round ends: the belief for the new network, an evaluation of it, a checkpoint, and the search
        workers' next requests play it."""
        c = self.state.c
        self.d.round += 1
        self.d.round_start = c.updates
        self.round_weights = self.learner.weights()
        belief = self._retrain_belief() if self.settings.belief_deals else "kept"
        self._put_round()
        flight = run.evaluator.in_flight
        if flight is not None and flight[1]["updates"] != c.updates:
            run.evaluator.finish()  # the last round's: part of the curve
        run.evaluate(if_idle=True)
        c.wall_s = run.wall()
        self.d.rounds.append(self._round_record(belief))
        run.save()
        self.log(f"round {self.d.round} begins at update {c.updates} ({self.d.searched:,} searched"
                 " decisions so far); the search workers play the new network")

    # ---- the search workers ------------------------------------------------------------------------------
    def start(self, run: "RunLoop") -> None:
        d = self.settings
        if self.d.round == 0 and self.belief is None and d.belief_deals:
            self.d.rounds[0]["belief"] = self._retrain_belief()
        self._put_round()
        self.search_actors, self.search_placement = run.workers.place(
            _search_actor_class(), d.num_workers, "search worker", d.cpus_per_worker)
        self.search_health = WorkerHealth("search worker", d.num_workers, self.cfg.rollout.max_restarts)
        for w in range(d.num_workers):
            self._submit_search(w)
        if self.state.c.updates == 0:  # the starting network, measured as every round's is
            run.evaluate()

    def _submit_search(self, w: int) -> None:
        req = self.d.requests
        self.d.requests += 1
        ref = self.search_actors[w].play.remote(self.round_ref, self.d.round, self.belief_ref,
                                                search_request_seed(self.cfg.seed, w, req))
        self.search_pending[ref] = (w, req)

    def collect(self, run: "RunLoop", timeout: float) -> float:
        """Search results first (waiting for them when there are no rollout workers), then rollouts."""
        for w in self.search_health.due():
            self._submit_search(w)
        got = self._collect_search(0 if self.rollout_workers else timeout)
        return 0 if got or not self.rollout_workers else timeout

    def _collect_search(self, timeout: float) -> int:
        """Take the search results that arrived into the buffer and ask their workers again; their count."""
        ready = arrived(self.search_pending, timeout)
        for ref in ready:
            w, req = self.search_pending.pop(ref)
            try:
                out = ray.get(ref)
            except (RayActorError, RayTaskError) as exc:
                if self.search_health.failed(w, exc):
                    self.state.c.worker_failures += 1
                    self.log(f"search worker {w} failed ({type(exc).__name__}); Ray restarts it,"
                             f" request {req} is dropped and asked again")
                continue
            self.search_health.ok(w)
            self._take_targets(out)
            self._submit_search(w)
        return len(ready)

    def _take_targets(self, out: dict[str, Any]) -> None:
        """A search result into the buffer (every HOLD_EVERY-th decision into the held-out set instead),
        and its counts into the stage's."""
        batch = out["batch"]
        n = len(batch["cands"])
        if self.held is not None:
            hold = np.arange(n) % HOLD_EVERY == 0
            self.held.add({k: v[hold] for k, v in batch.items()})
            batch = {k: v[~hold] for k, v in batch.items()}
        self.buffer.add(batch)
        self.received += len(batch["cands"])
        self.fresh += len(batch["cands"])
        st, d = out["stats"], self.d
        self._note_precision(out.get("worker", 0), st)
        d.games += st["games"]
        d.decisions += st["decisions"]
        d.searched += n
        d.changed += st["changed"]
        d.la_sum += st["la_sum"]
        d.heuristic_games += st["heuristic_games"]
        d.heuristic_la_sum += st["heuristic_la_sum"]

    def _note_precision(self, worker: int, st: dict[str, Any]) -> None:
        """Says once per worker which precision its rollouts run in, and why."""
        prec, rates = st["precision"], st["rollout_rates"]
        if self.precision.get(worker) != prec:
            self.precision[worker] = prec
            why = f"measured {rates_text(rates)}" if rates else "distill.precision"
            self.log(f"search worker {worker}: rollouts in {prec} ({why})")

    def stop(self) -> None:
        if ray.is_initialized():
            for a in self.search_actors:
                ray.kill(a, no_restart=True)

    # ---- learning ---------------------------------------------------------------------------------------
    def _sample(self) -> dict[str, torch.Tensor] | None:
        """A distillation minibatch from the buffer, or None while drawing it would use the searched
        decisions more than ``distill.reuse`` times each on average."""
        d = self.settings
        if len(self.buffer) < d.minibatch or self.drawn + d.minibatch > d.reuse * self.received + 1e-9:
            return None
        self.drawn += d.minibatch
        return self.buffer.sample(d.minibatch, self.state.gen, self.learner.device, d.temperature, d.stake,
                                  d.loss)

    def take(self, run: "RunLoop") -> list[dict[str, Any]]:
        if self.rollout_workers:
            return super().take(run)
        d = self.settings
        if self.fresh < d.batch_decisions or len(self.buffer) < d.minibatch:
            return []
        fresh, self.fresh = self.fresh, 0
        return [{"searched": fresh}]

    def decisions_in(self, batches: list[dict[str, Any]]) -> int:
        return super().decisions_in(batches) if self.rollout_workers else batches[0]["searched"]

    def learn(self, run: "RunLoop", batches: list[dict[str, Any]]) -> dict[str, float]:
        """With PPO: its update, a distillation minibatch riding on each step; without: distillation steps
        on the buffer for the new searched decisions (``distill.reuse`` x them / ``distill.minibatch``)."""
        if self.rollout_workers:
            self.ppo.distill = self._sample
            try:
                return self.ppo.learn(run, batches)
            finally:
                self.ppo.distill = None
        d, learner = self.settings, self.learner
        return distill_update(learner.net, lambda loss: learner.step(loss, self.ppo.settings.max_grad_norm),
                              self._sample, math.ceil(d.reuse * batches[0]["searched"] / d.minibatch),
                              self.cfg.learner.precision == "bf16", run.between_steps)

    def _search_charts(self, run: "RunLoop", step: int) -> None:
        """What the search workers delivered since the last update: the searching seat's lá, how often the
        search changed the round network's move, the round and the buffer."""
        d, m, b = self.d, self.marks, run.board
        games, heur = d.games - m.games, d.heuristic_games - m.heuristic_games
        searched = d.searched - m.searched
        if games:
            b.scalar("charts/search_la", (d.la_sum - m.la_sum) / games, step)
        if heur:
            b.scalar("charts/search_vs_heuristic_la", (d.heuristic_la_sum - m.heuristic_la_sum) / heur, step)
        if searched:
            b.scalar("charts/search_changed", (d.changed - m.changed) / searched, step)
        b.scalar("charts/round", d.round, step)
        b.scalar("charts/search_buffer", len(self.buffer), step)
        self.marks = dataclasses.replace(d, rounds=[])

    def after_update(self, run: "RunLoop") -> None:
        self._search_charts(run, self.state.c.decisions_trained)
        if self.state.c.updates - self.d.round_start < self.settings.round_updates:
            return
        left = run.seconds_left()
        if left < self.round_start_s:  # the round goes on to the budget's end instead
            if not self.round_skipped:
                self.round_skipped = True
                self.log(f"round {self.d.round + 1} is not begun: its start (the belief and an evaluation,"
                         f" {self.round_start_s:.0f} s last time) would not end in the {max(left, 0):.0f} s"
                         f" left; round {self.d.round} goes on")
            return
        t0 = time.perf_counter()
        self._next_round(run)
        self.round_start_s = time.perf_counter() - t0

    # ---- what it shows and keeps --------------------------------------------------------------------
    def log_scalars(self, run: "RunLoop", step: int) -> None:
        self.search_points.append((time.perf_counter(), self.d.searched))
        r = self._search_rate()
        if r is not None:
            run.board.scalar("charts/search_decisions_per_s", r, step)
        run.board.scalar("charts/searched_decisions", self.d.searched, step)
        if self.held is not None and len(self.held):
            self.held_kl = kl_to_targets(self.learner.net, self.held.rows(np.arange(len(self.held))),
                                         self.settings.temperature)
            run.board.scalar("losses/distill_kl_heldout", self.held_kl["distill_kl"], step)
            run.board.scalar("charts/search_agreement_heldout", self.held_kl["search_agreement"], step)
            run.board.scalar("losses/distill_regret_heldout", self.held_kl["distill_regret"], step)

    def _search_rate(self) -> float | None:
        """Searched decisions received per second over the last log intervals."""
        if len(self.search_points) < 2:
            return None
        (t0, n0), (t1, n1) = self.search_points[0], self.search_points[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None

    def display_rows(self) -> tuple[Rows, Rows]:
        d, ls = self.d, self.losses
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
        at["round"] = self.d.round

    def metadata(self, meta: dict[str, Any]) -> None:
        d = self.d
        if not self.settings.ppo:  # the opponent mix the network learned from is the search games'
            meta["heuristic_share"] = self.settings.heuristic_share
        meta["distill"] = {"round": d.round, "round_start_update": d.round_start, "searched": d.searched,
                           "games": d.games, "search_la": round(d.la_sum / d.games, 4) if d.games else None,
                           "rounds": d.rounds, "belief": (self.belief or {}).get("info"),
                           "precision": {str(w): p for w, p in sorted(self.precision.items())}}

    def to_checkpoint(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        tensors = {f"round.{k}": torch.from_numpy(np.array(v)) for k, v in self.round_weights.items()}
        b = self.belief
        if b:
            tensors |= {f"belief.{k}": torch.from_numpy(np.array(v)) for k, v in b["weights"].items()}
        belief = {"hidden": b["hidden"], "info": b["info"]} if b else None
        return tensors, {"distill": {"counters": dataclasses.asdict(self.d), "belief": belief,
                                     "precision": {str(w): p for w, p in self.precision.items()}}}

    def _restore(self, restored: Restored) -> None:
        tensors, saved = restored.tensors, restored.state.get("distill")
        if not saved:
            self.log(f"{restored.path} holds no expert-iteration stage:"
                     " it starts at round 0 from this network")
            return
        known = {f.name for f in dataclasses.fields(DistillCounters)}
        self.d = DistillCounters(**{k: v for k, v in saved["counters"].items() if k in known})
        self.precision = {int(w): p for w, p in saved.get("precision", {}).items()}  # until workers report
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
            save_belief(path, belief_net(self.belief), self.belief["info"] | {"distill_round": self.d.round})

    def summary(self, out: dict[str, Any]) -> None:
        d = self.d
        out["distill"] = {"round": d.round, "searched": d.searched, "games": d.games,
                          "search_la": round(d.la_sum / d.games, 4) if d.games else None,
                          "changed": round(d.changed / d.searched, 4) if d.searched else None,
                          "heldout": self.held_kl,
                          "rounds": d.rounds,
                          "losses": {k: v for k, v in self.losses.items()
                                     if k.startswith("distill") or k == "search_agreement"}}
