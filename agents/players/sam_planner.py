"""The heuristic's Sâm planner, compiled: over Monte Carlo deals of the unseen cards to the opponents,
how often some split of the hand leaves at most one combination an opponent could beat (played last);
it declares when that pays, by the rule set's ``sam_win``/``sam_fail``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sam_env import core
from sam_env.actions import (ACT_KIND, ACT_LEN, ACT_RANK, K_DQUAD, K_PAIR, K_QUAD, K_SINGLE, K_STRAIGHT,
                             K_TRIPLE, NUM_ACTIONS, NUM_POSITIONS, POS_RANK)
from sam_env.core import (NR, O_HAND, O_NDEC, R2, R_ACE_LOW, R_DQUAD, R_FINISH_TWO_FORBIDDEN,
                          R_QUAD_CHOPS_TWO, R_SAM_FAIL, R_SAM_WIN)
from sam_env.seeding import GOLDEN_U64, MIX1_U64, MIX2_U64

from .hand_shape import search_all, workspace
from .heuristic_params import P_SAM_MARGIN, P_SAM_MAX_COMBOS, P_SAM_SAMPLES


@njit(cache=True)
def _opp_beats(oh, o, a, rule_array):
    """Can an opponent holding rank counts ``oh[o]`` beat combination ``a`` (as a lead)?"""
    k = ACT_KIND[a]
    r = ACT_RANK[a]
    if k == K_SINGLE or k == K_PAIR or k == K_TRIPLE or k == K_QUAD:
        need = k - K_SINGLE + 1
        for r2 in range(r + 1, NR):
            if oh[o, r2] >= need:
                return True
        if r == R2 and k == K_SINGLE and rule_array[R_QUAD_CHOPS_TWO] != 0:
            for r2 in range(NR):
                if oh[o, r2] == 4:
                    return True
        if r == R2 and k == K_PAIR and rule_array[R_DQUAD] != 0:
            q = 0
            for r2 in range(NR):
                if oh[o, r2] == 4:
                    q += 1
            return q >= 2
        return False
    if k == K_STRAIGHT:
        ln = ACT_LEN[a]
        run = 0
        lo = 1 if rule_array[R_ACE_LOW] != 0 else 3
        for p in range(lo, NUM_POSITIONS + 1):
            if oh[o, POS_RANK[p]] > 0:
                run += 1
                if run >= ln and p > r:
                    return True
            else:
                run = 0
        return False
    return False


@njit(cache=True)
def _only_twos(a):
    return ACT_KIND[a] != K_STRAIGHT and ACT_KIND[a] != K_DQUAD and ACT_RANK[a] == R2


@njit(cache=True)
def _candidate_splits(h, rule_array, maxc, out, lens):
    """Every split of ``h`` into at most ``maxc`` combinations (rows of ``out``, sizes in
    ``lens``); returns how many.  A Sâm is played out as one of these."""
    nout = np.zeros(1, dtype=np.int64)
    stack = np.zeros(16, dtype=np.int64)
    val = np.zeros(NUM_ACTIONS, dtype=np.float64)
    best = np.zeros(2, dtype=np.float64)
    wi, wf = workspace()
    search_all(h.copy(), rule_array, val, stack, stack.copy(), best, True, maxc, out, lens, nout, wi, wf)
    return nout[0]


@njit(cache=True)
def _unseen_pool(u, pool):
    """The unseen cards as ranks, one entry per card, in ``pool``; returns how many."""
    m = 0
    for r in range(NR):
        for _ in range(u[r]):
            pool[m] = r
            m += 1
    return m


@njit(cache=True)
def _drop_dead_splits(out, lens, nout, u, m, need):
    """Keep (compacted to the front) the splits with at most one "dead" single: one
    with below 5% chance that the opponents' ``need`` cards hold none of the higher
    unseen cards (exact for one single).  Two of them almost surely fail, and
    sampling them would only cost time.  Returns how many are kept."""
    nd = 0
    for d in range(nout):
        dead = 0
        for j in range(lens[d]):
            a = out[d, j]
            if ACT_KIND[a] == K_SINGLE:
                c = 0
                for r2 in range(ACT_RANK[a] + 1, NR):
                    c += u[r2]
                pnone = 1.0
                for i in range(c):
                    pnone *= max(0.0, (m - need - i) / (m - i))
                if pnone < 0.05:
                    dead += 1
        if dead <= 1:
            for j in range(lens[d]):
                out[nd, j] = out[d, j]
            lens[nd] = lens[d]
            nd += 1
    return nd


@njit(cache=True)
def _deal_opponents(pool, m, need, rng, oh):
    """One Monte Carlo deal: the first ``need`` of ``m`` pooled cards, shuffled, ten to
    each opponent's row of ``oh``."""
    for j in range(need):
        k = j + core.rng_below(rng, 0, m - j)
        pool[j], pool[k] = pool[k], pool[j]
    oh[:, :] = 0
    for j in range(need):
        oh[j // 10, pool[j]] += 1


@njit(cache=True)
def _split_survives(split, size, oh, opp, rule_array, forbid2):
    """Whether a Sâm played as ``split[:size]`` wins against the dealt opponents
    ``oh``: at most one combination any of them can beat, and that one played
    last; where the rules forbid finishing on 2s, the last one must not be 2s."""
    nbeat = 0
    weak = -1
    has_finisher = False
    for j in range(size):
        a = split[j]
        if not _only_twos(a):
            has_finisher = True
        beaten = False
        for o in range(opp):
            if _opp_beats(oh, o, a, rule_array):
                beaten = True
                break
        if beaten:
            nbeat += 1
            weak = a
    if nbeat == 0:
        return has_finisher or not forbid2
    if nbeat == 1:
        return not (forbid2 and _only_twos(weak))
    return False


@njit(cache=True)
def _most(succ, nd):
    """The largest count of ``succ[:nd]`` (0 for none): the best split's successes."""
    top = 0
    for d in range(nd):
        top = max(top, succ[d])
    return top


@njit(cache=True)
def sam_success_prob(h, u, n, rule_array, prm, seed, stop_below):
    """Estimated chance that declaring Sâm with hand ``h`` succeeds (best split).

    Sampling stops early, returning the estimate so far, when after 8, 16, …
    samples it is more than 0.3 below ``stop_below`` (a hand truly at the
    threshold almost never looks that bad); that keeps the decision cheap.
    """
    out = np.zeros((64, 10), dtype=np.int64)
    lens = np.zeros(64, dtype=np.int64)
    nout = _candidate_splits(h, rule_array, int(prm[P_SAM_MAX_COMBOS]), out, lens)
    pool = np.zeros(52, dtype=np.int64)
    m = _unseen_pool(u, pool)
    opp = n - 1
    need = min(10 * opp, m)
    nd = _drop_dead_splits(out, lens, nout, u, m, need)
    if nd == 0:
        return 0.0
    rng = np.zeros(1, dtype=np.uint64)
    rng[0] = np.uint64(seed)
    samples = int(prm[P_SAM_SAMPLES])
    if samples <= 0:
        return 0.0
    succ = np.zeros(nd, dtype=np.int64)
    oh = np.zeros((opp, NR), dtype=np.int64)
    forbid2 = rule_array[R_FINISH_TWO_FORBIDDEN] != 0
    for done in range(samples):
        if done >= 8 and done % 8 == 0:
            top = _most(succ, nd)
            if top / done < stop_below - 0.3:
                return top / done
        _deal_opponents(pool, m, need, rng, oh)
        for d in range(nd):
            if _split_survives(out[d], lens[d], oh, opp, rule_array, forbid2):
                succ[d] += 1
    return _most(succ, nd) / samples


@njit(cache=True)
def sam_threshold(rule_array, prm):
    win = rule_array[R_SAM_WIN]
    fail = rule_array[R_SAM_FAIL]
    if win + fail <= 0:
        return 2.0
    t = (fail + prm[P_SAM_MARGIN]) / (win + fail)
    return min(max(t, 0.55), 0.97)


@njit(cache=True)
def salt(st, seat, seed):
    """A per-decision random seed from public facts + own hand: the same
    decision gets the same randomness however games are batched.  Its fold
    (splitmix64's constants, a lighter mix than ``seeding.mix64``) stays as it
    is so the heuristic keeps playing exactly the games it always has."""
    z = np.uint64(seed) * GOLDEN_U64 + np.uint64(seat + 1)
    for r in range(NR):
        z = (z ^ np.uint64(st[O_HAND + seat * NR + r] + 7 * r)) * MIX1_U64
        z ^= z >> np.uint64(29)
    z ^= np.uint64(st[O_NDEC]) * MIX2_U64
    return z

