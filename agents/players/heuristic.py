"""``HeuristicAgent``: a hand-written player a good human would recognise.

How it thinks (all compiled with numba, straight on the engine state row):

* **Knowledge.**  Only its own ``O_HAND`` row and public fields: the cards not
  yet seen (``unseen = 4 − own − played by anyone``, per rank), hand sizes,
  the top combination, the báo-1 state, the declarer.
* **Hand shape.**  A depth-first search splits the hand into combinations
  (sets of one rank, straights, ace-low straights where allowed) and keeps the
  split with the best value ``Σ (−1 + β·strength(c) + master bonus)``: every
  combination costs a turn, strong ones less, and a *master* (nothing unseen
  can beat it) wins the lead back.  Strength comes from the unseen cards.
* **A decision** scores each legal move by the value of the hand it leaves,
  plus small terms: cards shed, winning the lead, a forced win line (at most
  one non-master left), chops, pressure to shed 2s/quads and avoid cóng when
  an opponent is close to going out, blocking (no cheap single into a báo 1,
  never a non-highest single in front of a báo-1 seat), and the leader's
  preference for its weakest combination.  Passing keeps the hand as it is.
* **Sâm.**  It declares only when, over Monte Carlo deals of the unseen cards
  to the opponents, some split of its hand leaves at most one combination an
  opponent could beat (played last) often enough to pay: the threshold comes
  from the rule set's ``sam_win``/``sam_fail``.  As declarer it leads its
  strongest combination first; against a declarer it breaks the Sâm with any play.

Variants (``heuristic:NAME``), used to check the full player is not worse than
simpler ones: ``greedy`` (lead the combination holding the lowest card, beat
with the smallest play, never declare), ``nosam``, ``noblock`` (no blocking or
pressure terms), ``spend`` (no value on masters: spends 2s and quads freely).

This module holds the decision and the agent; the hand model and splitter are
:mod:`agents.players.hand_shape`, the Sâm planner :mod:`agents.players.sam_planner`, the
parameters and variants :mod:`agents.players.heuristic_params`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sam_env import core
from sam_env.actions import (ACT_COUNTS, ACT_KIND, ACT_NCARDS, ACT_RANK, K_DQUAD, K_QUAD, K_SINGLE,
                             K_STRAIGHT, NO_SAM, NUM_ACTIONS, PASS, SAM)
from sam_env.core import (NR, O_DECLARER, O_LAST, O_N, O_PHASE, O_SIZE, O_TO_ACT, O_TOP, PH_SAM, R2,
                          R_CHOP_QUAD, R_CHOP_TWO, R_CONG, R_QUAD_LEFT, R_TWO_LEFT)
from sam_env.game import Game

from ..base import Agent, check_seat
from .hand_shape import best_split, own_counts, strengths, unseen_counts, workspace
from .heuristic_params import (P_BETA, P_BLOCK, P_CARD, P_CTRL, P_DANGER, P_DEN, P_GREEDY, P_MASTER,
                               P_NO_BLOCK, P_NO_SAM, P_SHED, P_WIN, VARIANTS, make_params)
from .sam_planner import salt, sam_success_prob, sam_threshold


@njit(cache=True)
def _greedy(mask, top):
    best = -1
    key = 1 << 30
    for a in range(1, NUM_ACTIONS):
        if mask[a] == 0:
            continue
        if top >= 0:
            return a  # beats come in table order: the smallest first
        lowest = NR
        for r in range(NR):
            if ACT_COUNTS[a, r] > 0:
                lowest = r
                break
        if ACT_KIND[a] == K_STRAIGHT and ACT_RANK[a] < 3:
            lowest = -1 + ACT_RANK[a]  # ace-low straights hold the lowest positions
        kk = lowest * 64 - ACT_NCARDS[a]
        if kk < key:
            key = kk
            best = a
    if best < 0:
        return PASS
    return best


@njit(cache=True)
def decide(st, rule_array, mask, prm, seed):
    """The heuristic's action for the seat to act in state row ``st``."""
    wi, wf = workspace()
    return _decide(st, rule_array, mask, prm, seed, wi, wf)


@njit(cache=True)
def _decide(st, rule_array, mask, prm, seed, wi, wf):
    """One decision, phase by phase: a forced move, the Sâm question, breaking an
    opponent's Sâm, the greedy variant, playing our own Sâm, else the best-scored move."""
    first, k = _legal_count(mask)
    if k <= 1:
        return first
    seat = st[O_TO_ACT]
    if st[O_PHASE] == PH_SAM:
        return _sam_answer(st, rule_array, prm, seed, seat)
    declarer = st[O_DECLARER]
    if declarer >= 0 and declarer != seat:
        return _break_sam(mask)
    if prm[P_GREEDY] != 0:
        return _greedy(mask, st[O_TOP])
    h, s, val = _hand_tables(st, rule_array, prm, seat, wi, wf)
    if declarer == seat:
        pick = _sam_lead(h, rule_array, val, s, mask, wi, wf)
        if pick >= 0:
            return pick
    best_a = _best_scored(st, rule_array, mask, prm, h, s, val, wi, wf)
    if best_a < 0 or mask[best_a] == 0:
        return first
    return best_a


@njit(cache=True)
def _legal_count(mask):
    """(the lowest legal action, how many are legal): one legal move needs no thought."""
    first = -1
    k = 0
    for a in range(NUM_ACTIONS):
        if mask[a] != 0:
            k += 1
            if first < 0:
                first = a
    return first, k


@njit(cache=True)
def _sam_answer(st, rule_array, prm, seed, seat):
    """Declare Sâm when its estimated success clears the rule set's break-even threshold."""
    if prm[P_NO_SAM] != 0:
        return NO_SAM
    h = np.zeros(NR, dtype=np.int64)
    u = np.zeros(NR, dtype=np.int64)
    own_counts(st, seat, h)
    unseen_counts(st, seat, u)
    thr = sam_threshold(rule_array, prm)
    p = sam_success_prob(h, u, st[O_N], rule_array, prm, salt(st, seat, seed), thr)
    return SAM if p >= thr else NO_SAM


@njit(cache=True)
def _break_sam(mask):
    """Against a declarer any play breaks the Sâm, so the first play will do."""
    for a in range(1, NUM_ACTIONS):
        if mask[a] != 0:
            return a
    return PASS


@njit(cache=True)
def _hand_tables(st, rule_array, prm, seat, wi, wf):
    """What every move is judged by: our hand (``wi[9]``; unseen cards in ``wi[10]``),
    each combination's strength against the unseen cards, and its value in a split."""
    h = wi[9, :NR]
    u = wi[10, :NR]
    own_counts(st, seat, h)
    unseen_counts(st, seat, u)
    s = wf[18:18 + NUM_ACTIONS]
    strengths(u, rule_array, s, wi[8])
    val = wf[18 + NUM_ACTIONS:18 + 2 * NUM_ACTIONS]
    for a in range(NUM_ACTIONS):
        val[a] = -1.0 + prm[P_BETA] * s[a] + (prm[P_MASTER] if s[a] >= 1.0 else 0.0)
    return h, s, val


@njit(cache=True)
def _sam_lead(h, rule_array, val, s, mask, wi, wf):
    """Our Sâm: the strongest legal combination of the best split, so the weakest goes
    last (2s are masters: they go first, never last); -1 when none of it is legal."""
    best_split(h, rule_array, val, wi, wf)
    pick = -1
    ps = -1.0
    for j in range(int(wf[17])):
        a = wi[6, j]
        if mask[a] != 0 and s[a] > ps:
            ps = s[a]
            pick = a
    return pick


@njit(cache=True)
def _urgency(st, seat, n):
    """How close the nearest opponent is to going out (1, 0.6, 0.3 with 1, 2, 3 cards):
    it scales the pressure to shed costly cards now."""
    urg = 0.0
    for o in range(n):
        if o == seat:
            continue
        z = st[O_SIZE + o]
        f = 1.0 if z == 1 else (0.6 if z == 2 else (0.3 if z == 3 else 0.0))
        if f > urg:
            urg = f
    return urg


@njit(cache=True)
def _best_scored(st, rule_array, mask, prm, h, s, val, wi, wf):
    """The legal move with the best score; going out at once wins outright, and
    passing (when following) scores the hand as it is."""
    seat = st[O_TO_ACT]
    n = st[O_N]
    size = st[O_SIZE + seat]
    noblock = prm[P_NO_BLOCK] != 0
    urg = 0.0 if noblock else _urgency(st, seat, n)
    myhigh = core.highest_rank(st, seat)
    cong = size == 10 and rule_array[R_CONG] >= 0
    h2 = wi[11, :NR]
    v0 = best_split(h, rule_array, val, wi, wf)
    best_a = PASS
    best_score = v0 if st[O_TOP] >= 0 else -1e18
    for a in range(1, NUM_ACTIONS):
        if mask[a] == 0:
            continue
        if ACT_NCARDS[a] == size:
            return a
        for r in range(NR):
            h2[r] = h[r] - ACT_COUNTS[a, r]
        sc = _move_score(st, rule_array, prm, a, h2, s, val, urg, cong, myhigh, noblock, wi, wf)
        if sc > best_score:
            best_score = sc
            best_a = a
    return best_a


@njit(cache=True)
def _move_score(st, rule_array, prm, a, h2, s, val, urg, cong, myhigh, noblock, wi, wf):
    """Playing ``a``: the value of the hand ``h2`` it leaves, the cards shed, then the
    following or leading terms and the báo-1 duty."""
    v = best_split(h2, rule_array, val, wi, wf)
    nm = 0  # combinations of the hand left that an unseen card can beat
    for j in range(int(wf[17])):
        if s[wi[6, j]] < 1.0:
            nm += 1
    nc = ACT_NCARDS[a]
    sc = v + prm[P_CARD] * nc
    if st[O_TOP] >= 0:
        sc = _follow_terms(sc, st, rule_array, prm, a, s, nm, urg, cong, noblock)
    else:
        sc = _lead_terms(sc, st, rule_array, prm, a, s, nm, urg, noblock)
    return _bao1_terms(sc, st, prm, a, s, myhigh, noblock)


@njit(cache=True)
def _at_stake(rule_array, a):
    """The lá ``a``'s cards would cost if still held when someone goes out (2s and quads
    are paid extra): the reason to shed them under pressure."""
    quads = 0
    if ACT_KIND[a] == K_QUAD:
        quads = 1
    elif ACT_KIND[a] == K_DQUAD:
        quads = 2
    return ACT_NCARDS[a] + rule_array[R_TWO_LEFT] * ACT_COUNTS[a, R2] + rule_array[R_QUAD_LEFT] * quads


@njit(cache=True)
def _follow_terms(sc, st, rule_array, prm, a, s, nm, urg, cong, noblock):
    """Following: winning the lead (with a win line after it), chops, pressure to play."""
    seat = st[O_TO_ACT]
    if s[a] >= 1.0:
        sc += prm[P_CTRL]
        if nm <= 1:
            sc += prm[P_WIN]
    if core.is_chop(st, a):
        t = st[O_TOP]
        if ACT_KIND[t] == K_QUAD:
            sc += rule_array[R_CHOP_QUAD] / 10.0
        else:
            sc += rule_array[R_CHOP_TWO] * ACT_NCARDS[t] / 10.0
    sc += urg * (prm[P_DANGER] + prm[P_SHED] * _at_stake(rule_array, a) / 10.0)
    if cong:
        sc += urg * rule_array[R_CONG] / 10.0
    last = st[O_LAST]
    if not noblock and st[O_SIZE + last] <= 2 and last != seat:
        sc += prm[P_DANGER]  # the seat on top is about to go out: take the lead
    return sc


@njit(cache=True)
def _lead_terms(sc, st, rule_array, prm, a, s, nm, urg, noblock):
    """Leading: a master then a win line, shedding under pressure, and blocking: no
    weak combination a short-handed opponent could finish on."""
    if (s[a] >= 1.0 and nm <= 1) or nm == 0:
        sc += prm[P_WIN]
    sc += urg * prm[P_SHED] * _at_stake(rule_array, a) / 10.0
    if not noblock:
        seat = st[O_TO_ACT]
        nc = ACT_NCARDS[a]
        for o in range(st[O_N]):
            if o == seat:
                continue
            z = st[O_SIZE + o]
            if z == nc or (z <= 2 and ACT_KIND[a] == K_SINGLE):
                sc -= prm[P_BLOCK] * (1.0 - s[a]) * (1.0 if z == nc else 0.5)
    return sc


@njit(cache=True)
def _bao1_terms(sc, st, prm, a, s, myhigh, noblock):
    """Báo 1: a single in front of a one-card seat must be our highest (else we pay,
    đền làng), and even then a weak one is a risk."""
    nxt = (st[O_TO_ACT] + 1) % st[O_N]
    if ACT_KIND[a] == K_SINGLE and st[O_SIZE + nxt] == 1:
        if ACT_RANK[a] != myhigh:
            sc -= prm[P_DEN]
        elif not noblock:
            sc -= prm[P_BLOCK] * (1.0 - s[a])
    return sc


@njit(cache=True)
def decide_batch(states, rule_array, masks, prm, seed, out):
    wi, wf = workspace()
    for i in range(states.shape[0]):
        out[i] = _decide(states[i], rule_array, masks[i], prm, seed, wi, wf)


class HeuristicAgent(Agent):
    """The strong hand-written baseline (see the module docstring)."""

    needs_obs = False
    replayable = True  # its randomness is salted by the position (salt), never drawn from a stream

    def __init__(self, seed: int = 0, variant: str = "", **params: float) -> None:
        super().__init__(seed)
        if variant not in VARIANTS:
            raise ValueError(f"unknown heuristic variant {variant!r} (known: "
                             + ", ".join(v for v in VARIANTS if v) + ")")
        self.variant = variant
        self.params = make_params(**{**VARIANTS[variant], **params})
        self.name = "heuristic" + (f":{variant}" if variant else "")

    def act(self, game: Game, seat: int) -> int:
        check_seat(game, seat)
        return int(decide(game.state, game.rules_array, game.legal_mask(), self.params, self.seed))

    def act_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        out = np.empty(states.shape[0], dtype=np.int64)
        decide_batch(states, rule_array, masks, self.params, self.seed, out)
        return out

