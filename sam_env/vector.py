"""Batched environments on the compiled engine: the trainer's self-play batch
and the opponent-driven games behind the Gymnasium envs.

Seeding (:mod:`sam_env.seeding`, Gymnasium's convention): game ``g`` of a
batch reset with ``seed`` plays the deals of seed ``seed + g``, so it deals
exactly the games of a single env reset with ``seed + g``.  Word 1 of that
seed is a second stream for everything else random in an opponent env (the
learning seat, random opponents, replaced illegal actions), so opponents
never shift the deals.

This module imports neither torch nor gymnasium.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numba import njit

from . import core
from .actions import NO_SAM, NUM_ACTIONS
from .batch import GameBatch, IllegalActionError
from .cards import DEFAULT_PLAYERS, HAND_SIZE
from .core import O_N, O_PHASE, O_SCORE, O_TO_ACT, PH_OVER, PH_SAM
from .game import Game
from .named_agents import named_agent
from .obs import OBS_SIZE, encode_mask_batch, encode_row
from .rules import DEFAULT_PRESET, RuleSet
from .seeding import fresh_seed, seed_streams

__all__ = ["SelfPlayBatch", "OpponentGames", "IllegalActionError", "seed_streams"]


# ---- kernels ---------------------------------------------------------------------
@njit(cache=True)
def random_legal(st, rule_array, rng, i, buf):
    """A uniformly random legal action of the seat to act, from stream ``i``."""
    k = core.legal_actions(st, rule_array, buf)
    return buf[core.rng_below(rng, i, k)]


@njit(cache=True)
def random_play(st, rule_array, rng, i, buf, sam_ok):
    """A random opponent's decision: ``no_sam`` unless ``sam_ok``, else uniform among legal moves."""
    if st[O_PHASE] == PH_SAM and not sam_ok:
        return NO_SAM
    return random_legal(st, rule_array, rng, i, buf)


@njit(cache=True)
def random_from_masks(masks, rng, out):
    """``out[g]``: a uniformly random action allowed by ``masks[g]`` (stream ``g``), ``no_sam``
    when it is allowed (as ``samloc bench`` plays); -1 if none."""
    for g in range(masks.shape[0]):
        m = masks[g]
        if m[NO_SAM]:
            out[g] = NO_SAM
            continue
        k = 0
        for a in range(m.shape[0]):
            k += m[a]
        if k == 0:
            out[g] = -1
            continue
        j = core.rng_below(rng, g, k)
        for a in range(m.shape[0]):
            if m[a]:
                if j == 0:
                    out[g] = a
                    break
                j -= 1


@njit(cache=True)
def selfplay_step(states, rule_array, actions, rng, n, hands, rewards, done, seats, obs, masks):
    """One decision per game, autoreset, then the next decision's seat, observation and mask.

    Returns -1, or the first game whose action ``masks`` does not allow (then no game has moved)."""
    for g in range(actions.shape[0]):
        a = actions[g]
        if a < 0 or a >= NUM_ACTIONS or masks[g, a] == 0:
            return g
    # the masks are this batch's own, encoded from these states by the last call: checked
    core.batch_step(states, rule_array, actions, rng, n, hands, rewards, done, True, True)
    encode_mask_batch(states, rule_array, obs, masks, seats)
    return -1


@njit(cache=True)
def _advance_random(st, rule_array, learner, rng, x, buf, sam_ok):
    """Random opponents play until the learner is to act; ``sam_ok[k]``: relative seat k+1 may declare
    Sâm."""
    n = st[O_N]
    while st[O_PHASE] != PH_OVER and st[O_TO_ACT] != learner:
        slot = (st[O_TO_ACT] - learner + n) % n - 1
        core.apply_action(st, rule_array, random_play(st, rule_array, rng, x, buf, sam_ok[slot]))


@njit(cache=True)
def _deal(st, rule_array, rng, d, x, n, hands, fixed_seat):
    """A new playable deal from stream ``d``; the learning seat (fixed, or drawn from ``x``)."""
    skipped = core.new_playable_game(st, rule_array, rng, d, n, hands)
    learner = fixed_seat if fixed_seat >= 0 else core.rng_below(rng, x, n)
    return learner, skipped


@njit(cache=True)
def _reset_random(st, rule_array, rng, d, x, n, hands, fixed_seat, buf, sam_ok):
    """Deal until the learning seat has a decision, random opponents acting before it."""
    skipped = 0
    while True:
        learner, s = _deal(st, rule_array, rng, d, x, n, hands, fixed_seat)
        skipped += s
        _advance_random(st, rule_array, learner, rng, x, buf, sam_ok)
        if st[O_PHASE] != PH_OVER:
            return learner, skipped
        skipped += 1


@njit(cache=True)
def opp_reset_random(states, rule_array, rng, n, hands, fixed_seat, sam_ok, learners, obs, masks):
    """Reset every game of an all-random-opponent batch; returns deals skipped."""
    N = states.shape[0]
    buf = np.empty(NUM_ACTIONS, dtype=np.int64)
    skipped = 0
    for g in range(N):
        learners[g], s = _reset_random(states[g], rule_array, rng, g, N + g, n, hands[g], fixed_seat, buf,
                                       sam_ok)
        skipped += s
    encode_mask_batch(states, rule_array, obs, masks, learners)
    return skipped


@njit(cache=True)
def opp_step_random(states, rule_array, rng, n, hands, fixed_seat, sam_ok, learners, actions, replace_illegal,
                    obs, masks, delta, terminated, illegal, final_obs, final_scores):
    """The learning seat's action in every game, then random opponents until its next turn.

    A finished game is recorded (``final_obs``, ``final_scores``) and dealt
    again at once.  Returns -1, or the first game whose action is illegal
    when ``replace_illegal`` is off (nothing has moved then); and the
    number of deals skipped because the learning seat had no decision.
    """
    N = states.shape[0]
    buf = np.empty(NUM_ACTIONS, dtype=np.int64)
    if not replace_illegal:
        for g in range(N):
            a = actions[g]
            if a < 0 or a >= NUM_ACTIONS or masks[g, a] == 0:
                return g, 0
    skipped = 0
    for g in range(N):
        st = states[g]
        me = learners[g]
        a = actions[g]
        illegal[g] = False
        if a < 0 or a >= NUM_ACTIONS or masks[g, a] == 0:
            illegal[g] = True
            a = random_legal(st, rule_array, rng, N + g, buf)
        before = st[O_SCORE + me]
        core.apply_action(st, rule_array, a)
        _advance_random(st, rule_array, me, rng, N + g, buf, sam_ok)
        delta[g] = st[O_SCORE + me] - before
        terminated[g] = st[O_PHASE] == PH_OVER
        if terminated[g]:
            encode_row(st, rule_array, me, final_obs[g])
            for s in range(core.MAX_PLAYERS):
                final_scores[g, s] = st[O_SCORE + s]
            learners[g], s2 = _reset_random(st, rule_array, rng, g, N + g, n, hands[g], fixed_seat, buf,
                                            sam_ok)
            skipped += s2
    encode_mask_batch(states, rule_array, obs, masks, learners)
    return -1, skipped


@njit(cache=True)
def deal_games(states, rule_array, rng, n, hands, games, fixed_seat, learners):
    N = states.shape[0]
    skipped = 0
    for g in games:
        learners[g], s = _deal(states[g], rule_array, rng, g, N + g, n, hands[g], fixed_seat)
        skipped += s
    return skipped


@njit(cache=True)
def random_actions(states, rule_array, rng, games, out, sam_ok):
    """A random decision (:func:`random_play`) for the seat to act in each listed game (its second stream)."""
    N = states.shape[0]
    buf = np.empty(NUM_ACTIONS, dtype=np.int64)
    for j in range(games.shape[0]):
        g = games[j]
        out[j] = random_play(states[g], rule_array, rng, N + g, buf, sam_ok)


@njit(cache=True)
def apply_actions(states, rule_array, games, actions):
    """Apply ``actions[j]`` in game ``games[j]``; returns the first j that is illegal, or -1."""
    for j in range(games.shape[0]):
        st = states[games[j]]
        a = actions[j]
        if st[O_PHASE] == PH_OVER or a < 0 or a >= NUM_ACTIONS or \
                core.check_action(st, rule_array, st[O_TO_ACT], a) != core.OK:
            return j
    for j in range(games.shape[0]):
        core.apply_action(states[games[j]], rule_array, actions[j])
    return -1


@njit(cache=True)
def encode_for(states, rule_array, games, seats, obs, masks):
    """Observation and mask of ``seats[j]`` in game ``games[j]`` into row j."""
    buf = np.empty(NUM_ACTIONS, dtype=np.int64)
    for j in range(games.shape[0]):
        st = states[games[j]]
        encode_row(st, rule_array, seats[j], obs[j])
        m = masks[j]
        m[:] = 0
        if st[O_TO_ACT] == seats[j]:
            k = core.legal_actions(st, rule_array, buf)
            for i in range(k):
                m[buf[i]] = 1


# ---- the trainer's self-play batch ---------------------------------------------------
class SelfPlayBatch:
    """``num_envs`` games in which every seat learns: one action per game per step.

    :meth:`reset` and :meth:`step` return, per game, the seat to act next,
    its observation and its legal mask.  ``rewards[g, seat]`` are the lá each
    seat gained in that step (chop payments when a chain settles, the rest at
    the end); ``done[g]`` says the game ended, and it has already been
    replaced by a new seeded deal (instant-win deals are skipped).  Game ``g``
    reset with ``seed`` deals the games of a single env reset with
    ``seed + g``.

    The returned arrays are fresh; with ``copy=False`` they are this batch's
    own buffers, overwritten by the next call (faster, for a trainer that
    stores them into its rollout buffers at once; not to be written to: the
    masks are what the next step checks actions against).  The observations are
    encoded straight into the fresh array (no copy), which ``obs`` then names.
    """

    def __init__(self, rules: RuleSet | str = DEFAULT_PRESET, players: int = DEFAULT_PLAYERS,
                 num_envs: int = 1024, seed: int = 0, copy: bool = True):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, not {num_envs!r}")
        # an environment's constructor is an edge: a preset name or a rules object is parsed here
        self.game_batch = GameBatch(RuleSet.parse(rules), players, num_envs, seed=0, autoreset=True)
        self.rules = self.game_batch.rules
        self.players = self.game_batch.players
        self.num_envs = num_envs
        self.obs_size = OBS_SIZE
        self.num_actions = NUM_ACTIONS
        self.seats = np.zeros(num_envs, dtype=np.int64)
        self.obs = np.zeros((num_envs, OBS_SIZE), dtype=np.float32)
        self.masks = np.zeros((num_envs, NUM_ACTIONS), dtype=np.int8)
        self.rewards = np.zeros((num_envs, core.MAX_PLAYERS), dtype=np.float32)
        self.done = np.zeros(num_envs, dtype=np.bool_)
        self.copy = copy
        self.reset(seed)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Deal every game afresh (``seed=None``: continue the streams); returns (seat, obs, mask)."""
        gb = self.game_batch
        if seed is not None:
            gb.rng = seed_streams(seed, self.num_envs)
        gb.instant_deals = int(core.batch_reset(gb.states, gb.rule_array, gb.rng, self.players, gb.hands))
        self.obs = self._obs_out()
        encode_mask_batch(gb.states, gb.rule_array, self.obs, self.masks, self.seats)
        if self.copy:
            return self.seats.copy(), self.obs, self.masks.copy()
        return self.seats, self.obs, self.masks

    def _obs_out(self) -> np.ndarray:
        """Where the next observations go: a new array (``copy``, every cell is written) or the buffer.

        The batch lets go of the last array first: when the caller has let go of it too, the new one
        reuses its memory, still in cache."""
        if not self.copy:
            return self.obs
        self.obs = None
        return np.empty((self.num_envs, OBS_SIZE), dtype=np.float32)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        """Apply ``actions[g]`` for the seat to act in each game.

        Returns ``(seat, obs, mask, rewards float32[N, 5], done bool[N])``;
        IllegalActionError (naming the game) if an action is not legal, and
        then no game has moved.
        """
        gb = self.game_batch
        acts = np.ascontiguousarray(actions, dtype=np.int64)
        if acts.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), not {acts.shape}")
        obs = self._obs_out()
        bad = selfplay_step(gb.states, gb.rule_array, acts, gb.rng, self.players, gb.hands, gb.rewards,
                            gb.done, self.seats, obs, self.masks)
        self.obs = obs
        if bad >= 0:  # no game has moved: the same observations again
            encode_mask_batch(gb.states, gb.rule_array, obs, self.masks, self.seats)
            raise IllegalActionError(f"game {bad}: action {int(acts[bad])} is not legal for seat"
                                     f" {int(self.seats[bad])}")
        np.copyto(self.rewards, gb.rewards)
        np.copyto(self.done, gb.done)
        if self.copy:
            return self.seats.copy(), obs, self.masks.copy(), self.rewards.copy(), self.done.copy()
        return self.seats, self.obs, self.masks, self.rewards, self.done

    @property
    def states(self) -> np.ndarray:
        return self.game_batch.states

    @property
    def rule_array(self) -> np.ndarray:
        return self.game_batch.rule_array


# ---- games against opponents (the Gymnasium envs' engine) --------------------------------
OpponentSpec = Any  # "random" | callable(obs, mask) -> action | object with act_batch / act


class _Opponent:
    """One opponent policy, normalized: ``kind`` is random, batch, call or game.

    "random" never declares Sâm and then plays uniformly among its legal
    moves (as ``agents.make_agent("random")``); "random:uniform" declares
    Sâm half the time too.  Both run compiled, from the game's second stream.
    """

    def __init__(self, spec: OpponentSpec):
        self.spec = spec
        self.sam_ok = False
        if spec is None or (isinstance(spec, str) and spec in ("random", "random:uniform")):
            self.kind = "random"
            self.sam_ok = spec == "random:uniform"
        elif isinstance(spec, str):
            self.__init__(named_agent(spec))  # the agents layer's factory, by entry point
            return
        elif hasattr(spec, "act_batch") and getattr(spec, "batched", True):
            self.kind = "batch"
        elif hasattr(spec, "act"):
            self.kind = "game"
        elif callable(spec):
            self.kind = "call"
        else:
            raise ValueError(f"opponent {spec!r} is not 'random', a callable (obs, mask) -> action, or an"
                             " agent with act(game, seat) / act_batch(states, rule_array, obs, masks)")

    def __repr__(self) -> str:
        return ("random:uniform" if self.sam_ok else "random") if self.kind == "random" else repr(self.spec)


def resolve_opponents(spec: OpponentSpec | Sequence[OpponentSpec], players: int) -> list[_Opponent]:
    """One opponent per relative seat 1 … players-1 (a single spec plays them all)."""
    if isinstance(spec, (list, tuple)):
        if len(spec) != players - 1:
            raise ValueError(f"opponents must be one spec or a list of {players - 1} (one per other seat),"
                             f" not {len(spec)}")
        return [_Opponent(s) for s in spec]
    one = _Opponent(spec)
    return [one] * (players - 1)


class OpponentGames:
    """``num_envs`` games, each with one learning seat and opponents for the others.

    The learning seat is ``learner_seat`` or, when that is None, drawn per
    game.  ``illegal_action`` says what an illegal learner action does:
    "random" (replaced by a random legal action, flagged in ``illegal``) or
    "raise".  With only random opponents everything runs in one compiled
    call per step.
    """

    def __init__(self, rules: RuleSet, players: int = DEFAULT_PLAYERS,
                 num_envs: int = 1, opponents: OpponentSpec | Sequence[OpponentSpec] = "random",
                 learner_seat: int | None = None, illegal_action: str = "random"):
        self.rules = rules
        self.players = self.rules.check_players(players)
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive integer, not {num_envs!r}")
        if learner_seat is not None and (isinstance(learner_seat, bool) or not isinstance(learner_seat, int)
                                         or not 0 <= learner_seat < players):
            raise ValueError(f"learner_seat must be None (random per game) or a seat from 0 to {players - 1}")
        if illegal_action not in ("random", "raise"):
            raise ValueError(f"illegal_action must be 'random' or 'raise', not {illegal_action!r}")
        self.num_envs = N = num_envs
        self.fixed_seat = -1 if learner_seat is None else learner_seat
        self.replace_illegal = illegal_action == "random"
        self.opponents = resolve_opponents(opponents, self.players)
        self.all_random = all(o.kind == "random" for o in self.opponents)
        self.sam_ok = np.array([o.sam_ok for o in self.opponents]
                               + [False] * (core.MAX_PLAYERS - self.players), dtype=np.bool_)
        self.rule_array = self.rules.to_array()
        self.states = core.new_states(N)
        self.hands = np.zeros((N, core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
        self.rng = np.zeros(2 * N, dtype=np.uint64)
        self.learners = np.zeros(N, dtype=np.int64)
        self.obs = np.zeros((N, OBS_SIZE), dtype=np.float32)
        self.masks = np.zeros((N, NUM_ACTIONS), dtype=np.int8)
        self.delta = np.zeros(N, dtype=np.int64)
        self.terminated = np.zeros(N, dtype=np.bool_)
        self.illegal = np.zeros(N, dtype=np.bool_)
        self.final_obs = np.zeros((N, OBS_SIZE), dtype=np.float32)
        self.final_scores = np.zeros((N, core.MAX_PLAYERS), dtype=np.int64)
        self.skipped = 0  # deals in which the learning seat had no decision (instant wins included)
        self._logs: list[list[int]] = [[] for _ in range(N)]
        self._mirrors: list[Any] = [None] * N
        self.seeded = False

    # -- public -----------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Deal every game afresh; ``seed=None`` continues the streams (or seeds from the OS once)."""
        if seed is not None or not self.seeded:
            self.rng[:] = seed_streams(fresh_seed() if seed is None else seed, self.num_envs, 2)
            self.seeded = True
        if self.all_random:
            self.skipped += int(opp_reset_random(self.states, self.rule_array, self.rng, self.players,
                                                 self.hands, self.fixed_seat, self.sam_ok, self.learners,
                                                 self.obs, self.masks))
        else:
            self._redeal(np.arange(self.num_envs))
            self._encode_learners()

    def step(self, actions: np.ndarray) -> None:
        """The learning seat's action in every game, opponents until its next turn; results in
        ``delta`` (lá), ``terminated``, ``illegal``, ``final_obs``/``final_scores`` and ``obs``/``masks``."""
        acts = np.ascontiguousarray(actions, dtype=np.int64)
        if acts.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), not {acts.shape}")
        if self.all_random:
            bad, skipped = opp_step_random(self.states, self.rule_array, self.rng, self.players, self.hands,
                                           self.fixed_seat, self.sam_ok, self.learners, acts,
                                           self.replace_illegal, self.obs, self.masks, self.delta,
                                           self.terminated, self.illegal, self.final_obs, self.final_scores)
            if bad >= 0:
                self._illegal_error(bad, acts)
            self.skipped += skipped
            return
        self._step_generic(acts)

    def game(self, g: int = 0):
        """Game ``g`` as a :class:`~sam_env.game.Game` (built from its deal and decisions on demand).

        The compiled all-random path logs no decisions: there read ``states[g]``.
        """
        if self.all_random:
            raise ValueError("with only random opponents the decisions are not logged;"
                             " read states[g] instead")
        return self._mirror(g)

    # -- the general path: opponents called from Python, one decision per game per round ----
    def _illegal_error(self, g: int, acts: np.ndarray) -> None:
        raise IllegalActionError(f"game {g}: action {int(acts[g])} is not legal for the learning seat"
                                 f" {int(self.learners[g])}")

    def _step_generic(self, acts: np.ndarray) -> None:
        N = self.num_envs
        all_g = np.arange(N)
        ok = (acts >= 0) & (acts < NUM_ACTIONS)
        ok &= self.masks[all_g, np.where(ok, acts, 0)] != 0
        if not ok.all() and not self.replace_illegal:
            self._illegal_error(int(np.argmin(ok)), acts)
        self.illegal[:] = ~ok
        acts = acts.copy()
        if not ok.all():
            bad = all_g[~ok]
            fix = np.empty(len(bad), dtype=np.int64)
            random_actions(self.states, self.rule_array, self.rng, bad, fix, True)
            acts[bad] = fix
        before = self.states[all_g, O_SCORE + self.learners].astype(np.int64)
        self._apply(all_g, acts, "the learning seat")
        self._advance(all_g)
        self.delta[:] = self.states[all_g, O_SCORE + self.learners] - before
        self.terminated[:] = self.states[:, O_PHASE] == PH_OVER
        done = all_g[self.terminated]
        if len(done):
            masks = np.zeros((len(done), NUM_ACTIONS), dtype=np.int8)
            fo = np.zeros((len(done), OBS_SIZE), dtype=np.float32)
            encode_for(self.states, self.rule_array, done, self.learners[done], fo, masks)
            self.final_obs[done] = fo
            self.final_scores[done] = self.states[done, O_SCORE:O_SCORE + core.MAX_PLAYERS]
            self._redeal(done)
        self._encode_learners()

    def _encode_learners(self) -> None:
        encode_for(self.states, self.rule_array, np.arange(self.num_envs), self.learners, self.obs,
                   self.masks)

    def _redeal(self, games: np.ndarray) -> None:
        """Deal the listed games until each learning seat has a decision."""
        while len(games):
            self.skipped += int(deal_games(self.states, self.rule_array, self.rng, self.players, self.hands,
                                           games, self.fixed_seat, self.learners))
            for g in games:
                self._logs[g] = []
                self._mirrors[g] = None
            self._advance(games)
            over = self.states[games, O_PHASE] == PH_OVER
            self.skipped += int(over.sum())
            games = games[over]

    def _apply(self, games: np.ndarray, acts: np.ndarray, who: str) -> None:
        j = apply_actions(self.states, self.rule_array, games, acts)
        if j >= 0:
            g = int(games[j])
            raise IllegalActionError(f"game {g}: {who} chose action {int(acts[j])}, which is not legal"
                                     f" for seat {int(self.states[g, O_TO_ACT])}")
        for g, a in zip(games.tolist(), acts.tolist()):
            self._logs[g].append(a)

    def _advance(self, games: np.ndarray) -> None:
        """Let opponents act in the listed games until the learning seat is to act or the game is over."""
        n = self.players
        while True:
            st = self.states[games]
            to_act = st[:, O_TO_ACT]
            live = (st[:, O_PHASE] != PH_OVER) & (to_act != self.learners[games])
            if not live.any():
                return
            pend = games[live]
            slot = (to_act[live] - self.learners[pend]) % n - 1
            acts = np.empty(len(pend), dtype=np.int64)
            for k, opp in enumerate(self.opponents):
                sel = slot == k
                if sel.any():
                    acts[sel] = self._opponent_actions(opp, pend[sel])
            self._apply(pend, acts, "an opponent")

    def _opponent_actions(self, opp: _Opponent, games: np.ndarray) -> np.ndarray:
        out = np.empty(len(games), dtype=np.int64)
        if opp.kind == "random":
            random_actions(self.states, self.rule_array, self.rng, games, out, opp.sam_ok)
            return out
        seats = self.states[games, O_TO_ACT].astype(np.int64)
        if opp.kind == "game":
            for j, g in enumerate(games.tolist()):
                out[j] = int(opp.spec.act(self._mirror(g), int(seats[j])))
            return out
        obs = np.zeros((len(games), OBS_SIZE), dtype=np.float32)
        masks = np.zeros((len(games), NUM_ACTIONS), dtype=np.int8)
        encode_for(self.states, self.rule_array, games, seats, obs, masks)
        if opp.kind == "batch":
            got = np.asarray(opp.spec.act_batch(self.states[games], self.rule_array, obs, masks)).reshape(-1)
            if got.shape != (len(games),):
                raise ValueError(f"opponent {opp!r}: act_batch returned {got.shape[0]} actions"
                                 f" for {len(games)} games")
            out[:] = got
            return out
        for j in range(len(games)):
            out[j] = int(opp.spec(obs[j], masks[j]))
        return out

    def _mirror(self, g: int):
        game = self._mirrors[g]
        if game is None:
            st = self.states[g]
            hands = [[int(c) for c in self.hands[g, s]] for s in range(self.players)]
            game = Game(self.rules, self.players, hands, int(st[core.O_OPENER]))
            self._mirrors[g] = game
        log = self._logs[g]
        for a in log[len(game.events):]:
            game.apply(a)
        return game
