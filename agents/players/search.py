"""Play-time search over a trained policy: determinized rollouts with a value leaf.

At a decision with a real choice, the policy's ``candidates`` most probable
moves are each tried in ``worlds`` deals of the unseen cards consistent with
what the seat knows (its hand, every card played, each hand's size), dealt as
the checkpoint's hand belief expects when it has one (training/tools/belief.py:
a network that reads the seat's observation and says where each rank's
unseen cards probably are), else uniformly.  Every
(move, world) pair is played on by the same greedy policy in all seats until
the searching seat has moved ``horizon`` more times; there the network values
the rest of the game: ``critic`` percent the perfect-information critic the
checkpoint was trained with (it sees the sampled hands), the rest the seat's
own value head (it sees only what the seat does): the critic alone credits
the seat with knowing the sampled hands, which it will not in the real game
(docs/agents.md has the tuning).  The move with the best mean, in lá, is
played; the policy's own choice keeps ties.  Every move meets the same worlds
(common random numbers), so the comparison is far less noisy than the game.

This is perfect-information Monte Carlo (GIB's, in Bridge; Skat programs')
with the trained policy as the model of every seat and its value heads as
the evaluation: it knows nothing the seat does not, and needs nothing but the
checkpoint.  ``horizon=-1`` plays every rollout to the end instead (slower,
no value needed).  Forced moves are left to the policy.

``deadline_ms`` bounds a call's time (0, the default: no bound).  With one,
the worlds are rolled out in :data:`SLICES` slices and the clock is read at
every step (a step the longest recent one says would end late is not
begun): out of time, the move with the best mean over the slices done is
played, or the policy's own move when none is done.  A server passes
``until`` instead: the deadline counted from the request's arrival.  So a deadline makes an
answer depend on the machine's speed; where it is not reached, the answer is
the one without a deadline (every world, the same rollouts).

:meth:`SearchAgent.search_batch` returns what was searched as well as the
moves (each decision's candidates and their values); :func:`search_targets`
turns them into a distribution over the actions, the target that expert
iteration (``training/algorithms/expert_search.py``) trains the policy towards.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numba import njit

from sam_env import core
from sam_env import obs as obs_mod
from sam_env.actions import NUM_ACTIONS
from sam_env.game import Game
from sam_env.seeding import GOLDEN_U64, mix64
from sam_env.table import Table

from ..base import Agent, check_seat
from ..nets.belief import BeliefNet, load_belief
from ..nets.format import resolve
from ..nets.interface import PolicyNetwork, param_dtype
from .policy_agent import PolicyAgent, load_policy_agent
from .search_settings import DEFAULTS, check_search_settings, parse_search_spec


NR = core.NR
SLICES = 4  # world slices under a deadline: the answer so far is known after each
PAD_ROWS = 256  # rollout batches are padded to a multiple of this (SearchAgent._fast_argmax)


@njit(cache=True)
def _salt(st, seat, seed):
    """A seed from the seat's own knowledge, so batching never changes a choice."""
    z = np.uint64(seed) * GOLDEN_U64 + np.uint64(seat + 1)
    for r in range(NR):
        z = mix64(z ^ np.uint64(st[core.O_HAND + seat * NR + r] + 5 * r + 1))
    for s in range(st[core.O_N]):
        for r in range(NR):
            z = mix64(z ^ np.uint64(st[core.O_PLAYED + s * NR + r] * 131 + s * 13 + r))
    return mix64(z ^ np.uint64(st[core.O_NDEC]))


@njit(cache=True)
def _deal_believed(st, st0, seat, n, pool, m, share, room, room0, wts, z):
    """Deal the shuffled unseen cards ``pool[:m]`` of ``st`` into ``st0`` as ``share`` believes
    (see _expand); returns the advanced random state."""
    room[:] = 0
    held = 0
    for d in range(1, n):
        s = (seat + d) % n
        room[d] = st[core.O_SIZE + s]
        held += room[d]
        for r in range(NR):
            st0[core.O_HAND + s * NR + r] = 0
    room[0] = m - held
    room0[:] = room
    for j in range(m):
        r = pool[j]
        tot = 0.0
        for d in range(room.shape[0]):
            wts[d] = share[d, r] * m / room0[d] * room[d] + 1e-12 if room[d] > 0 else 0.0
            tot += wts[d]
        z = mix64(z + GOLDEN_U64)
        x = (np.float64(z >> np.uint64(11)) + 0.5) / 9007199254740992.0 * tot
        d = 0
        acc = wts[0]
        while (acc < x or room[d] == 0) and d < room.shape[0] - 1:
            d += 1
            acc += wts[d]
        while room[d] == 0:  # rounding at the very end of the range
            d -= 1
        room[d] -= 1
        if d > 0:
            st0[core.O_HAND + ((seat + d) % n) * NR + r] += 1
    return z


@njit(cache=True)
def _shuffle(pool, m, z):
    """Fisher-Yates over the unseen cards ``pool[:m]``; returns the advanced random state."""
    for j in range(m - 1, 0, -1):
        z = mix64(z + GOLDEN_U64)
        t = np.int64(z % np.uint64(j + 1))
        pool[j], pool[t] = pool[t], pool[j]
    return z


@njit(cache=True)
def _expand(states, rule_array, rows, cands, ncand, worlds, seed, out, out_seat, belief, true_world):
    """Rollout starts: for each decision row, ``worlds`` deals of the unseen cards,
    each copied once per candidate move with that move applied.

    ``true_world``: the row's own cards, as the simulator dealt them, are the one world (training
    targets only: SearchAgent's ``true_world``).

    With ``belief`` (``[rows, 5, 13]`` believed shares of each rank's unseen cards
    at each place: 0 the undealt stock, 1…4 the seats after the searching one)
    the cards are dealt one by one in shuffled order, each to a place with
    weight ``share / prior share × room left there``; an empty ``belief`` (or a
    flat one) gives the uniform deal.

    ``out`` has ``len(rows) * worlds * ncand`` rows, ordered (row, world, cand).
    """
    pool = np.empty(52, dtype=np.int64)
    st0 = np.empty(states.shape[1], dtype=states.dtype)
    room = np.zeros(core.MAX_PLAYERS, dtype=np.int64)
    room0 = np.zeros(core.MAX_PLAYERS, dtype=np.int64)
    wts = np.zeros(core.MAX_PLAYERS)
    k = 0
    for i in range(rows.shape[0]):
        st = states[rows[i]]
        seat = st[core.O_TO_ACT]
        n = st[core.O_N]
        m = 0
        for r in range(NR):
            x = 4 - st[core.O_HAND + seat * NR + r]
            for s in range(n):
                x -= st[core.O_PLAYED + s * NR + r]
            for _ in range(x):
                pool[m] = r
                m += 1
        z = _salt(st, seat, seed)
        for w in range(worlds):
            base = k
            st0[:] = st
            if not true_world:  # (the real hands need nothing shuffled or dealt)
                z = _shuffle(pool, m, z)
                st0[core.O_HIDDEN] = 0
                if belief.shape[0] == 0:
                    p = 0
                    for s in range(n):
                        if s == seat:
                            continue
                        for r in range(NR):
                            st0[core.O_HAND + s * NR + r] = 0
                        for _ in range(st[core.O_SIZE + s]):
                            st0[core.O_HAND + s * NR + pool[p]] += 1
                            p += 1
                else:
                    z = _deal_believed(st, st0, seat, n, pool, m, belief[i], room, room0, wts, z)
            for c in range(ncand):
                row = out[base + c]
                row[:] = st0
                a = cands[i, c]
                if a < 0:
                    a = cands[i, 0]  # fewer candidates than slots: repeat the first
                core.apply_action(row, rule_array, a)
                out_seat[base + c] = seat
            k += ncand
    return k


# The rollouts' kernels run on the calling thread, as the engine's do (one process per core).  Numba's
# parallel loops made a search worker sharing the machine with the learner and the rollout worker about
# ten times slower (15 against 145 searched decisions a second): every loop waited on a second thread
# for a core that was busy.
@njit(cache=True)
def _obs_masks(sim, rule_array, idx, obs, masks):
    """Observation and legal mask of the seat to act in rows ``idx`` (into rows 0.. of the buffers)."""
    for j in range(idx.shape[0]):
        st = sim[idx[j]]
        obs_mod.encode_row(st, rule_array, st[core.O_TO_ACT], obs[j])
        core.legal_mask(st, rule_array, masks[j])


@njit(cache=True)
def _full_obs(sim, rule_array, idx, seats, out):
    """The critic's input in rows ``idx``: the searching seat's observation, then every hand."""
    for j in range(idx.shape[0]):
        obs_mod.encode_full_row(sim[idx[j]], rule_array, seats[idx[j]], out[j])


@njit(cache=True)
def _legal_argmax(bits, masks, out):
    """Per row, the first legal column of the largest logit: what ``argmax`` of the masked logits picks,
    without the masked copy or a float32 one.  ``bits`` are the logits' IEEE bit patterns as signed
    integers (int16 for bfloat16, int32 for float32); flipping a negative one's magnitude bits makes
    integer order the numbers' order (-0 counts as +0).  Logits are never NaN."""
    low = np.iinfo(bits.dtype).min  # -0
    mag = -(low + 1)                # the magnitude bits: 0x7FFF or 0x7FFFFFFF
    for i in range(out.shape[0]):
        best, top = -1, np.int64(0)
        for a in range(bits.shape[1]):
            if masks[i, a] > 0:
                b = np.int64(bits[i, a])
                key = np.int64(0) if b == low else (b ^ mag if b < 0 else b)
                if best < 0 or key > top:
                    best, top = a, key
        out[i] = best


@njit(cache=True)
def _apply_all(states, rule_array, rows, acts):
    for i in range(rows.shape[0]):
        core.apply_action(states[rows[i]], rule_array, acts[i])


@dataclass(frozen=True)
class SearchResult:
    """What :meth:`SearchAgent.search_batch` found for a batch of decisions.

    ``rows`` are the decisions searched (a real play choice, in time under a deadline);
    ``cands[i]`` are row ``rows[i]``'s candidate moves, the policy's most probable first
    (-1: fewer legal moves than candidates), ``values[i]`` their mean rollout values in lá
    (-inf where there is no candidate).  ``acts`` is every row's move: the best candidate
    where searched (the first of equal ones), the policy's own elsewhere."""

    acts: np.ndarray     # int64 [B]
    rows: np.ndarray     # int64 [R]
    cands: np.ndarray    # int64 [R, candidates]
    values: np.ndarray   # float64 [R, candidates]


def search_targets(cands: np.ndarray, values: np.ndarray, temperature: float) -> np.ndarray:
    """The search's answer as a distribution over every action (float32 ``[R, NUM_ACTIONS]``):
    a softmax of ``values / temperature`` (lá) over each row's candidates, 0 elsewhere;
    ``temperature`` 0 puts all of it on the best candidate (the first of equal ones: the
    search's own move).  A soft target keeps what the values say of near-equal moves, which
    a noisy search cannot tell apart, instead of naming one of them."""
    cands = np.asarray(cands)
    values = np.asarray(values, dtype=np.float64)
    if not temperature >= 0 or not np.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number >= 0 (lá), not {temperature!r}")
    if cands.shape != values.shape or cands.ndim != 2:
        raise ValueError(f"cands {cands.shape} and values {values.shape} must be two equal [rows, k] shapes")
    valid = cands >= 0
    if not valid.any(axis=1).all() or not np.isfinite(values[valid]).all():
        raise ValueError("every row needs a candidate, and every candidate a finite value")
    score = np.where(valid, values, -np.inf)
    out = np.zeros((cands.shape[0], NUM_ACTIONS), dtype=np.float32)
    rows = np.arange(cands.shape[0])
    if temperature == 0:
        out[rows, cands[rows, score.argmax(axis=1)]] = 1.0
        return out
    z = np.exp((score - score.max(axis=1, keepdims=True)) / temperature)
    p = z / z.sum(axis=1, keepdims=True)
    r, j = np.nonzero(valid)
    out[r, cands[r, j]] = p[r, j]
    return out


def _bf16_native() -> bool:
    """Whether oneDNN multiplies bfloat16 natively here (it emulates it on plain AVX512)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _bf16_copy(net: PolicyNetwork) -> PolicyNetwork:
    return copy.deepcopy(net).to(torch.bfloat16).eval()


def rates_text(rates: dict[str, float]) -> str:
    """:func:`rollout_rates` in words, for a log line."""
    bf16 = f"{rates['bf16']:,.0f} in bf16" if "bf16" in rates else "bf16 not native here"
    return f"{rates['fp32']:,.0f} rows/s in fp32, {bf16}"


def prefers_bf16(rates: dict[str, float]) -> bool:
    """Whether :func:`rollout_rates` found bfloat16 the faster (absent: not native, so not)."""
    return rates.get("bf16", 0.0) > rates["fp32"]


@torch.no_grad()
def rollout_rates(net: PolicyNetwork, rows: int = 4 * PAD_ROWS, repeats: int = 8) -> dict[str, float]:
    """Rows per second of a rollout step's forward (``policy_logits``) in float32 and, where oneDNN
    takes it, bfloat16, on the calling thread: the best of ``repeats`` after a warm-up.  Whether bfloat16
    is the faster is a property of the core, not of its flags: 3x faster with AMX, 1.3x *slower* on a
    Xeon whose AVX512-BF16 has no AMX beside it (docs/agents.md), so a one-thread search worker measures
    it instead of guessing (the choice changes ~1% of greedy moves, not what the search is)."""
    x = torch.ones(rows, obs_mod.OBS_SIZE)
    nets = {"fp32": net}
    if _bf16_native():
        nets["bf16"] = _bf16_copy(net)
    out = {}
    for name, m in nets.items():
        inp = x.to(param_dtype(m))
        best = float("inf")
        for _ in range(repeats + 1):
            t0 = time.perf_counter()
            m.policy_logits(inp)
            best = min(best, time.perf_counter() - t0)
        out[name] = rows / best
    return out


class SearchAgent(Agent):
    """A policy plus determinized rollouts at play decisions (see the module docstring)."""

    needs_obs = True

    def __init__(self, policy: PolicyAgent, candidates: int = DEFAULTS["candidates"],
                 worlds: int = DEFAULTS["worlds"], horizon: int = DEFAULTS["horizon"],
                 critic: int = DEFAULTS["critic"], *, belief: BeliefNet | None = None,
                 reward_scale: float = obs_mod.LA_SCALE, seed: int = 0, chunk: int = 8192,
                 bf16: bool | None = None, deadline_ms: int = 0, true_world: bool = False) -> None:
        check_search_settings({"candidates": candidates, "worlds": worlds, "horizon": horizon,
                               "critic": critic, "deadline_ms": deadline_ms})
        if true_world and (worlds != 1 or belief is not None):
            raise ValueError("true_world searches the one real deal: worlds must be 1 and no belief given,"
                             f" not worlds={worlds}{' and a belief' if belief is not None else ''}")
        if not reward_scale > 0:
            raise ValueError(f"reward_scale must be positive, not {reward_scale!r}")
        super().__init__(seed)
        self.policy = policy
        self.candidates, self.worlds, self.horizon, self.critic = candidates, worlds, horizon, critic
        self.deadline_ms = deadline_ms
        self.reward_scale = float(reward_scale)
        self.belief = belief  # None: uniform worlds
        #: the states' own hands as the only world: the simulator's perfect information, for expert
        #: iteration's targets (distill.world: real), never for a player, which would see the hidden cards
        self.true_world = bool(true_world)
        self.chunk = int(chunk)
        if horizon >= 0 and critic > 0 and not policy.net.has_critic:
            raise ValueError(f"{policy.name} has no critic (trained without model.critic: full): "
                             "search it with critic=0 (its own value at the leaf) or horizon=-1"
                             " (rollouts to the end)")
        # Rollouts only rank moves, so they run in bfloat16 (greedy choices agree with float32 ~99% of
        # the time) wherever oneDNN takes it: ~3x faster with AMX / AVX512-BF16, emulated and ~1.5x slower
        # on plain AVX512, but reproducible there, which float32 GEMM on several threads is not.
        if bf16 is None:
            bf16 = _bf16_native()
        self.fast_net = _bf16_copy(policy.net) if bf16 else policy.net
        self.name = f"{policy.name}+search"
        self._obs = np.zeros((0, obs_mod.OBS_SIZE), dtype=np.float32)
        #: the longest recent rollout step (decaying), s: under a deadline, a step that would not end
        #: in time is not begun (the deadline is kept, rather than overrun by a step)
        self._step_s = 0.0
        #: the longest recent policy pass before the search (decaying), s: what a decision costs unsearched
        self.policy_s = 0.0
        self._mask = np.zeros((0, NUM_ACTIONS), dtype=np.int8)

    @property
    def trained_tables(self) -> tuple[Table, ...] | None:
        return self.policy.trained_tables

    @property
    def replayable(self) -> bool:
        # its worlds are salted by the position; a deadline makes the answer depend on the clock
        return self.deadline_ms == 0 and self.policy.replayable

    @property
    def settings(self) -> dict[str, Any]:
        out = {"candidates": self.candidates, "worlds": self.worlds, "horizon": self.horizon,
               "critic": self.critic, "belief": int(self.belief is not None)}
        if self.true_world:
            out["true_world"] = 1
        return out | ({"deadline_ms": self.deadline_ms} if self.deadline_ms else {})

    def _out_of_time(self, deadline: float | None) -> bool:
        """Whether ``deadline`` passes before a step as long as the longest recent one would end;
        then the estimate halves, so that one slow step (a pause of the machine) stops no search for good."""
        late = deadline is not None and time.perf_counter() + self._step_s >= deadline
        if late:
            self._step_s *= 0.5
        return late

    def _buffers(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """Observation and mask buffers for ``rows`` rows, reused between steps
        (fresh multi-megabyte arrays at every step cost more than filling them)."""
        if self._obs.shape[0] < rows:
            self._obs = np.zeros((rows, obs_mod.OBS_SIZE), dtype=np.float32)
            self._mask = np.zeros((rows, NUM_ACTIONS), dtype=np.int8)
        return self._obs, self._mask

    @torch.no_grad()
    def _fast_argmax(self, sim: np.ndarray, rule_array: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The greedy policy's moves in rows ``idx`` of ``sim``: the forward's moves, with neither its
        value head nor its masked and float32 copies of the logits (a third of a rollout step's time),
        the mask applied by :func:`_legal_argmax`.  Batches are padded to a multiple of
        :data:`PAD_ROWS`: oneDNN builds a kernel per shape, which costs more than the padding, and a
        few dozen shapes stay in its cache (a power of two wasted up to half of a forward)."""
        b = idx.size
        size = -(-b // PAD_ROWS) * PAD_ROWS
        obs, masks = self._buffers(size)
        _obs_masks(sim, rule_array, idx, obs, masks)
        net = self.fast_net
        # the legal masks too: a network that scores each move (model.kind moves) scores those alone
        legal = torch.from_numpy(masks[:size])
        logits = net.policy_logits(torch.from_numpy(obs[:size]).to(param_dtype(net)), legal)
        as_int = torch.int16 if logits.dtype == torch.bfloat16 else torch.int32
        out = np.empty(b, dtype=np.int64)
        _legal_argmax(logits.view(as_int).numpy(), masks, out)
        return out

    @torch.no_grad()
    def _leaf_values(self, sim: np.ndarray, rule_array: np.ndarray, seats: np.ndarray,
                     idx: np.ndarray) -> np.ndarray:
        """The leaf value, in lá, of what rows ``idx`` still bring their searching seat."""
        full = np.empty((idx.size, obs_mod.OBS_SIZE + obs_mod.FULL_EXTRA), dtype=np.float32)
        _full_obs(sim, rule_array, idx, seats, full)
        t = torch.from_numpy(full)
        v = self.policy.net.leaf_value(t[:, :obs_mod.OBS_SIZE], t[:, obs_mod.OBS_SIZE:], self.critic / 100.0)
        return self.reward_scale * v.numpy().astype(np.float64)

    def _rollout(self, sim: np.ndarray, rule_array: np.ndarray, seats: np.ndarray,
                 deadline: float | None = None) -> np.ndarray | None:
        """Play the rows of ``sim`` on with the greedy policy in every seat; returns each
        row's value for its searching seat, in lá, or None when ``deadline`` (a
        ``time.perf_counter()`` reading) passed first.

        With ``horizon=-1`` a row plays to the end and its value is the final
        score.  Otherwise a row stops when its searching seat is to act for the
        ``horizon + 1``-th time, and its value is the lá already won plus the
        leaf value of the rest.
        """
        leaf = self.horizon >= 0
        turns = np.zeros(sim.shape[0], dtype=np.int64)
        stopped = np.zeros(sim.shape[0], dtype=bool)
        while True:
            live = sim[:, core.O_PHASE] != core.PH_OVER
            if leaf:
                ours = live & ~stopped & (sim[:, core.O_TO_ACT] == seats)
                turns[ours] += 1
                stopped |= ours & (turns > self.horizon)
                live &= ~stopped
            live = np.flatnonzero(live)
            if live.size == 0:
                break
            for lo in range(0, live.size, self.chunk):
                if self._out_of_time(deadline):
                    return None
                t0 = time.perf_counter()
                idx = live[lo:lo + self.chunk]
                _apply_all(sim, rule_array, idx, self._fast_argmax(sim, rule_array, idx))
                self._step_s = max(0.8 * self._step_s, time.perf_counter() - t0)
        value = sim[np.arange(sim.shape[0]), core.O_SCORE + seats].astype(np.float64)
        rows = np.flatnonzero(stopped & (sim[:, core.O_PHASE] != core.PH_OVER))
        for lo in range(0, rows.size, self.chunk):
            if self._out_of_time(deadline):
                return None
            idx = rows[lo:lo + self.chunk]
            value[idx] += self._leaf_values(sim, rule_array, seats, idx)
        return value

    def _scores(self, sim: np.ndarray, rule_array: np.ndarray, seats: np.ndarray, decisions: int,
                deadline: float | None) -> np.ndarray | None:
        """Rollout values ``[decisions, worlds done, candidates]`` of rows ordered (decision, world,
        candidate): every world at once without a deadline, else :data:`SLICES` slices of worlds
        while time remains (None when not one was done in time)."""
        k = self.candidates
        sim = sim.reshape(decisions, self.worlds, k, -1)
        seats = seats.reshape(decisions, self.worlds, k)
        step = self.worlds if deadline is None else -(-self.worlds // SLICES)
        done: list[np.ndarray] = []
        for w0 in range(0, self.worlds, step):
            part = sim[:, w0:w0 + step].reshape(-1, sim.shape[-1])  # played on in place
            value = self._rollout(part, rule_array, seats[:, w0:w0 + step].reshape(-1), deadline)
            if value is None:
                break
            done.append(value.reshape(decisions, -1, k))
        return np.concatenate(done, axis=1) if done else None

    def search_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                     masks: np.ndarray, until: float | None = None) -> SearchResult:
        """The search of every row with a real play choice, and the move each row plays
        (:meth:`act_batch` is its ``acts``; expert iteration records the rest,
        training/algorithms/expert_search.py).
        ``until``: a ``time.perf_counter()`` reading to stop at (a server counts its deadline from the
        request's arrival, time queued included; ``inf``: none, but searched in slices); default:
        ``deadline_ms`` from now."""
        deadline = until if until is not None else (
            time.perf_counter() + self.deadline_ms / 1000 if self.deadline_ms else None)
        t0 = time.perf_counter()
        obs = self.observations(states, rule_array, obs)
        logits = self.policy.logits(obs, masks).cpu().numpy()
        self.policy_s = max(0.8 * self.policy_s, time.perf_counter() - t0)
        acts = logits.argmax(axis=1).astype(np.int64)
        legal = (masks > 0).sum(axis=1)
        rows = np.flatnonzero((legal > 1) & (states[:, core.O_PHASE] == core.PH_PLAY))
        k = self.candidates
        order = np.argsort(-logits[rows], axis=1, kind="stable")[:, :k]
        cands = np.where(np.take_along_axis(masks[rows], order, axis=1) > 0, order, -1).astype(np.int64)
        values = np.full(cands.shape, -np.inf)
        done = 0  # rows[:done] were searched; a deadline leaves the rest to the policy
        per = self.worlds * k
        # decisions in chunks so the rollout batch stays near self.chunk rows
        step = max(1, 4 * self.chunk // per)
        for lo in range(0, rows.size, step):
            if self._out_of_time(deadline):
                break
            r = rows[lo:lo + step]
            c = cands[lo:lo + step]
            sim = np.zeros((r.size * per, core.STATE_SIZE), dtype=np.int32)
            seats = np.zeros(r.size * per, dtype=np.int64)
            share = (self.belief.shares(obs[r]) if self.belief is not None
                     else np.zeros((0, core.MAX_PLAYERS, NR)))
            _expand(states, rule_array, r.astype(np.int64), c, k, self.worlds, self.seed, sim, seats, share,
                    self.true_world)
            score = self._scores(sim, rule_array, seats, r.size, deadline)
            if score is None:
                break
            mean = np.where(c >= 0, score.mean(axis=1), -np.inf)
            values[lo:lo + r.size] = mean
            acts[r] = c[np.arange(r.size), mean.argmax(axis=1)]
            done = lo + r.size
        return SearchResult(acts, rows[:done], cands[:done], values[:done])

    def act_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        return self.search_batch(states, rule_array, obs, masks).acts

    def act(self, game: Game, seat: int, until: float | None = None) -> int:
        """The move for ``seat``; ``until`` as in :meth:`search_batch`."""
        check_seat(game, seat)
        st = game.state[None, :].copy()
        mask = np.asarray(game.legal_mask(), dtype=np.int8)[None, :]
        return int(self.search_batch(st, game.rules_array, None, mask, until).acts[0])

    def warm(self, decisions: int = 3, seed: int = 0) -> None:
        """Search ``decisions`` real play choices of seeded deals in full, as a server's deadline
        would (in slices): the first calls load the compiled kernels and build oneDNN's kernels for
        the batch shapes, seconds that would otherwise fall on the first requests."""
        tables = self.trained_tables
        table = tables[0] if tables else Table.default()
        rules, players = table.rules, table.players
        done = 0
        while done < decisions:
            game = Game.new(rules, players, seed=seed + done)
            while not game.finished and done < decisions:
                seat = game.to_act
                real = len(game.legal_actions()) > 1 and game.state[core.O_PHASE] == core.PH_PLAY
                move = self.act(game, seat, until=float("inf")) if real else self.policy.act(game, seat)
                done += int(real)
                game.apply(move)
        self._step_s = self.policy_s = 0.0  # the first calls' times were loading, not steps


def load_search_agent(path: str | Path, settings: str = "", seed: int = 0,
                      deadline_ms: int = 0) -> SearchAgent:
    """``samloc`` spec ``DIR+search[:candidates=C,worlds=W,horizon=H,critic=P,belief=B,deadline_ms=T]``:
    a checkpoint with search.  The worlds follow the checkpoint's belief when it has one
    (``belief.safetensors``, training/tools/belief.py) unless ``belief=0``; an explicit ``belief=1``
    requires one.  ``deadline_ms``: the time bound where the spec gives none (0: none)."""
    given = parse_search_spec(settings, defaults=False)
    spec = {**DEFAULTS, "deadline_ms": deadline_ms, **given}
    want, required = spec.pop("belief"), "belief" in given
    path = resolve(path)  # a run folder: its newest good checkpoint, whose belief goes with its policy
    policy = load_policy_agent(path, seed=seed)
    belief = load_belief(path) if want else None
    if required and want and belief is None:
        raise ValueError(f"{path} has no belief network ({path}/belief.safetensors; "
                         "make one with samloc belief), or search it with belief=0")
    return SearchAgent(policy, **spec, belief=belief, reward_scale=policy.meta.reward_scale, seed=seed)
