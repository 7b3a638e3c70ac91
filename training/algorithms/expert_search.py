"""Expert iteration: the policy trained towards what play-time search finds.

Play-time search (``agents/players/search.py``) plays far better than the network it
searches with, at twenty times the cost per decision.  This stage turns that
strength into weights, as expert iteration does (Anthony et al., 2017, "Thinking
fast and slow"; AlphaZero's policy target): search workers play games with the
searching bot, record at every searched decision the observation, the legal
mask, the candidate moves and their mean values, and the learner trains the
policy towards a distribution made of them (:func:`agents.players.search.search_targets`,
a softmax of the values at ``distill.temperature`` lá) with a KL term, beside
PPO on the usual rollouts (``distill.ppo``) or alone.

**Rounds.**  The search workers play with the network frozen at the start of a
round, so the targets do not chase the network they train.  After
``distill.round_updates`` learner updates a round ends: the hand belief is
learned again for the new network when ``distill.belief_deals`` > 0, the new
network is evaluated (the trainer's own evaluation) and checkpointed, and the
search workers get it.  Targets of the previous round still in the buffer stay
until newer ones push them out.

**The pieces, by role.**  This module holds the stage's settings and the search
workers: :class:`SearchEngine` plays one worker's games (plain Python; tests use it
directly), :func:`_search_actor_class` is the Ray actor around it, and
:class:`SearchWorkers` places them, asks them for the round's games and takes what
they send.  The targets are :mod:`training.algorithms.expert_targets`' (the buffer
of searched decisions), the distillation term :mod:`training.algorithms.losses`',
and :class:`training.algorithms.expert.ExpertIteration` is the algorithm that runs
them in the run loop, round by round: the loop's checkpoints, resume, TensorBoard,
evaluations, export and metadata serve this stage unchanged.

**Seeds.**  A search worker's engine is seeded by the request that finds it
fresh, :func:`search_request_seed` (``training.run.rollout.request_seed`` in a
stream of its own, so no search game deals a rollout's deals); its table i
plays the deals of ``table_seed(seed, i)`` + g in game slot g, and its other
draws (which seat searches, which opponents) come from that seed too.

**Resume.**  A checkpoint holds the round, the stage's counters, the round's
frozen network and its belief; the buffer is not kept (it refills from the
search workers, which a resume starts afresh).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import ray
import torch
from ray.exceptions import RayActorError, RayTaskError

from agents import make_agent
from agents.nets.belief import BeliefNet, load_belief
from agents.nets.checkpoint import load_checkpoint
from agents.players.policy_agent import PolicyAgent
from agents.players.search import SearchAgent, prefers_bf16, rates_text, rollout_rates
from agents.players.search_settings import check_search_settings
from sam_env.obs import OBS_SIZE
from sam_env.rules import RuleSet
from sam_env.seeding import mix
from sam_env.vector import SelfPlayBatch

from ..run import compact
from ..config import MAX_WORKERS, ConfigError, Section, TrainConfig, need, table_weights, training_tables
from ..run.rollout import load_numpy_weights, request_seed, slot_shares, table_seed, weights_to_numpy
from ..run.workers import WorkerHealth, arrived
SEARCH_STREAM = 0x5EA4C4  # the search workers' seeds: a stream of their own beside the rollout workers'
BELIEF_STREAM = 0xBE11EF  # the deals a round's belief is learned from
OPP_HEURISTIC, OPP_POLICY = 0, 1  # who sits in a search game's other seats


@dataclass
class DistillConfig(Section):
    """Expert iteration: the policy trained towards what play-time search finds (this module's docstring)."""

    enabled: bool = False
    """Whether the run (or stage) is expert iteration: true is the older way to say ``algorithm:
    expert_iteration``, and the loader keeps the two agreeing (docs/training.md, Expert iteration); off,
    nothing in this section is used."""
    ppo: bool = True
    """Keep the PPO objective on the rollout workers' games beside the distillation term (it also keeps
    the value heads, which the search's leaves read, in step with the policy); false: a supervised stage
    without rollout workers, an update every batch_decisions new searched decisions."""
    coef: float = 1.0
    """Weight of the distillation term (``loss``) beside the PPO loss."""
    loss: str = "kl"
    """The distillation term: kl, KL(search target || policy), the target a softmax of the candidates' values
    at ``temperature``; or value, the lá the policy gives away among the candidates by the search's values
    (its regret), minimized: linear in the values, so a value from one noisy world is as good on average as
    its mean over many (what ``world: real`` needs), where a softmax of it is not."""
    world: str = "sampled"
    """Where each candidate is played out: sampled, in ``worlds`` deals of the unseen cards (the belief's, or
    uniform), what the seat could know; or real, in the game's real deal alone (``worlds`` 1): the trainer's
    perfect information, as the full critic is (the targets see the hands, the policy that plays never
    does), at a fraction of the cost per target.  With ``loss: value`` the policy then learns, over the
    many deals one observation arises in, the move best on average."""
    temperature: float = 1.0
    """In lá: the target is a softmax of the candidates' mean values / temperature, so moves the search
    cannot tell apart share it (0: all of it on the search's move)."""
    stake: float = 0.0
    """How much each searched decision's KL is weighted by what the policy stands to lose there: weight
    (1 - stake) + stake x its regret / the minibatch's mean regret, the regret being the lá the policy's
    choice among the candidates gives away by the search's values (training/algorithms/losses.py,
    distill_terms).  0: every decision alike; 1: by regret alone."""
    round_updates: int = 500
    """Learner updates per round.  The search plays with the network frozen at the round's start, so its
    targets do not chase the network they train; at a round's end the trainer retrains the belief
    (belief_deals), evaluates, checkpoints and sends the search workers the new network."""
    num_workers: int = 1
    """Search actors (processes), each stepping its own batch of games on one CPU thread."""
    cpus_per_worker: float = 1.0
    """CPUs Ray reserves per search actor (they count with the rollout workers against Ray's CPUs)."""
    envs_per_worker: int = 128
    """Games each search actor steps together, shared among the tables by their weights: a step's searched
    decisions are searched in one batch per table, which is faster per decision the more there are (at 14
    tables, 512 games made 14 targets a second and 2,048 made 49)."""
    decisions_per_request: int = 512
    """Searched decisions a search actor returns per request (it plays on until it has them)."""
    candidates: int = 6
    """The search's candidate moves per decision (play time: 10): the policy's most probable ones."""
    worlds: int = 16
    """Deals of the unseen cards each candidate is played out in (play time: 64): fewer worlds give
    noisier values but more targets per CPU second (docs/training.md has the trade-off)."""
    horizon: int = 2
    """The searching seat's moves a rollout plays before the network values the rest (-1: to the end)."""
    critic: int = 50
    """Percent of the leaf value taken from the perfect-information critic (the rest: the seat's own value
    head); 0 is needed for a network trained with model.critic: obs unless horizon is -1."""
    heuristic_share: float = 0.5
    """Share of the search actors' games in which the searching seat's opponents are heuristics; the rest
    are copies of the round's greedy policy.  One seat per game searches."""
    buffer: int = 200_000
    """Searched decisions kept for the learner (the newest; 237 bytes each + 10 per candidate), sampled
    uniformly."""
    minibatch: int = 512
    """Searched decisions per distillation gradient step (with PPO: one such step rides on each PPO
    step)."""
    reuse: float = 4.0
    """How often each searched decision is drawn into a minibatch on average, at most: distillation
    steps wait for new data beyond that, so a fast learner does not overfit a slow search."""
    batch_decisions: int = 4096
    """Without PPO: new searched decisions that make one update (reuse x this / minibatch steps)."""
    heldout: int = 2048
    """Searched decisions kept out of training (every 20th that arrives, the newest this many) to measure
    the policy's KL to targets it never learned from (losses/distill_kl_heldout; 0: none)."""
    precision: str = "auto"
    """The search workers' rollouts: bf16, fp32, or auto: the faster of the two on the worker's own core,
    measured once when it starts (agents.players.search.rollout_rates; bf16 is 3x faster with AMX and slower
    on some CPUs with AVX512-BF16 alone, docs/results.md).  The leaves' values are float32 either way."""
    belief_deals: int = 0
    """Duplicate deals the new network plays at each round's start to learn the search's hand belief
    again (training/tools/belief.py, belief.hidden and belief.epochs), kept only where it beats the round's
    belief so far on the same held-out decisions; 0: the belief of init_from throughout (uniform worlds when
    it has none)."""

    def check(self, cfg: TrainConfig, name: str) -> None:
        """Ranges, what the search needs of the network and of the trainer, and the algorithm it goes with."""

        def need_here(ok: bool, msg: str) -> None:  # need(), the message prefixed with this section
            need(ok, f"{name}.{msg}")

        need_here(self.coef > 0, f"coef must be positive, not {self.coef}")
        need_here(self.temperature >= 0,
             f"temperature must be >= 0 lá (0: the search's move), not {self.temperature}")
        need_here(0 <= self.stake <= 1,
                  f"stake must be in [0, 1] (0: every decision alike), not {self.stake}")
        need_here(self.loss in ("kl", "value"), f"loss must be kl or value, not {self.loss!r}")
        need_here(self.loss == "kl" or self.stake == 0,
             f"stake weights the KL: with loss: value (the regret itself) it must be 0, not {self.stake}")
        need_here(self.world in ("sampled", "real"), f"world must be sampled or real, not {self.world!r}")
        need_here(self.world == "sampled" or self.worlds == 1,
             f"worlds must be 1 with world: real (the one real deal), not {self.worlds}")
        need_here(self.world == "sampled" or self.belief_deals == 0,
             f"belief_deals must be 0 with world: real (nothing is dealt), not {self.belief_deals:,}")
        need_here(self.round_updates >= 1, f"round_updates must be at least 1, not {self.round_updates}")
        need_here(1 <= self.num_workers <= MAX_WORKERS, f"num_workers must be from 1 to {MAX_WORKERS:,}")
        need_here(self.cpus_per_worker > 0, "cpus_per_worker must be positive")
        need_here(self.envs_per_worker >= len(training_tables(cfg.env)),
             "envs_per_worker must give every (rules, players) pair at least one game")
        need_here(self.decisions_per_request >= 1, "decisions_per_request must be at least 1")
        try:  # the bounds a served search has: each setting's range, worlds x candidates by their memory
            check_search_settings({"candidates": self.candidates, "worlds": self.worlds,
                                   "horizon": self.horizon, "critic": self.critic})
        except ValueError as exc:  # its words name the setting; here it is a key of this section
            raise ConfigError(str(exc).replace("search setting ", f"{name}.")
                              .replace("search worlds", f"{name}.worlds")) from None
        need_here(0 <= self.heuristic_share <= 1, "heuristic_share must be in [0, 1]")
        need_here(self.minibatch >= 1 and self.batch_decisions >= 1,
             "minibatch and batch_decisions must be positive")
        need_here(self.buffer >= self.minibatch,
             f"buffer ({self.buffer:,}) must hold at least one minibatch ({self.minibatch:,})")
        need_here(self.reuse > 0, f"reuse must be positive, not {self.reuse}")
        need_here(self.belief_deals >= 0 and self.heldout >= 0, "belief_deals and heldout must be >= 0")
        need_here(self.precision in ("auto", "bf16", "fp32"),
             f"precision must be auto, bf16 or fp32, not {self.precision!r}")
        need(not (self.enabled and cfg.algorithm != "expert_iteration"),
             f"{name}.enabled=true is expert iteration (on PPO), not algorithm={cfg.algorithm}")
        if not self.enabled:
            return
        need_here(not (self.horizon >= 0 and self.critic > 0 and cfg.model.critic != "full"),
             "critic > 0 needs the perfect-information critic (model.critic: full); use distill.critic=0"
             " or horizon=-1")
        need_here(not cfg.rollout.deterministic, "enabled does not run with rollout.deterministic (the search"
             " workers' requests are not scheduled in lanes)")


def search_request_seed(run_seed: int, worker: int, request: int) -> int:
    """The seed of one search request (:func:`training.run.rollout.request_seed` in the search's stream)."""
    return request_seed(mix(run_seed, SEARCH_STREAM), worker, request)


# ---- the search workers -----------------------------------------------------------------------
class _SearchGames:
    """One SelfPlayBatch of games with, per game, the seat that searches, who its opponents are, and the
    lá that seat has won so far."""

    def __init__(self, rules: RuleSet, players: int, games: int, seed: int):
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
        tables = training_tables(cfg.env)
        sizes = slot_shares(cfg.section("distill").envs_per_worker, table_weights(cfg.env))
        self.tables = [_SearchGames(t.rules, t.players, n, table_seed(seed, i))
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
        m, d = self.cfg.model, self.cfg.section("distill")
        net = m.build()
        load_numpy_weights(net, weights)
        if self.bf16 is None:
            if d.precision == "auto":
                self.rates = rollout_rates(net.eval())
                self.bf16 = prefers_bf16(self.rates)
            else:
                self.bf16 = d.precision == "bf16"
        self.policy = PolicyAgent(net.eval(), seed=self.seed, name=f"round{round_}")
        true_world = d.world == "real"
        self.search = SearchAgent(self.policy, d.candidates, d.worlds, d.horizon, d.critic,
                                  belief=None if true_world else belief_net(belief),
                                  reward_scale=self.cfg.env.reward_scale, seed=self.seed, bf16=self.bf16,
                                  true_world=true_world)
        self.round = round_

    def _draw(self, tb: _SearchGames, games: np.ndarray) -> None:
        """The searching seat and the opponents of games that just started."""
        u = self.rng.random(games.size)
        tb.opp[games] = np.where(u < self.cfg.section("distill").heuristic_share, OPP_HEURISTIC, OPP_POLICY)
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
        while stats["searched"] < self.cfg.section("distill").decisions_per_request:
            for tb in self.tables:
                self._step(tb, parts, stats)
        obs, mask, cands, values = (np.concatenate(p) for p in zip(*parts))
        batch = compact.pack_obs(obs, mask) | {"cands": cands.astype(np.int16), "values": values}
        stats["seconds"] = time.perf_counter() - t0
        stats["precision"] = "bf16" if self.bf16 else "fp32"
        stats["rollout_rates"] = self.rates
        return {"batch": batch, "stats": stats, "round": self.round}

    def _step(self, tb: _SearchGames, parts: list[tuple[np.ndarray, ...]], stats: dict[str, Any]) -> None:
        """One decision in every game of ``tb``: the searching seats search (and are recorded), the others
        play as their kind does."""
        env = tb.env
        gb = env.game_batch
        seat, obs, mask = env.seats, env.obs, env.masks  # the batch's own buffers, read before the step
        acts = np.zeros(tb.n, dtype=np.int64)
        ours = seat == tb.seat
        idx = np.flatnonzero(ours)
        if idx.size:
            res = self.search.search_batch(gb.states[idx], gb.rule_array, obs[idx], mask[idx])
            acts[idx] = res.acts
            rec = idx[res.rows]
            parts.append((obs[rec], mask[rec], res.cands, res.values))
            stats["searched"] += int(rec.size)
            stats["changed"] += int(np.count_nonzero(res.acts[res.rows] != res.cands[:, 0]))
        for kind, agent in ((OPP_HEURISTIC, self.heuristic), (OPP_POLICY, self.policy)):
            sel = np.flatnonzero(~ours & (tb.opp == kind))
            if sel.size:
                acts[sel] = agent.act_batch(gb.states[sel], gb.rule_array, obs[sel], mask[sel])
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
    @ray.remote
    class SearchActor:
        """A Ray actor around :class:`SearchEngine`, made from the first request's seed (a restarted
        actor from the request that finds it fresh, so it never replays its previous games)."""

        def __init__(self, cfg: TrainConfig, worker_id: int):
            torch.set_num_threads(1)  # the thread environment is the Ray runtime_env's (training.run.workers)
            self.cfg = cfg
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


class SearchWorkers:
    """The stage's search workers as one group: placed, each asked for the round's games (a request at a
    time, seeded by its id), their results taken as they arrive; a failed one is restarted by Ray and its
    request asked again, and each one's rollout precision is said once."""

    def __init__(self, seed: int, max_restarts: int, log: Callable[[str], None]):
        self.seed, self.max_restarts, self.log = seed, max_restarts, log
        self.actors: list[Any] = []
        self.placement: list[dict[str, Any]] = []
        self.health = WorkerHealth("search worker", 0, max_restarts)
        self.pending: dict[Any, tuple[int, int]] = {}
        self.precision: dict[int, str] = {}  # each worker's rollouts, as it last reported
        self.round: tuple[Any, int, Any] = (None, 0, None)  # the round's weights and belief, in Ray's store

    def set_round(self, weights: dict[str, np.ndarray], round_: int, belief: dict[str, Any] | None) -> None:
        """The round's network and belief in Ray's object store, for every request of the round."""
        b = {"hidden": belief["hidden"], "weights": belief["weights"]} if belief else None
        self.round = (ray.put(weights), round_, ray.put(b) if b else None)

    def start(self, place: Callable[..., tuple[list[Any], list[dict[str, Any]]]], d: DistillConfig,
              counters: DistillCounters) -> None:
        """Place ``distill.num_workers`` actors and ask each for games."""
        self.actors, self.placement = place(_search_actor_class(), d.num_workers, "search worker",
                                            d.cpus_per_worker)
        self.health = WorkerHealth("search worker", d.num_workers, self.max_restarts)
        for w in range(d.num_workers):
            self.submit(w, counters)

    def submit(self, w: int, counters: DistillCounters) -> None:
        """Ask worker ``w`` for the round's games, under the next request id."""
        req = counters.requests
        counters.requests += 1
        weights, round_, belief = self.round
        ref = self.actors[w].play.remote(weights, round_, belief, search_request_seed(self.seed, w, req))
        self.pending[ref] = (w, req)

    def collect(self, timeout: float, counters: DistillCounters) -> tuple[list[dict[str, Any]], int]:
        """The results that arrived (waiting up to ``timeout`` for the first), their workers asked again,
        and how many workers failed: (results, failures).  A worker due again after a failure is asked
        first."""
        for w in self.health.due():
            self.submit(w, counters)
        outs, failures = [], 0
        for ref in arrived(self.pending, timeout):
            w, req = self.pending.pop(ref)
            try:
                out = ray.get(ref)
            except (RayActorError, RayTaskError) as exc:
                if self.health.failed(w, exc):
                    failures += 1
                    self.log(f"search worker {w} failed ({type(exc).__name__}); Ray restarts it,"
                             f" request {req} is dropped and asked again")
                continue
            self.health.ok(w)
            self._note_precision(out.get("worker", 0), out["stats"])
            outs.append(out)
            self.submit(w, counters)
        return outs, failures

    def _note_precision(self, worker: int, st: dict[str, Any]) -> None:
        """Says once per worker which precision its rollouts run in, and why."""
        prec, rates = st["precision"], st["rollout_rates"]
        if self.precision.get(worker) != prec:
            self.precision[worker] = prec
            why = f"measured {rates_text(rates)}" if rates else "distill.precision"
            self.log(f"search worker {worker}: rollouts in {prec} ({why})")

    def stop(self) -> None:
        if ray.is_initialized():
            for a in self.actors:
                ray.kill(a, no_restart=True)


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



def bench_search(cfg: TrainConfig, requests: int) -> dict[str, Any]:
    """``samloc bench --search``: searched decisions/s of one search worker on one core, as in the stage (the
    config's ``distill`` settings, the ``init_from`` network and its belief), with its rollouts in fp32
    and in bf16, after a warm-up request each; and the rollout forward's rows per second that
    ``distill.precision: auto`` compares to choose."""
    m, d = cfg.model, cfg.section("distill")
    if cfg.init_from:
        net, _ = load_checkpoint(cfg.init_from)
        bnet = load_belief(cfg.init_from)
    else:
        net, bnet = m.build(), None
    weights = weights_to_numpy(net)
    belief = {"hidden": bnet.hidden, "weights": weights_to_numpy(bnet)} if bnet is not None else None
    rates = rollout_rates(net.eval())
    out: dict[str, Any] = {"config": cfg.name, "init_from": cfg.init_from or None, "candidates": d.candidates,
                           "worlds": d.worlds, "horizon": d.horizon, "games": d.envs_per_worker,
                           "rollout_rows_per_s": {k: round(v) for k, v in rates.items()},
                           "auto": "bf16" if prefers_bf16(rates) else "fp32"}
    for prec in ("fp32", "bf16"):
        sections = cfg.sections | {"distill": dataclasses.replace(d, precision=prec)}
        eng = SearchEngine(dataclasses.replace(cfg, sections=sections), 0, cfg.seed)
        eng.set_network(weights, 0, belief)
        eng.play()  # compiles, and fills the games past their first moves
        t0 = time.perf_counter()
        n = sum(eng.play()["stats"]["searched"] for _ in range(requests))
        out[f"{prec}_searched_per_s"] = round(n / (time.perf_counter() - t0), 1)
    return out
