"""Expert iteration: the policy trained towards what play-time search finds.

Play-time search (``agents/search.py``) plays far better than the network it
searches with, at twenty times the cost per decision.  This stage turns that
strength into weights, as expert iteration does (Anthony et al., 2017, "Thinking
fast and slow"; AlphaZero's policy target): search workers play games with the
searching bot, record at every searched decision the observation, the legal
mask, the candidate moves and their mean values, and the learner trains the
policy towards a distribution made of them (:func:`agents.search.search_targets`,
a softmax of the values at ``distill.temperature`` lá) with a KL term, beside
PPO on the usual rollouts (``distill.ppo``) or alone.

**Rounds.**  The search workers play with the network frozen at the start of a
round, so the targets do not chase the network they train.  After
``distill.round_updates`` learner updates a round ends: the hand belief is
learned again for the new network when ``distill.belief_deals`` > 0, the new
network is evaluated (the trainer's own evaluation) and checkpointed, and the
search workers get it.  Targets of the previous round still in the buffer stay
until newer ones push them out.

**The pieces.**  :class:`SearchEngine` plays one worker's games (plain Python;
tests use it directly), :func:`_search_actor_class` is the Ray actor around it,
:class:`TargetBuffer` holds the newest searched decisions, packed, for the
learner, and :class:`DistillTrainer` is the trainer with all of it: the
trainer's checkpoints, resume, TensorBoard, evaluations, export and metadata
serve this stage unchanged.

**Seeds.**  A search worker's engine is seeded by the request that finds it
fresh, :func:`search_request_seed` (``training.rollout.request_seed`` in a
stream of its own, so no search game deals a rollout's deals); its table i
plays the deals of ``table_seed(seed, i)`` + g in game slot g, and its other
draws (which seat searches, which opponents) come from that seed too.

**Resume.**  A checkpoint holds the round, the stage's counters, the round's
frozen network and its belief; the buffer is not kept (it refills from the
search workers, which a resume starts afresh).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents import make_agent
from agents.nets.belief import BeliefNet, load_belief, save_belief
from agents.nets.format import BELIEF_META, read_json_file
from agents.policy_agent import PolicyAgent
from agents.search import SearchAgent, prefers_bf16, rates_text, rollout_rates, search_targets
from sam_env.obs import OBS_SIZE
from sam_env.seeding import mix
from sam_env.vector import SelfPlayBatch

from . import compact
from .config import TrainConfig, to_dict, training_tables
from .rollout import load_numpy_weights, request_seed, slot_shares, table_seed, weights_to_numpy
from .trainer import TrainError, Trainer, WorkerHealth, arrived

HOLD_EVERY = 20  # every 20th searched decision that arrives is held out of training (distill.heldout)
SEARCH_STREAM = 0x5EA4C4  # the search workers' seeds: a stream of their own beside the rollout workers'
BELIEF_STREAM = 0xBE11EF  # the deals a round's belief is learned from
OPP_HEURISTIC, OPP_POLICY = 0, 1  # who sits in a search game's other seats


def search_request_seed(run_seed: int, worker: int, request: int) -> int:
    """The seed of one search request (:func:`training.rollout.request_seed` in the search's stream)."""
    return request_seed(mix(run_seed, SEARCH_STREAM), worker, request)


# ---- the search workers -----------------------------------------------------------------------
class _Table:
    """One SelfPlayBatch of games with, per game, the seat that searches, who its opponents are, and the
    lá that seat has won so far."""

    def __init__(self, rules: Any, players: int, games: int, seed: int):
        self.env = SelfPlayBatch(rules, players, games, seed, copy=False)
        self.players, self.n = players, games
        self.seat = np.zeros(games, dtype=np.int64)
        self.opp = np.zeros(games, dtype=np.int64)
        self.score = np.zeros(games, dtype=np.float64)


class SearchEngine:
    """``distill.envs_per_worker`` games in which one seat searches (the round's network with
    ``distill``'s search settings) and the others are heuristics or the round's greedy policy;
    :meth:`play` returns the searched decisions with their candidates and values."""

    def __init__(self, cfg: TrainConfig, worker_id: int, seed: int):
        torch.set_num_threads(1)
        self.cfg, self.worker_id, self.seed = cfg, worker_id, seed
        self.rng = np.random.default_rng(seed)
        tables = training_tables(cfg)
        sizes = slot_shares(cfg.distill.envs_per_worker, [t.weight for t in tables])
        self.tables = [_Table(t.rules, t.players, n, table_seed(seed, i))
                       for i, (t, n) in enumerate(zip(tables, sizes))]
        for tb in self.tables:
            self._draw(tb, np.arange(tb.n))
        self.heuristic = make_agent("heuristic", seed=seed)
        self.round = -1
        self.policy: PolicyAgent | None = None
        self.search: SearchAgent | None = None
        self.bf16: bool | None = None           # the rollouts' precision, settled by the first network
        self.rates: dict[str, float] = {}       # what distill.precision=auto measured (rows/s)

    def set_network(self, weights: dict[str, np.ndarray], round_: int, belief: dict[str, Any] | None) -> None:
        """The round's network (numpy weights) and hand belief (``{"hidden", "weights"}``, None: uniform
        worlds); rebuilt only when the round changes."""
        if round_ == self.round:
            return
        m, d = self.cfg.model, self.cfg.distill
        net = m.build()
        load_numpy_weights(net, weights)
        if self.bf16 is None:
            if d.precision == "auto":
                self.rates = rollout_rates(net.eval())
                self.bf16 = prefers_bf16(self.rates)
            else:
                self.bf16 = d.precision == "bf16"
        self.policy = PolicyAgent(net.eval(), seed=self.seed, name=f"round{round_}")
        self.search = SearchAgent(self.policy, d.candidates, d.worlds, d.horizon, d.critic,
                                  belief=belief_net(belief), reward_scale=self.cfg.env.reward_scale,
                                  seed=self.seed, bf16=self.bf16)
        self.round = round_

    def _draw(self, tb: _Table, games: np.ndarray) -> None:
        """The searching seat and the opponents of games that just started."""
        u = self.rng.random(games.size)
        tb.opp[games] = np.where(u < self.cfg.distill.heuristic_share, OPP_HEURISTIC, OPP_POLICY)
        tb.seat[games] = self.rng.integers(0, tb.players, games.size)
        tb.score[games] = 0.0

    @torch.no_grad()
    def play(self) -> dict[str, Any]:
        """Play on until ``distill.decisions_per_request`` decisions were searched: ``{"batch": packed
        observations and masks (compact.pack_obs) with "cands" int16 and "values" float64, "stats": counts,
        "round": the network's round}``."""
        if self.search is None:
            raise RuntimeError("SearchEngine.play before set_network")
        t0 = time.perf_counter()
        parts: list[tuple[np.ndarray, ...]] = []
        stats = {"games": 0, "decisions": 0, "searched": 0, "changed": 0, "la_sum": 0.0,
                 "heuristic_games": 0, "heuristic_la_sum": 0.0}
        while stats["searched"] < self.cfg.distill.decisions_per_request:
            for tb in self.tables:
                self._step(tb, parts, stats)
        obs, mask, cands, values = (np.concatenate(p) for p in zip(*parts))
        batch = compact.pack_obs(obs, mask) | {"cands": cands.astype(np.int16), "values": values}
        stats["seconds"] = time.perf_counter() - t0
        stats["precision"] = "bf16" if self.bf16 else "fp32"
        stats["rollout_rates"] = self.rates
        return {"batch": batch, "stats": stats, "round": self.round}

    def _step(self, tb: _Table, parts: list[tuple[np.ndarray, ...]], stats: dict[str, Any]) -> None:
        """One decision in every game of ``tb``: the searching seats search (and are recorded), the others
        play as their kind does."""
        env = tb.env
        gb = env.game_batch
        seat, obs, mask = env.seats, env.obs, env.masks  # the batch's own buffers, read before the step
        acts = np.zeros(tb.n, dtype=np.int64)
        ours = seat == tb.seat
        idx = np.flatnonzero(ours)
        if idx.size:
            res = self.search.search_batch(gb.states[idx], gb.ru, obs[idx], mask[idx])
            acts[idx] = res.acts
            rec = idx[res.rows]
            parts.append((obs[rec], mask[rec], res.cands, res.values))
            stats["searched"] += int(rec.size)
            stats["changed"] += int(np.count_nonzero(res.acts[res.rows] != res.cands[:, 0]))
        for kind, agent in ((OPP_HEURISTIC, self.heuristic), (OPP_POLICY, self.policy)):
            sel = np.flatnonzero(~ours & (tb.opp == kind))
            if sel.size:
                acts[sel] = agent.act_batch(gb.states[sel], gb.ru, obs[sel], mask[sel])
        _, _, _, rewards, done = env.step(acts)
        tb.score += rewards[np.arange(tb.n), tb.seat]
        stats["decisions"] += tb.n
        if done.any():
            ended = np.flatnonzero(done)
            heur = ended[tb.opp[ended] == OPP_HEURISTIC]
            stats["games"] += int(ended.size)
            stats["la_sum"] += float(tb.score[ended].sum())
            stats["heuristic_games"] += int(heur.size)
            stats["heuristic_la_sum"] += float(tb.score[heur].sum())
            self._draw(tb, ended)


def belief_net(belief: dict[str, Any] | None) -> BeliefNet | None:
    """A hand belief shipped as ``{"hidden": width, "weights": numpy state}`` (None: none)."""
    if belief is None:
        return None
    net = BeliefNet(OBS_SIZE, int(belief["hidden"]))
    net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in belief["weights"].items()})
    return net.eval()


def _search_actor_class() -> type:
    import ray

    @ray.remote
    class SearchActor:
        """A Ray actor around :class:`SearchEngine`, made from the first request's seed (a restarted
        actor from the request that finds it fresh, so it never replays its previous games)."""

        def __init__(self, cfg_dict: dict[str, Any], worker_id: int):
            os.environ["OMP_NUM_THREADS"] = "1"
            torch.set_num_threads(1)
            from .config import from_dict
            self.cfg = from_dict(cfg_dict)
            self.worker_id = worker_id
            self.engine: SearchEngine | None = None

        def play(self, weights: dict[str, np.ndarray], round_: int, belief: dict[str, Any] | None,
                 seed: int) -> dict[str, Any]:
            if self.engine is None:
                self.engine = SearchEngine(self.cfg, self.worker_id, seed)
            self.engine.set_network(weights, round_, belief)
            out = self.engine.play()
            out["worker"] = self.worker_id
            return out

        def info(self) -> dict[str, Any]:
            ctx = ray.get_runtime_context()
            return {"pid": os.getpid(), "node_id": ctx.get_node_id(), "worker": self.worker_id}

    return SearchActor


# ---- the learner's side ----------------------------------------------------------------------------
def target_batch(packed: dict[str, np.ndarray], device: torch.device,
                 temperature: float) -> dict[str, torch.Tensor]:
    """Searched decisions (a search worker's ``batch``) as the learner's minibatch: ``obs``, ``mask``, the
    ``target`` distribution at ``temperature``, its entropy and the search's ``move``."""
    obs, mask = compact.expand_obs(compact.to_device({k: v for k, v in packed.items()
                                                      if k not in ("cands", "values")}, device))
    cands, values = packed["cands"].astype(np.int64), packed["values"]
    target = search_targets(cands, values, temperature)
    best = np.where(cands >= 0, values, -np.inf).argmax(axis=1)
    move = cands[np.arange(len(cands)), best]
    t = target.astype(np.float64)
    entropy = -(t * np.log(np.where(t > 0, t, 1.0))).sum(axis=1)
    return {"obs": obs, "mask": mask, "target": torch.from_numpy(target).to(device),
            "target_entropy": torch.from_numpy(entropy.astype(np.float32)).to(device),
            "move": torch.from_numpy(move).to(device)}


class TargetBuffer:
    """The newest ``capacity`` searched decisions as the workers packed them, in arrays allocated once (at
    the first batch); minibatches are drawn uniformly with replacement."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.arrays: dict[str, np.ndarray] = {}
        self.size = 0
        self.next = 0

    def __len__(self) -> int:
        return self.size

    def add(self, batch: dict[str, np.ndarray]) -> None:
        n = len(batch["cands"])
        if not self.arrays:
            self.arrays = {k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype)
                           for k, v in batch.items()}
        skip = max(0, n - self.capacity)  # more than fits: the newest
        idx = (self.next + np.arange(n - skip)) % self.capacity
        for k, a in self.arrays.items():
            a[idx] = batch[k][skip:]
        self.next = int((self.next + n - skip) % self.capacity)
        self.size = min(self.capacity, self.size + n - skip)

    def rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {k: a[idx] for k, a in self.arrays.items()}

    def sample(self, n: int, gen: torch.Generator, device: torch.device,
               temperature: float) -> dict[str, torch.Tensor]:
        idx = torch.randint(self.size, (n,), generator=gen).numpy()
        return target_batch(self.rows(idx), device, temperature)


@torch.no_grad()
def kl_to_targets(net: torch.nn.Module, packed: dict[str, np.ndarray],
                  temperature: float) -> dict[str, float]:
    """KL(target || policy), cross-entropy and agreement of ``net`` (in eval mode) on searched decisions
    it was not trained on, on the network's device."""
    from .ppo import DISTILL_NAMES, distill_terms

    device = next(net.parameters()).device
    terms = distill_terms(net.eval(), target_batch(packed, device, temperature), bf16=False)
    return dict(zip(DISTILL_NAMES, terms.tolist()))


@dataclass
class DistillCounters:
    """The stage's progress, kept in every checkpoint (a resume continues it exactly)."""

    round: int = 0
    round_start: int = 0          # the update count at which the round began
    requests: int = 0             # search requests handed out (ids never reused: each is a seed)
    games: int = 0                # search games finished
    decisions: int = 0            # every decision of the search workers' games
    searched: int = 0             # searched decisions received, each with its target
    changed: int = 0              # of those, where the search did not play the round network's move
    la_sum: float = 0.0           # the searching seat's lá over the finished games
    heuristic_games: int = 0      # finished games against heuristics ...
    heuristic_la_sum: float = 0.0  # ... and the searching seat's lá in them
    rounds: list[dict[str, Any]] = field(default_factory=list)  # where each round began, and its belief


class DistillTrainer(Trainer):
    """The trainer with search workers and a distillation term (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, **kw: Any):
        self.d = DistillCounters()
        self.round_weights: dict[str, np.ndarray] | None = None
        self.belief: dict[str, Any] | None = None  # {"hidden", "weights", "info"}: the round's hand belief
        self.precision: dict[int, str] = {}        # each search worker's rollouts, as it last reported
        super().__init__(cfg, run_dir, **kw)       # a resume restores the four (_restore_extra)
        if self.round_weights is None:             # the stage starts: round 0 searches the starting network
            self.round_weights = self.learner.weights()
            if cfg.init_from:
                self.belief = self._belief_of(Path(cfg.init_from))
            self.d.rounds = [self._round_record("init_from" if self.belief else "none")]
        self.buffer = TargetBuffer(cfg.distill.buffer)
        self.held = TargetBuffer(cfg.distill.heldout) if cfg.distill.heldout else None  # never trained on
        self.drawn = self.received = self.fresh = 0  # this sitting's draws into minibatches, arrivals
        self.search_actors: list[Any] = []
        self.search_pending: dict[Any, tuple[int, int]] = {}
        self.search_points: deque[tuple[float, int]] = deque(maxlen=20)
        self.marks = dataclasses.replace(self.d, rounds=[])  # the counters at the last charts written
        self.held_kl: dict[str, float] = {}  # the last measure on the held-out decisions

    @property
    def rollout_workers(self) -> int:
        return self.cfg.rollout.num_workers if self.cfg.distill.ppo else 0

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
        """Learn the hand belief of the round's network (training/belief.py), here, before the search
        uses it; kept only where it beats the round's belief so far on the same held-out decisions of the
        new network (a small ``belief_deals`` can learn a worse one).  Returns "learned" or "kept"."""
        from .belief import collect, fit

        cfg, d = self.cfg, self.cfg.distill
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
        c = self.c
        return {"round": self.d.round, "updates": c.updates, "decisions_trained": c.decisions_trained,
                "searched": self.d.searched, "wall_s": round(c.wall_s, 1), "belief": belief}

    def _put_round(self) -> None:
        """The round's network and belief in Ray's object store, for every search request of the round."""
        import ray
        self.round_ref = ray.put(self.round_weights)
        b = self.belief
        self.belief_ref = ray.put({"hidden": b["hidden"], "weights": b["weights"]}) if b else None

    def _next_round(self) -> None:
        """A round ends: the belief for the new network, an evaluation of it, a checkpoint, and the search
        workers' next requests play it."""
        import ray
        s = self.session
        self.d.round += 1
        self.d.round_start = self.c.updates
        self.round_weights = self.learner.weights()
        belief = self._retrain_belief() if self.cfg.distill.belief_deals else "kept"
        self._put_round()
        if s.eval_ref is not None and s.eval_ref[1]["updates"] != self.c.updates:
            self._record_eval(ray.get(s.eval_ref[0]), s.eval_ref[1])  # the last round's: part of the curve
            s.eval_ref = None
        if s.eval_ref is None:
            s.eval_ref = self._launch_eval(s.eval_fn, self.cfg.eval.deals)
        self.c.wall_s = s.wall()
        self.d.rounds.append(self._round_record(belief))
        self.save()
        self.log(f"round {self.d.round} begins at update {self.c.updates} ({self.d.searched:,} searched"
                 " decisions so far); the search workers play the new network")

    # ---- the loop's hooks -----------------------------------------------------------------------------
    def _start(self) -> None:
        super()._start()
        cfg, d = self.cfg, self.cfg.distill
        if self.d.round == 0 and self.belief is None and d.belief_deals:
            self.d.rounds[0]["belief"] = self._retrain_belief()
        self._put_round()
        Actor = _search_actor_class()
        cfg_dict = to_dict(cfg)
        opts = {"num_cpus": d.cpus_per_worker, "max_restarts": cfg.rollout.max_restarts,
                "max_task_retries": 0, "scheduling_strategy": "SPREAD"}
        self.search_actors = [Actor.options(**opts).remote(cfg_dict, w) for w in range(d.num_workers)]
        self.search_placement = self._wait_placed(self.search_actors, "search worker", d.cpus_per_worker)
        self.search_health = WorkerHealth("search worker", d.num_workers, cfg.rollout.max_restarts)
        for w in range(d.num_workers):
            self._submit_search(w)
        if self.c.updates == 0:  # the starting network, measured as every round's is
            self.session.eval_ref = self._launch_eval(self.session.eval_fn, cfg.eval.deals)

    def _stop(self) -> None:
        import ray
        if ray.is_initialized():
            for a in self.search_actors:
                ray.kill(a, no_restart=True)
        super()._stop()

    def _submit_search(self, w: int) -> None:
        req = self.d.requests
        self.d.requests += 1
        ref = self.search_actors[w].play.remote(self.round_ref, self.d.round, self.belief_ref,
                                                search_request_seed(self.cfg.seed, w, req))
        self.search_pending[ref] = (w, req)

    def _collect(self, timeout: float) -> None:
        """Search results first (waiting for them when there are no rollout workers), then rollouts."""
        for w in self.search_health.due():
            self._submit_search(w)
        got = self._collect_search(0 if self.rollout_workers else timeout)
        super()._collect(0 if got or not self.rollout_workers else timeout)

    def _collect_search(self, timeout: float) -> int:
        """Take the search results that arrived into the buffer and ask their workers again; their count."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        ready = arrived(self.search_pending, timeout)
        for ref in ready:
            w, req = self.search_pending.pop(ref)
            try:
                out = ray.get(ref)
            except (RayActorError, RayTaskError) as exc:
                if self.search_health.failed(w, exc):
                    self.c.worker_failures += 1
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

    def _sample(self) -> dict[str, torch.Tensor] | None:
        """A distillation minibatch from the buffer, or None while drawing it would use the searched
        decisions more than ``distill.reuse`` times each on average."""
        d = self.cfg.distill
        if len(self.buffer) < d.minibatch or self.drawn + d.minibatch > d.reuse * self.received + 1e-9:
            return None
        self.drawn += d.minibatch
        return self.buffer.sample(d.minibatch, self.gen, self.learner.device, d.temperature)

    def _take(self) -> list[dict[str, Any]]:
        if self.rollout_workers:
            return super()._take()
        d = self.cfg.distill
        if self.fresh < d.batch_decisions or len(self.buffer) < d.minibatch:
            return []
        fresh, self.fresh = self.fresh, 0
        return [{"searched": fresh}]

    def _update(self, batches: list[dict[str, Any]]) -> None:
        """With PPO: its update, a distillation minibatch riding on each step; without: distillation steps
        on the buffer for the new searched decisions (``distill.reuse`` x them / ``distill.minibatch``)."""
        if self.rollout_workers:
            self.learner.distill = self._sample
            try:
                super()._update(batches)
            finally:
                self.learner.distill = None
        else:
            d = self.cfg.distill
            self._anneal()
            lr = self.learner.opt.param_groups[0]["lr"]
            fresh = batches[0]["searched"]
            t0 = time.perf_counter()
            self.losses = self.learner.distill_update(self._sample, math.ceil(d.reuse * fresh / d.minibatch),
                                                      self._between_steps)
            self.losses["update_s"] = time.perf_counter() - t0
            self.c.updates += 1
            self.c.decisions_trained += fresh
            self._write_losses(lr, self.c.decisions_trained)
        self._search_charts(self.c.decisions_trained)

    def _write_losses(self, lr: float, step: int) -> None:
        for k, v in self.losses.items():
            tag = "charts/search_agreement" if k == "search_agreement" else f"losses/{k}"
            self.writer.add_scalar(tag, v, step)
        self.writer.add_scalar("charts/learning_rate", lr, step)

    def _search_charts(self, step: int) -> None:
        """What the search workers delivered since the last update: the searching seat's lá, how often the
        search changed the round network's move, the round and the buffer."""
        d, m, w = self.d, self.marks, self.writer
        games, heur = d.games - m.games, d.heuristic_games - m.heuristic_games
        searched = d.searched - m.searched
        if games:
            w.add_scalar("charts/search_la", (d.la_sum - m.la_sum) / games, step)
        if heur:
            w.add_scalar("charts/search_vs_heuristic_la", (d.heuristic_la_sum - m.heuristic_la_sum) / heur,
                         step)
        if searched:
            w.add_scalar("charts/search_changed", (d.changed - m.changed) / searched, step)
        w.add_scalar("charts/round", d.round, step)
        w.add_scalar("charts/search_buffer", len(self.buffer), step)
        self.marks = dataclasses.replace(d, rounds=[])

    def _after_update(self) -> None:
        super()._after_update()
        if self.c.updates - self.d.round_start >= self.cfg.distill.round_updates:
            self._next_round()

    def _log_scalars(self, rate: Any) -> None:
        due = self.c.decisions_trained > self.tb_step
        super()._log_scalars(rate)
        if not due:
            return
        self.search_points.append((time.perf_counter(), self.d.searched))
        r = self._search_rate()
        if r is not None:
            self.writer.add_scalar("charts/search_decisions_per_s", r, self.c.decisions_trained)
        self.writer.add_scalar("charts/searched_decisions", self.d.searched, self.c.decisions_trained)
        if self.held is not None and len(self.held):
            self.held_kl = kl_to_targets(self.net, self.held.rows(np.arange(len(self.held))),
                                         self.cfg.distill.temperature)
            step = self.c.decisions_trained
            self.writer.add_scalar("losses/distill_kl_heldout", self.held_kl["distill_kl"], step)
            self.writer.add_scalar("charts/search_agreement_heldout", self.held_kl["search_agreement"], step)

    def _search_rate(self) -> float | None:
        """Searched decisions received per second over the last log intervals."""
        if len(self.search_points) < 2:
            return None
        (t0, n0), (t1, n1) = self.search_points[0], self.search_points[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None

    def display_rows(self) -> list[tuple[str, str]]:
        d, ls = self.d, self.losses
        r = self._search_rate()
        text = f"round {d.round}, {d.searched:,} searched" + (f" ({r:,.0f}/s)" if r else "")
        if "distill_kl" in ls:
            text += f", KL {ls['distill_kl']:.3f}, agreement {100 * ls['search_agreement']:.0f}%"
        if self.held_kl:
            text += f", held out {self.held_kl['distill_kl']:.3f}"
        return [("search", text)]

    def _launch_eval(self, eval_fn: Any, deals: int) -> tuple[Any, dict[str, Any]]:
        ref, at = super()._launch_eval(eval_fn, deals)
        at["round"] = self.d.round
        return ref, at

    # ---- checkpoints -----------------------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        meta = super().metadata()
        d = self.d
        if not self.cfg.distill.ppo:  # the opponent mix the network learned from is the search games'
            meta["heuristic_share"] = self.cfg.distill.heuristic_share
        meta["distill"] = {"round": d.round, "round_start_update": d.round_start, "searched": d.searched,
                           "games": d.games, "search_la": round(d.la_sum / d.games, 4) if d.games else None,
                           "rounds": d.rounds, "belief": (self.belief or {}).get("info"),
                           "precision": {str(w): p for w, p in sorted(self.precision.items())}}
        return meta

    def _extra_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        tensors = {f"round.{k}": torch.from_numpy(np.array(v)) for k, v in self.round_weights.items()}
        b = self.belief
        if b:
            tensors |= {f"belief.{k}": torch.from_numpy(np.array(v)) for k, v in b["weights"].items()}
        belief = {"hidden": b["hidden"], "info": b["info"]} if b else None
        return tensors, {"distill": {"counters": dataclasses.asdict(self.d), "belief": belief,
                                     "precision": {str(w): p for w, p in self.precision.items()}}}

    def _restore_extra(self, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
        saved = state.get("distill")
        if not saved:
            self.log(f"{self.resumed_from} holds no expert-iteration stage: it starts at round 0 from this"
                     " network")
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

    def save(self) -> Path:
        """The trainer's checkpoint, with the round's hand belief beside the weights (``DIR+search`` then
        searches any checkpoint of the stage as the stage did)."""
        path = super().save()
        if self.belief:
            save_belief(path, belief_net(self.belief), self.belief["info"] | {"distill_round": self.d.round})
        return path

    def summary(self, rate: Any, reason: str, final: Path) -> dict[str, Any]:
        out = super().summary(rate, reason, final)
        d = self.d
        out["distill"] = {"round": d.round, "searched": d.searched, "games": d.games,
                          "search_la": round(d.la_sum / d.games, 4) if d.games else None,
                          "changed": round(d.changed / d.searched, 4) if d.searched else None,
                          "heldout": self.held_kl,
                          "rounds": d.rounds,
                          "losses": {k: v for k, v in self.losses.items()
                                     if k.startswith("distill") or k == "search_agreement"}}
        return out


def trainer_class(cfg: TrainConfig) -> type[Trainer]:
    """The trainer a config asks for: :class:`DistillTrainer` with ``distill.enabled``, else the plain one."""
    return DistillTrainer if cfg.distill.enabled else Trainer
