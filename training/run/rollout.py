"""Self-play generation: a batch of games played by the current policy, cut into per-seat trajectories.

Each seat's decisions in a game form its own sequence: the lá that move
between two of a seat's decisions (chop money, the final settlement) are that
seat's reward for the earlier one, and a seat's last decision of a game is
terminal.  GAE runs over these sequences inside the worker, so the learner
receives flat arrays (obs, mask, action, logp, value, advantage, return),
packed to about 290 bytes per decision (:mod:`training.run.compact`).
A sequence still open when the rollout ends is bootstrapped with the value of
that seat's view of the current state; its later rewards are not credited to
anything else, so no reward is counted twice.

In a share of the games (``rollout.opponent_fraction``) only one seat is the
learner and the others are a fixed opponent: the heuristic agent (or the agent
``rollout.opponent`` names) or a past snapshot.  Their decisions are not trained
on.  This keeps self-play from collapsing into a style that only beats itself.

:class:`RolloutEngine` is plain Python (tests use it directly);
:class:`RolloutActor` is the Ray actor around it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
import torch
from numba import njit

from sam_env.actions import NUM_ACTIONS, SAM
from sam_env.core import O_DECLARER

from agents import make_agent
from agents.nets.interface import PolicyNetwork

from . import compact
from ..config import TrainConfig, table_weights, training_tables

from sam_env.obs import FULL_EXTRA, OBS_SIZE, encode_batch, encode_hidden_batch, encode_mask_batch
from sam_env.rules import RuleSet
from sam_env.seeding import mix
from sam_env.vector import SelfPlayBatch

MAX_SEATS = 5
OPP_SELF, OPP_HEURISTIC = -1, 0  # opponent kind per game; >= 1 = pool slot + 1


@njit(cache=True)
def record_step(t, seat, learner, rewards, done, scale, pend, nxt, term, rew):
    """Link decision ``t`` into its seat's sequence and credit the lá of this step.

    ``pend[e, s]``: the step of seat s's open learner decision in game slot e (-1 none).
    """
    n_env = seat.shape[0]
    for e in range(n_env):
        s = seat[e]
        if learner[e]:
            p = pend[e, s]
            if p >= 0:
                nxt[p, e] = t
            pend[e, s] = t
        for q in range(MAX_SEATS):
            p = pend[e, q]
            if p >= 0:
                rew[p, e] += rewards[e, q] / scale
        if done[e]:
            for q in range(MAX_SEATS):
                p = pend[e, q]
                if p >= 0:
                    term[p, e] = 1
                pend[e, q] = -1


@njit(cache=True)
def compute_gae(val, rew, nxt, term, boot, valid, gamma, lam, adv):
    """GAE over per-seat sequences: ``nxt[t, e]`` is the seat's next decision (-1: none yet)."""
    T, n_env = val.shape
    for t in range(T - 1, -1, -1):
        for e in range(n_env):
            if not valid[t, e]:
                continue
            n = nxt[t, e]
            if term[t, e]:
                nv = 0.0
                na = 0.0
            elif n >= 0:
                nv = val[n, e]
                na = adv[n, e]
            else:
                nv = boot[t, e]
                na = 0.0
            delta = rew[t, e] + gamma * nv - val[t, e]
            adv[t, e] = delta + gamma * lam * na


def slot_shares(total: int, weights: list[float]) -> list[int]:
    """``total`` game slots split in proportion to ``weights`` (largest remainders), at least one each."""
    w = np.asarray(weights, dtype=np.float64)
    spare = total - len(w)
    raw = spare * w / w.sum()
    n = np.floor(raw).astype(np.int64)
    n[np.argsort(-(raw - n), kind="stable")[: spare - int(n.sum())]] += 1
    return [int(x) + 1 for x in n]


def weights_to_numpy(net: torch.nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}


def load_numpy_weights(net: torch.nn.Module, weights: dict[str, np.ndarray]) -> None:
    net.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()})


def sample_actions(logits: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample from masked logits; returns (actions, log-probabilities)."""
    logp_all = torch.log_softmax(logits, dim=-1)
    act = torch.multinomial(logp_all.exp(), 1, generator=gen).squeeze(-1)
    return act, logp_all.gather(1, act[:, None]).squeeze(-1)


@dataclass(frozen=True)
class RolloutTargets:
    """What the algorithm learning from these workers asks them to compute (``Algorithm.targets``): GAE
    with its ``gamma`` and ``gae_lambda`` (from its own section), and whether to record the heuristic's
    answers at the learner's Sâm decisions (``teach``: PPO's Sâm lesson)."""

    gamma: float = 1.0
    gae_lambda: float = 0.95
    teach: bool = False


class RolloutStream:
    """One SelfPlayBatch (one rules/players pair) with its trajectory buffers: ``T`` steps x ``n`` games."""

    rules: RuleSet
    players: int
    n: int
    """Games stepped together."""
    T: int
    """Steps per rollout."""
    env: SelfPlayBatch
    seat: np.ndarray
    """``[n]``: the seat to act in each game; ``obs`` and ``mask`` its observation and legal moves."""
    obs: np.ndarray
    mask: np.ndarray
    opp: np.ndarray
    """``[n]``: each game's opponent kind (OPP_SELF, OPP_HEURISTIC, or a pool slot + 1)."""
    lseat: np.ndarray
    """``[n]``: the learner's seat in a game against fixed opponents."""
    score: np.ndarray
    """``[n]``: the learner seat's lá in the current game."""
    b_obs: np.ndarray
    """``[T, n, OBS_SIZE]``: the rollout's observations; ``b_mask``, ``b_act``, ``b_logp``, ``b_val`` (the
    baseline) and ``b_hid`` (every hand, for the critic) beside them; ``b_valid`` marks learner decisions."""
    b_mask: np.ndarray
    b_act: np.ndarray
    b_logp: np.ndarray
    b_val: np.ndarray
    b_valid: np.ndarray
    b_hid: np.ndarray
    b_teach: np.ndarray
    """``[T, n]``: the heuristic's action at the learner's Sâm decisions (-1: none; RolloutTargets.teach)."""
    extra: Any
    """What an algorithm's engine keeps per stream besides (DMC: its ``ReturnTrack``; None for PPO's)."""

    def __init__(self, rules: RuleSet, players: int, num_envs: int, steps: int, seed: int, hidden_size: int):
        self.rules, self.players, self.n, self.T = rules, players, num_envs, steps
        self.env = SelfPlayBatch(rules, players, num_envs, seed)
        self.seat, self.obs, self.mask = self.env.reset(seed=seed)
        self.opp = np.full(num_envs, OPP_SELF, dtype=np.int64)
        self.lseat = np.zeros(num_envs, dtype=np.int64)
        self.score = np.zeros(num_envs, dtype=np.float64)
        T, N = steps, num_envs
        self.b_obs = np.zeros((T, N, OBS_SIZE), dtype=np.float32)
        self.b_mask = np.zeros((T, N, NUM_ACTIONS), dtype=np.int8)
        self.b_act = np.zeros((T, N), dtype=np.int64)
        self.b_logp = np.zeros((T, N), dtype=np.float32)
        self.b_val = np.zeros((T, N), dtype=np.float32)
        self.b_valid = np.zeros((T, N), dtype=np.bool_)
        self.b_hid = np.zeros((T, N, hidden_size), dtype=np.uint8)
        self.b_teach = np.full((T, N), -1, dtype=np.int16)
        self.extra = None


def request_seed(run_seed: int, worker: int, request: int) -> int:
    """The seed of one rollout request: a worker's engine restarts its streams from it."""
    return mix(run_seed, worker, request)


def table_seed(engine_seed: int, table: int) -> int:
    """The deal seed of an engine's ``table``-th batch; its game g plays the deals of this seed + g."""
    return (engine_seed + 7919 * table) % 2**63


class RolloutEngine:
    """Plays ``envs_per_worker`` games with the current policy and returns training data."""

    def __init__(self, cfg: TrainConfig, worker_id: int, seed: int, targets: RolloutTargets):
        torch.set_num_threads(1)
        self.cfg, self.worker_id, self.seed, self.want = cfg, worker_id, seed, targets
        self.rng = np.random.default_rng(seed)
        self.gen = torch.Generator().manual_seed(seed)
        tables = training_tables(cfg.env)
        sizes = slot_shares(cfg.rollout.envs_per_worker, table_weights(cfg.env))
        self.full_critic = cfg.model.critic == "full"
        self.pool: dict[int, PolicyNetwork] = {}
        self.pool_ids: list[int] = []
        self.streams = [RolloutStream(t.rules, t.players, n, cfg.rollout.steps_per_rollout,
                                table_seed(seed, i), FULL_EXTRA if self.full_critic else 0)
                        for i, (t, n) in enumerate(zip(tables, sizes))]
        for st in self.streams:
            self._draw(st, np.ones(st.n, dtype=bool))
        self.net = self._new_net()
        self.version = -1
        #: the Sâm lesson's teacher answers at the learner's Sâm decisions (PPO's, ppo.sam_lesson_coef)
        self.lesson = targets.teach
        self._heuristic = None
        self._opponent: Any = None  # rollout.opponent, when it is not the heuristic

    def _new_net(self) -> PolicyNetwork:
        return self.cfg.model.build().eval()

    # ---- the games in progress, for deterministic mode -----------------------------------
    def get_state(self) -> dict[str, np.ndarray]:
        """The games in progress, as flat arrays: what the next rollout continues from.  With
        :meth:`set_state` and :meth:`reseed` a rollout is a function of (this state, its seed, the weights,
        the pool), so deterministic mode can checkpoint it and ask it again of a restarted worker."""
        out = {"seed": np.array([self.seed], dtype=np.int64)}
        for i, st in enumerate(self.streams):
            gb = st.env.game_batch
            out |= {f"{i}.states": gb.states.copy(), f"{i}.rng": gb.rng.view(np.int64).copy(),
                    f"{i}.hands": gb.hands.copy(), f"{i}.opp": st.opp.copy(), f"{i}.lseat": st.lseat.copy(),
                    f"{i}.score": st.score.copy()}
        return out

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Continue the games of :meth:`get_state` (of an engine of the same config); the observations and
        masks are encoded again from the game states.  ValueError names an array that does not fit."""
        want = RolloutEngine.get_state(self)  # the games; an engine of an algorithm's own restores its part
        for k, v in want.items():
            got = state.get(k)
            if got is None or np.shape(got) != v.shape:
                raise ValueError(f"rollout state: {k} is {'missing' if got is None else np.shape(got)},"
                                 f" this engine has {v.shape} (another config?)")
        seed = int(np.asarray(state["seed"])[0])
        if seed != self.seed:
            self.seed, self._heuristic = seed, None  # the heuristic's own seed is the lane's
        for i, st in enumerate(self.streams):
            env, gb = st.env, st.env.game_batch
            gb.states[:] = state[f"{i}.states"]
            gb.rng[:] = np.asarray(state[f"{i}.rng"]).view(np.uint64)
            gb.hands[:] = state[f"{i}.hands"]
            st.opp[:], st.lseat[:], st.score[:] = state[f"{i}.opp"], state[f"{i}.lseat"], state[f"{i}.score"]
            encode_mask_batch(gb.states, gb.rule_array, env.obs, env.masks, env.seats)
            st.seat, st.obs, st.mask = env.seats.copy(), env.obs.copy(), env.masks.copy()

    def reseed(self, seed: int) -> None:
        """Restart the streams this engine samples from (opponent draws, learner seats, actions)."""
        self.rng = np.random.default_rng(seed)
        self.gen = torch.Generator().manual_seed(seed)

    # ---- opponents ------------------------------------------------------------
    @property
    def heuristic(self) -> Any:
        if self._heuristic is None:
            self._heuristic = make_agent("heuristic", seed=self.seed)
        return self._heuristic

    @property
    def opponent(self) -> Any:
        """The fixed opponent of the heuristic_share games: ``rollout.opponent`` (the heuristic by default),
        made with this engine's seed (again when the seed changes), so its sampled play is reproducible."""
        ro = self.cfg.rollout
        if ro.opponent == "heuristic":
            return self.heuristic
        made = self._opponent
        if made is None or made.seed != self.seed:
            kw = {"temperature": ro.opponent_temperature} if ro.opponent_temperature else {}
            self._opponent = made = make_agent(ro.opponent, seed=self.seed, **kw)
        return made

    def set_pool(self, pool: list[tuple[int, Any]]) -> None:
        """``pool``: (snapshot id, numpy weights or an ObjectRef to them), oldest first."""
        ids = [i for i, _ in pool]
        for sid, w in pool:
            if sid not in self.pool:
                if not isinstance(w, dict):
                    w = ray.get(w)
                net = self._new_net()
                load_numpy_weights(net, w)
                self.pool[sid] = net
        for sid in list(self.pool):
            if sid not in ids:
                del self.pool[sid]
        self.pool_ids = ids

    def _draw(self, st: RolloutStream, which: np.ndarray) -> None:
        """New opponents and learner seat for the games in ``which`` (they just started)."""
        idx = np.flatnonzero(which)
        if idx.size == 0:
            return
        ro = self.cfg.rollout
        u = self.rng.random((idx.size, 3))
        opp = np.full(idx.size, OPP_SELF, dtype=np.int64)
        vs = u[:, 0] < ro.opponent_fraction
        npool = len(self.pool_ids)
        heur = u[:, 1] < ro.heuristic_share if npool else np.ones(idx.size, dtype=bool)
        opp[vs & heur] = OPP_HEURISTIC
        if npool:
            slot = np.minimum((u[:, 2] * npool).astype(np.int64), npool - 1)
            opp[vs & ~heur] = slot[vs & ~heur] + 1
        st.opp[idx] = opp
        st.lseat[idx] = self.rng.integers(0, st.players, idx.size)
        st.score[idx] = 0.0

    # ---- one rollout --------------------------------------------------------------
    def set_weights(self, weights: dict[str, np.ndarray], version: int) -> None:
        if version != self.version:
            load_numpy_weights(self.net, weights)
            self.version = version

    @torch.no_grad()
    def rollout(self) -> dict[str, Any]:
        """``{"batch": packed learner decisions (training.run.compact), "stats": counts,
        "version": weights}``."""
        t0 = time.perf_counter()
        parts: list[dict[str, np.ndarray]] = []
        stats = {"games": 0, "decisions": 0, "learner_decisions": 0, "sam_declared": 0, "return_sum": 0.0,
                 "vs_heuristic_sum": 0.0, "vs_heuristic_games": 0, "vs_pool_sum": 0.0, "vs_pool_games": 0}
        for st in self.streams:
            parts.append(self._rollout_stream(st, stats))
        batch = compact.concat(parts)
        stats["seconds"] = time.perf_counter() - t0
        return {"batch": batch, "stats": stats, "version": self.version}

    def _rollout_stream(self, st: RolloutStream, stats: dict[str, Any]) -> dict[str, np.ndarray]:
        cfg = self.cfg
        T, N = st.T, st.n
        pend = np.full((N, MAX_SEATS), -1, dtype=np.int64)
        nxt = np.full((T, N), -1, dtype=np.int64)
        term = np.zeros((T, N), dtype=np.uint8)
        rew = np.zeros((T, N), dtype=np.float32)
        rows = np.arange(N)
        for t in range(T):
            seat, obs, mask = st.seat.copy(), st.obs, st.mask  # the batch's buffers: seat is kept past step
            learner = (st.opp == OPP_SELF) | (seat == st.lseat)
            st.b_obs[t] = obs
            st.b_mask[t] = mask
            gb = st.env.game_batch
            if self.full_critic:
                encode_hidden_batch(gb.states, seat, st.b_hid[t])
            act = np.zeros(N, dtype=np.int64)
            st.b_logp[t] = 0.0
            st.b_val[t] = 0.0
            li = np.flatnonzero(learner)
            if li.size:  # the policy runs only where the learner sits
                self.learner_moves(st, t, slice(None) if li.size == N else li, act)
            st.b_teach[t] = -1
            if self.lesson:
                ask = learner & ((mask[:, SAM] > 0) | (gb.states[:, O_DECLARER] == seat))
                if ask.any():
                    idx = np.flatnonzero(ask)
                    st.b_teach[t, idx] = np.asarray(self.heuristic.act_batch(gb.states[idx], gb.rule_array,
                                                                             obs[idx], mask[idx]))
            if li.size < N:
                self._opponents_act(st, act, ~learner)
            st.b_act[t] = act
            st.b_valid[t] = learner
            stats["sam_declared"] += int(np.count_nonzero((act == SAM) & learner))
            st.seat, st.obs, st.mask, rewards, done = st.env.step(act)
            record_step(t, seat, learner, rewards, done, np.float32(cfg.env.reward_scale),
                        pend, nxt, term, rew)
            self.stepped(st, t, seat, rewards, done)
            st.score += rewards[rows, st.lseat]
            if done.any():
                d_idx = np.flatnonzero(done)
                stats["games"] += d_idx.size
                stats["return_sum"] += float(st.score[d_idx].sum())
                for kind, key in ((st.opp[d_idx] == OPP_HEURISTIC, "vs_heuristic"),
                                  (st.opp[d_idx] >= 1, "vs_pool")):
                    if kind.any():
                        stats[key + "_sum"] += float(st.score[d_idx[kind]].sum())
                        stats[key + "_games"] += int(kind.sum())
                self._draw(st, done)
        stats["decisions"] += T * N
        stats["learner_decisions"] += int(st.b_valid.sum())
        return self.targets(st, pend, nxt, term, rew)

    # ---- what the algorithm asks of the play (PPO's; training/algorithms/dmc.py has DMC's) -------------
    def learner_moves(self, st: RolloutStream, t: int, sel: slice | np.ndarray, act: np.ndarray) -> None:
        """The learner's moves at step ``t`` in the games ``sel``, into ``act``; their log-probabilities
        and baseline values into ``st.b_logp`` and ``st.b_val``."""
        m = torch.from_numpy(st.b_mask[t][sel])
        logits, _, base = self.net.train_forward(torch.from_numpy(st.b_obs[t][sel]), m,
                                                 torch.from_numpy(st.b_hid[t][sel]))
        a, logp = self.explore(logits, m)
        act[sel] = a.numpy()
        st.b_logp[t, sel] = logp.numpy()
        st.b_val[t, sel] = base.numpy()

    def explore(self, logits: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The learner's moves from its masked logits (``mask``: the legal ones), and their
        log-probabilities: sampled from the policy."""
        return sample_actions(logits, self.gen)

    def pool_choice(self, logits: torch.Tensor) -> torch.Tensor:
        """A past snapshot's moves, as it played them when it was the learner: sampled."""
        return sample_actions(logits, self.gen)[0]

    def stepped(self, st: RolloutStream, t: int, seat: np.ndarray, rewards: np.ndarray,
                done: np.ndarray) -> None:
        """After step ``t`` of the games (``seat`` acted, ``rewards`` in lá for every seat, ``done``
        ended)."""

    def targets(self, st: RolloutStream, pend: np.ndarray, nxt: np.ndarray, term: np.ndarray,
                rew: np.ndarray) -> dict[str, np.ndarray]:
        """The packed batch of the rollout's learner decisions (``st.b_*``, ``b_valid`` marks them), with
        what the learner needs: GAE advantages and returns over each seat's sequence, a sequence still
        open bootstrapped with the value of that seat's view now."""
        T, N = st.T, st.n
        boot = np.zeros((T, N), dtype=np.float32)
        e_idx, s_idx = np.nonzero(pend >= 0)
        if e_idx.size:
            gb = st.env.game_batch
            bobs = np.zeros((e_idx.size, OBS_SIZE), dtype=np.float32)
            bhid = np.zeros((e_idx.size, st.b_hid.shape[2]), dtype=np.uint8)
            encode_batch(gb.states[e_idx], gb.rule_array, s_idx.astype(np.int64), bobs)
            if self.full_critic:
                encode_hidden_batch(gb.states[e_idx], s_idx.astype(np.int64), bhid)
            boot[pend[e_idx, s_idx], e_idx] = self.net.baseline(torch.from_numpy(bobs),
                                                                torch.from_numpy(bhid)).numpy()
        adv = np.zeros((T, N), dtype=np.float32)
        compute_gae(st.b_val, rew, nxt, term, boot, st.b_valid, np.float32(self.want.gamma),
                    np.float32(self.want.gae_lambda), adv)
        v = st.b_valid
        # the batch the learner trains on: one row per learner decision, packed (compact.expand unpacks it)
        return compact.pack(st.b_obs[v], st.b_mask[v], st.b_hid[v], st.b_act[v],
                            {"logp": st.b_logp[v], "val": st.b_val[v], "adv": adv[v],
                             "ret": adv[v] + st.b_val[v], "teach": st.b_teach[v]})

    def _opponents_act(self, st: RolloutStream, act: np.ndarray, rows: np.ndarray) -> None:
        opp = st.opp
        h = rows & (opp == OPP_HEURISTIC)
        if h.any():
            idx = np.flatnonzero(h)
            gb = st.env.game_batch
            act[idx] = np.asarray(self.opponent.act_batch(gb.states[idx], gb.rule_array, st.obs[idx],
                                                          st.mask[idx]))
        for slot, sid in enumerate(self.pool_ids):
            sel = rows & (opp == slot + 1)
            if sel.any():
                idx = np.flatnonzero(sel)
                logits, _ = self.pool[sid](torch.from_numpy(st.obs[idx]), torch.from_numpy(st.mask[idx]))
                act[idx] = self.pool_choice(logits).numpy()


def rollout_actor_class(engine_class: type[RolloutEngine] = RolloutEngine,
                        targets: RolloutTargets = RolloutTargets()) -> type:
    """The Ray actor class of rollout workers that play with ``engine_class`` (an algorithm's own) and
    compute ``targets`` for the algorithm."""

    @ray.remote
    class RolloutActor:
        """A Ray actor around :class:`RolloutEngine`; it (re)creates its engine from the first request.

        A restarted actor gets its seed from the request that finds it fresh, so
        it never replays the games its previous incarnation played.  In deterministic mode
        (``rollout.deterministic``) each request brings its lane's games instead, so any incarnation
        plays the same rollout for the same request.
        """

        def __init__(self, cfg: TrainConfig, worker_id: int):
            torch.set_num_threads(1)  # the thread environment is the Ray runtime_env's (training.run.workers)
            self.cfg = cfg
            if self.cfg.rollout.deterministic:
                torch.use_deterministic_algorithms(True)
            self.worker_id = worker_id
            self.engine: RolloutEngine | None = None

        def rollout(self, weights: dict[str, np.ndarray], version: int, pool: list[tuple[int, Any]],
                    seed: int, lane: dict[str, Any] | None = None) -> dict[str, Any]:
            """One rollout.  ``lane`` (deterministic mode): ``{"state": the games its lane's last consumed
            rollout left, or None for the lane's first}``; the rollout then starts from that state with
            streams seeded by ``seed`` alone, whatever this actor did before, and returns its end state."""
            if lane is None:
                if self.engine is None:
                    self.engine = engine_class(self.cfg, self.worker_id, seed, targets)
            elif lane["state"] is None:  # the lane's first rollout: fresh games from its seed
                self.engine = engine_class(self.cfg, self.worker_id, seed, targets)
            else:
                if self.engine is None:
                    self.engine = engine_class(self.cfg, self.worker_id, seed, targets)
                self.engine.set_state(lane["state"])
                self.engine.reseed(seed)
            self.engine.set_weights(weights, version)
            self.engine.set_pool(pool)
            out = self.engine.rollout()
            out["worker"] = self.worker_id
            if lane is not None:
                out["state"] = self.engine.get_state()
            return out

        def info(self) -> dict[str, Any]:
            ctx = ray.get_runtime_context()
            return {"pid": os.getpid(), "node_id": ctx.get_node_id(), "worker": self.worker_id}

    return RolloutActor
