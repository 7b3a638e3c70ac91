"""The heuristic's hand model, compiled: what a seat knows (its own hand, the unseen cards, how strong
each combination is against them) and the best split of a hand into combinations (a depth-first search).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sam_env.actions import (ACT_KIND, ACT_LEN, K_STRAIGHT, NUM_ACTIONS, NUM_POSITIONS, POS_RANK, SINGLE0,
                             STRAIGHT0)
from sam_env.core import NR, O_HAND, O_N, O_PLAYED, R2, R_ACE_LOW
from sam_env.cards import RANK_A as RA


@njit(cache=True)
def own_counts(st, seat, h):
    for r in range(NR):
        h[r] = st[O_HAND + seat * NR + r]


@njit(cache=True)
def unseen_counts(st, seat, u):
    """Cards of each rank neither in our hand nor played by anyone."""
    n = st[O_N]
    for r in range(NR):
        x = 4 - st[O_HAND + seat * NR + r]
        for s in range(n):
            x -= st[O_PLAYED + s * NR + r]
        u[r] = x


@njit(cache=True)
def _sbase(ln):
    b = 0
    for x in range(3, ln):
        b += NUM_POSITIONS - x + 1
    return b


@njit(cache=True)
def strengths(u, rule_array, out, run):
    """``out[a]`` in (0, 1]: 1 when no unseen cards can beat combination ``a``
    (``run``: scratch of NUM_POSITIONS + 1 ints)."""
    for a in range(NUM_ACTIONS):
        out[a] = 1.0
    div = (0.0, 3.0, 2.0, 1.5, 1.0)
    for k in range(1, 5):
        for r in range(NR):
            cnt = 0.0
            for r2 in range(r + 1, NR):
                if u[r2] >= k:
                    cnt += u[r2] - k + 1
            out[SINGLE0 + (k - 1) * NR + r] = 1.0 / (1.0 + cnt / div[k])
    run[:] = 0
    lo = 1 if rule_array[R_ACE_LOW] != 0 else 3
    for p in range(lo, NUM_POSITIONS + 1):
        if u[POS_RANK[p]] > 0:
            run[p] = run[p - 1] + 1
    for ln in range(3, 11):
        b = STRAIGHT0 + _sbase(ln)
        for t in range(ln, NUM_POSITIONS + 1):
            cnt = 0.0
            for t2 in range(t + 1, NUM_POSITIONS + 1):
                if run[t2] >= ln:
                    cnt += 1.0
            out[b + t - ln] = 1.0 / (1.0 + cnt)


# ---- splitting a hand into combinations ------------------------------------------------
@njit(cache=True)
def _record_split(d, acc, stack, best_stack, best, collect, out, lens, nout):
    """A complete split, ``stack[:d]`` worth ``acc``: added to ``out`` (``collect``), else kept if the
    best."""
    if collect:
        i = nout[0]
        if i < out.shape[0]:
            for j in range(d):
                out[i, j] = stack[j]
            lens[i] = d
            nout[0] = i + 1
    elif acc > best[0]:
        best[0] = acc
        best[1] = d
        for j in range(d):
            best_stack[j] = stack[j]


@njit(cache=True)
def _give_back(h, r, a, c):
    """Undo combination ``a`` taken at rank ``r`` from rank counts ``h`` (a set took all ``c`` cards
    there)."""
    if ACT_KIND[a] == K_STRAIGHT:
        for q in range(r, r + ACT_LEN[a]):
            h[q] += 1
    else:
        h[r] = c


@njit(cache=True)
def _search(h, r0, acc0, depth0, val, stack, best_stack, best, collect, maxc, out, lens, nout, wi, wf):
    """Depth-first search over the splits of rank counts ``h`` (restored on return).

    At the lowest rank left, either all its cards form one set, or a straight
    of length 3+ starts there (straights starting at the same rank are taken
    longest first, to avoid listing a split twice).  With ``collect`` every
    split of at most ``maxc`` combinations goes to ``out``; otherwise the best
    by ``val`` goes to ``best``/``best_stack``.  Iterative: numba cannot cache
    recursive functions.  ``wi``/``wf``: scratch (see :func:`workspace`).
    """
    fr = wi[0]    # rank this frame works on
    fml = wi[1]   # longest straight allowed at that rank
    fopt = wi[2]  # next option; -1 = fresh frame
    fa = wi[3]    # combination applied by this frame; -1 = none
    fc = wi[4]    # cards a set took
    facc = wf[:16]
    sp = 0
    fr[0] = r0
    fml[0] = 99
    facc[0] = acc0
    fopt[0] = -1
    fa[0] = -1
    while sp >= 0:
        r = fr[sp]
        d = depth0 + sp
        if fopt[sp] == -1:
            while r < NR and h[r] == 0:
                r += 1
                fml[sp] = 99
            fr[sp] = r
            if r == NR:
                _record_split(d, facc[sp], stack, best_stack, best, collect, out, lens, nout)
                sp -= 1
                continue
            if collect and (d >= maxc or nout[0] >= out.shape[0]):
                sp -= 1
                continue
            fopt[sp] = 0
        a = fa[sp]
        if a >= 0:
            _give_back(h, r, a, fc[sp])
            fa[sp] = -1
        opt = fopt[sp]
        fopt[sp] = opt + 1
        if opt == 0:
            c = h[r]
            a = SINGLE0 + (c - 1) * NR + r
            fc[sp] = c
            h[r] = 0
            nr = r + 1
            nml = 99
        else:
            ln = opt + 2
            e = r + ln - 1
            ok = ln <= fml[sp] and e <= RA
            if ok:
                for q in range(r, e + 1):
                    if h[q] == 0:
                        ok = False
                        break
            if not ok:
                sp -= 1
                continue
            a = STRAIGHT0 + _sbase(ln) + (e + 3) - ln
            for q in range(r, e + 1):
                h[q] -= 1
            nr = r
            nml = ln
        fa[sp] = a
        stack[d] = a
        fr[sp + 1] = nr
        fml[sp + 1] = nml
        facc[sp + 1] = facc[sp] + val[a]
        fopt[sp + 1] = -1
        fa[sp + 1] = -1
        sp += 1


@njit(cache=True)
def search_all(h, rule_array, val, stack, best_stack, best, collect, maxc, out, lens, nout, wi, wf):
    """:func:`_search`, plus one ace-low straight (A-2-3…, 2-3-4…) where the rules allow them."""
    best[0] = -1e18
    best[1] = 0
    nout[0] = 0
    _search(h, 0, 0.0, 0, val, stack, best_stack, best, collect, maxc, out, lens, nout, wi, wf)
    if rule_array[R_ACE_LOW] != 0 and h[R2] > 0:
        for start in range(1, 3):
            p = start
            while p <= 13 and h[POS_RANK[p]] > 0:
                ln = p - start + 1
                if ln >= 3:
                    a = STRAIGHT0 + _sbase(ln) + p - ln
                    for q in range(start, p + 1):
                        h[POS_RANK[q]] -= 1
                    stack[0] = a
                    _search(h, 0, val[a], 1, val, stack, best_stack, best, collect, maxc, out, lens, nout,
                            wi, wf)
                    for q in range(start, p + 1):
                        h[POS_RANK[q]] += 1
                p += 1
    return best[0]


@njit(cache=True)
def workspace():
    """Scratch for one decision: int rows 0-4 search frames, 5 the split being
    built, 6 the best split, 7 misc, 8 straight runs, 9-11 hands (own, unseen,
    after a move); floats 0-15 frame values, 16-17 the best value and size,
    then the strength and value tables.  Allocated once per batch, not per search."""
    return np.zeros((12, 16), dtype=np.int64), np.zeros(18 + 2 * NUM_ACTIONS, dtype=np.float64)


@njit(cache=True)
def best_split(h, rule_array, val, wi, wf):
    """Best split of ``h``: returns its value; its size is ``wf[17]``, its
    combinations ``wi[6, :size]``."""
    return search_all(h, rule_array, val, wi[5], wi[6], wf[16:18], False, 0, wi[7:8], wi[7, 2:3], wi[7, 0:1],
                      wi, wf)

