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
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sam_env import core
from sam_env.actions import (ACT_COUNTS, ACT_KIND, ACT_LEN, ACT_NCARDS, ACT_RANK, K_DQUAD, K_PAIR,
                             K_QUAD, K_SINGLE, K_STRAIGHT, K_TRIPLE, NO_SAM, NUM_ACTIONS,
                             NUM_POSITIONS, PASS, POS_RANK, SAM, SINGLE0, STRAIGHT0)
from sam_env.core import (NR, O_DECLARER, O_HAND, O_LAST, O_N, O_NDEC, O_PHASE, O_PLAYED, O_SIZE,
                          O_TO_ACT, O_TOP, PH_SAM, R2, R_ACE_LOW, R_CHOP_QUAD, R_CHOP_TWO, R_CONG,
                          R_DQUAD, R_FINISH_TWO_FORBIDDEN, R_QUAD_CHOPS_TWO, R_QUAD_LEFT,
                          R_SAM_FAIL, R_SAM_WIN, R_TWO_LEFT)
from sam_env.cards import RANK_A as RA
from sam_env.game import Game
from sam_env.seeding import GOLDEN_U64, MIX1_U64, MIX2_U64

from .base import Agent, check_seat

# ---- parameters ----------------------------------------------------------------------
#: One row per parameter: (name, default, what it weighs).  The kernels read a float
#: vector in this order (:func:`make_params`) through the ``P_*`` indices below.
PARAMS: tuple[tuple[str, float, str], ...] = (
    ("beta", 0.7, "weight of a combination's strength in the hand value"),
    ("master", 0.1, "extra value of a master (wins the lead back)"),
    ("card", 0.06, "per card shed"),
    ("ctrl", 0.4, "taking the lead with a master while following"),
    ("win", 2.0, "a move that leaves a forced win line"),
    ("danger", 1.0, "pressure to play when an opponent is close to going out"),
    ("shed", 1.2, "… scaled by the lá the played cards would cost if we lose"),
    ("block", 1.2, "leading a combination a short-handed opponent can finish on"),
    ("den", 6.0, "a non-highest single in front of a báo-1 seat (đền làng)"),
    ("sam_margin", 12.0, "lá per opponent a strong hand earns without declaring"),
    ("sam_samples", 160, "Monte Carlo deals for the Sâm decision"),
    ("sam_max_combos", 4, "splits with more combinations are never declared"),
    ("greedy", 0, "1: the greedy variant's moves"),
    ("no_sam", 0, "1: never declare Sâm"),
    ("no_block", 0, "1: no blocking or pressure terms"),
)
_INDEX: dict[str, int] = {name: i for i, (name, _, _) in enumerate(PARAMS)}
DEFAULT_PARAMS: dict[str, float] = {name: default for name, default, _ in PARAMS}

P_BETA = _INDEX["beta"]
P_MASTER = _INDEX["master"]
P_CARD = _INDEX["card"]
P_CTRL = _INDEX["ctrl"]
P_WIN = _INDEX["win"]
P_DANGER = _INDEX["danger"]
P_SHED = _INDEX["shed"]
P_BLOCK = _INDEX["block"]
P_DEN = _INDEX["den"]
P_SAM_MARGIN = _INDEX["sam_margin"]
P_SAM_SAMPLES = _INDEX["sam_samples"]
P_SAM_MAX_COMBOS = _INDEX["sam_max_combos"]
P_GREEDY = _INDEX["greedy"]
P_NO_SAM = _INDEX["no_sam"]
P_NO_BLOCK = _INDEX["no_block"]

VARIANTS: dict[str, dict[str, float]] = {
    "": {},
    "greedy": {"greedy": 1, "no_sam": 1},
    "nosam": {"no_sam": 1},
    "noblock": {"no_block": 1},
    "spend": {"master": 0.0, "ctrl": 0.0},
}


def make_params(**overrides: float) -> np.ndarray:
    """The float parameter vector the kernels read; unknown names are an error."""
    unknown = [k for k in overrides if k not in _INDEX]
    if unknown:
        raise ValueError(f"unknown heuristic parameter {unknown[0]!r} (known: {', '.join(_INDEX)})")
    p = {**DEFAULT_PARAMS, **overrides}
    return np.array([float(p[name]) for name, _, _ in PARAMS], dtype=np.float64)


# ---- what the seat knows -------------------------------------------------------------
@njit(cache=True)
def _own(st, seat, h):
    for r in range(NR):
        h[r] = st[O_HAND + seat * NR + r]


@njit(cache=True)
def _unseen(st, seat, u):
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
def _strengths(u, ru, out, run):
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
    lo = 1 if ru[R_ACE_LOW] != 0 else 3
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
def _search(h, r0, acc0, depth0, val, stack, best_stack, best, collect, maxc, out, lens, nout, wi, wf):
    """Depth-first search over the splits of rank counts ``h`` (restored on return).

    At the lowest rank left, either all its cards form one set, or a straight
    of length 3+ starts there (straights starting at the same rank are taken
    longest first, to avoid listing a split twice).  With ``collect`` every
    split of at most ``maxc`` combinations goes to ``out``; otherwise the best
    by ``val`` goes to ``best``/``best_stack``.  Iterative: numba cannot cache
    recursive functions.  ``wi``/``wf``: scratch (see :func:`_workspace`).
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
                if collect:
                    i = nout[0]
                    if i < out.shape[0]:
                        for j in range(d):
                            out[i, j] = stack[j]
                        lens[i] = d
                        nout[0] = i + 1
                elif facc[sp] > best[0]:
                    best[0] = facc[sp]
                    best[1] = d
                    for j in range(d):
                        best_stack[j] = stack[j]
                sp -= 1
                continue
            if collect and (d >= maxc or nout[0] >= out.shape[0]):
                sp -= 1
                continue
            fopt[sp] = 0
        a = fa[sp]
        if a >= 0:
            if ACT_KIND[a] == K_STRAIGHT:
                for q in range(r, r + ACT_LEN[a]):
                    h[q] += 1
            else:
                h[r] = fc[sp]
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
def _search_all(h, ru, val, stack, best_stack, best, collect, maxc, out, lens, nout, wi, wf):
    """:func:`_search`, plus one ace-low straight (A-2-3…, 2-3-4…) where the rules allow them."""
    best[0] = -1e18
    best[1] = 0
    nout[0] = 0
    _search(h, 0, 0.0, 0, val, stack, best_stack, best, collect, maxc, out, lens, nout, wi, wf)
    if ru[R_ACE_LOW] != 0 and h[R2] > 0:
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
def _workspace():
    """Scratch for one decision: int rows 0-4 search frames, 5 the split being
    built, 6 the best split, 7 misc, 8 straight runs, 9-11 hands (own, unseen,
    after a move); floats 0-15 frame values, 16-17 the best value and size,
    then the strength and value tables.  Allocated once per batch, not per search."""
    return np.zeros((12, 16), dtype=np.int64), np.zeros(18 + 2 * NUM_ACTIONS, dtype=np.float64)


@njit(cache=True)
def _best(h, ru, val, wi, wf):
    """Best split of ``h``: returns its value; its size is ``wf[17]``, its
    combinations ``wi[6, :size]``."""
    return _search_all(h, ru, val, wi[5], wi[6], wf[16:18], False, 0, wi[7:8], wi[7, 2:3], wi[7, 0:1], wi, wf)


# ---- Sâm -----------------------------------------------------------------------------
@njit(cache=True)
def _opp_beats(oh, o, a, ru):
    """Can an opponent holding rank counts ``oh[o]`` beat combination ``a`` (as a lead)?"""
    k = ACT_KIND[a]
    r = ACT_RANK[a]
    if k == K_SINGLE or k == K_PAIR or k == K_TRIPLE or k == K_QUAD:
        need = k - K_SINGLE + 1
        for r2 in range(r + 1, NR):
            if oh[o, r2] >= need:
                return True
        if r == R2 and k == K_SINGLE and ru[R_QUAD_CHOPS_TWO] != 0:
            for r2 in range(NR):
                if oh[o, r2] == 4:
                    return True
        if r == R2 and k == K_PAIR and ru[R_DQUAD] != 0:
            q = 0
            for r2 in range(NR):
                if oh[o, r2] == 4:
                    q += 1
            return q >= 2
        return False
    if k == K_STRAIGHT:
        ln = ACT_LEN[a]
        run = 0
        lo = 1 if ru[R_ACE_LOW] != 0 else 3
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
def _candidate_splits(h, ru, maxc, out, lens):
    """Every split of ``h`` into at most ``maxc`` combinations (rows of ``out``, sizes in
    ``lens``); returns how many.  A Sâm is played out as one of these."""
    nout = np.zeros(1, dtype=np.int64)
    stack = np.zeros(16, dtype=np.int64)
    val = np.zeros(NUM_ACTIONS, dtype=np.float64)
    best = np.zeros(2, dtype=np.float64)
    wi, wf = _workspace()
    _search_all(h.copy(), ru, val, stack, stack.copy(), best, True, maxc, out, lens, nout, wi, wf)
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
def _split_survives(split, size, oh, opp, ru, forbid2):
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
            if _opp_beats(oh, o, a, ru):
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
def sam_success_prob(h, u, n, ru, prm, seed, stop_below):
    """Estimated chance that declaring Sâm with hand ``h`` succeeds (best split).

    Sampling stops early, returning the estimate so far, when after 8, 16, …
    samples it is more than 0.3 below ``stop_below`` (a hand truly at the
    threshold almost never looks that bad); that keeps the decision cheap.
    """
    out = np.zeros((64, 10), dtype=np.int64)
    lens = np.zeros(64, dtype=np.int64)
    nout = _candidate_splits(h, ru, int(prm[P_SAM_MAX_COMBOS]), out, lens)
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
    forbid2 = ru[R_FINISH_TWO_FORBIDDEN] != 0
    for done in range(samples):
        if done >= 8 and done % 8 == 0:
            top = _most(succ, nd)
            if top / done < stop_below - 0.3:
                return top / done
        _deal_opponents(pool, m, need, rng, oh)
        for d in range(nd):
            if _split_survives(out[d], lens[d], oh, opp, ru, forbid2):
                succ[d] += 1
    return _most(succ, nd) / samples


@njit(cache=True)
def _sam_threshold(ru, prm):
    win = ru[R_SAM_WIN]
    fail = ru[R_SAM_FAIL]
    if win + fail <= 0:
        return 2.0
    t = (fail + prm[P_SAM_MARGIN]) / (win + fail)
    return min(max(t, 0.55), 0.97)


@njit(cache=True)
def _salt(st, seat, seed):
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


# ---- one decision --------------------------------------------------------------------------
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
def decide(st, ru, mask, prm, seed):
    """The heuristic's action for the seat to act in state row ``st``."""
    wi, wf = _workspace()
    return _decide(st, ru, mask, prm, seed, wi, wf)


@njit(cache=True)
def _decide(st, ru, mask, prm, seed, wi, wf):
    """One decision, phase by phase: a forced move, the Sâm question, breaking an
    opponent's Sâm, the greedy variant, playing our own Sâm, else the best-scored move."""
    first, k = _legal_count(mask)
    if k <= 1:
        return first
    seat = st[O_TO_ACT]
    if st[O_PHASE] == PH_SAM:
        return _sam_answer(st, ru, prm, seed, seat)
    declarer = st[O_DECLARER]
    if declarer >= 0 and declarer != seat:
        return _break_sam(mask)
    if prm[P_GREEDY] != 0:
        return _greedy(mask, st[O_TOP])
    h, s, val = _hand_tables(st, ru, prm, seat, wi, wf)
    if declarer == seat:
        pick = _sam_lead(h, ru, val, s, mask, wi, wf)
        if pick >= 0:
            return pick
    best_a = _best_scored(st, ru, mask, prm, h, s, val, wi, wf)
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
def _sam_answer(st, ru, prm, seed, seat):
    """Declare Sâm when its estimated success clears the rule set's break-even threshold."""
    if prm[P_NO_SAM] != 0:
        return NO_SAM
    h = np.zeros(NR, dtype=np.int64)
    u = np.zeros(NR, dtype=np.int64)
    _own(st, seat, h)
    _unseen(st, seat, u)
    thr = _sam_threshold(ru, prm)
    p = sam_success_prob(h, u, st[O_N], ru, prm, _salt(st, seat, seed), thr)
    return SAM if p >= thr else NO_SAM


@njit(cache=True)
def _break_sam(mask):
    """Against a declarer any play breaks the Sâm, so the first play will do."""
    for a in range(1, NUM_ACTIONS):
        if mask[a] != 0:
            return a
    return PASS


@njit(cache=True)
def _hand_tables(st, ru, prm, seat, wi, wf):
    """What every move is judged by: our hand (``wi[9]``; unseen cards in ``wi[10]``),
    each combination's strength against the unseen cards, and its value in a split."""
    h = wi[9, :NR]
    u = wi[10, :NR]
    _own(st, seat, h)
    _unseen(st, seat, u)
    s = wf[18:18 + NUM_ACTIONS]
    _strengths(u, ru, s, wi[8])
    val = wf[18 + NUM_ACTIONS:18 + 2 * NUM_ACTIONS]
    for a in range(NUM_ACTIONS):
        val[a] = -1.0 + prm[P_BETA] * s[a] + (prm[P_MASTER] if s[a] >= 1.0 else 0.0)
    return h, s, val


@njit(cache=True)
def _sam_lead(h, ru, val, s, mask, wi, wf):
    """Our Sâm: the strongest legal combination of the best split, so the weakest goes
    last (2s are masters: they go first, never last); -1 when none of it is legal."""
    _best(h, ru, val, wi, wf)
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
def _best_scored(st, ru, mask, prm, h, s, val, wi, wf):
    """The legal move with the best score; going out at once wins outright, and
    passing (when following) scores the hand as it is."""
    seat = st[O_TO_ACT]
    n = st[O_N]
    size = st[O_SIZE + seat]
    noblock = prm[P_NO_BLOCK] != 0
    urg = 0.0 if noblock else _urgency(st, seat, n)
    myhigh = core.highest_rank(st, seat)
    cong = size == 10 and ru[R_CONG] >= 0
    h2 = wi[11, :NR]
    v0 = _best(h, ru, val, wi, wf)
    best_a = PASS
    best_score = v0 if st[O_TOP] >= 0 else -1e18
    for a in range(1, NUM_ACTIONS):
        if mask[a] == 0:
            continue
        if ACT_NCARDS[a] == size:
            return a
        for r in range(NR):
            h2[r] = h[r] - ACT_COUNTS[a, r]
        sc = _move_score(st, ru, prm, a, h2, s, val, urg, cong, myhigh, noblock, wi, wf)
        if sc > best_score:
            best_score = sc
            best_a = a
    return best_a


@njit(cache=True)
def _move_score(st, ru, prm, a, h2, s, val, urg, cong, myhigh, noblock, wi, wf):
    """Playing ``a``: the value of the hand ``h2`` it leaves, the cards shed, then the
    following or leading terms and the báo-1 duty."""
    v = _best(h2, ru, val, wi, wf)
    nm = 0  # combinations of the hand left that an unseen card can beat
    for j in range(int(wf[17])):
        if s[wi[6, j]] < 1.0:
            nm += 1
    nc = ACT_NCARDS[a]
    sc = v + prm[P_CARD] * nc
    if st[O_TOP] >= 0:
        sc = _follow_terms(sc, st, ru, prm, a, s, nm, urg, cong, noblock)
    else:
        sc = _lead_terms(sc, st, ru, prm, a, s, nm, urg, noblock)
    return _bao1_terms(sc, st, prm, a, s, myhigh, noblock)


@njit(cache=True)
def _at_stake(ru, a):
    """The lá ``a``'s cards would cost if still held when someone goes out (2s and quads
    are paid extra): the reason to shed them under pressure."""
    quads = 0
    if ACT_KIND[a] == K_QUAD:
        quads = 1
    elif ACT_KIND[a] == K_DQUAD:
        quads = 2
    return ACT_NCARDS[a] + ru[R_TWO_LEFT] * ACT_COUNTS[a, R2] + ru[R_QUAD_LEFT] * quads


@njit(cache=True)
def _follow_terms(sc, st, ru, prm, a, s, nm, urg, cong, noblock):
    """Following: winning the lead (with a win line after it), chops, pressure to play."""
    seat = st[O_TO_ACT]
    if s[a] >= 1.0:
        sc += prm[P_CTRL]
        if nm <= 1:
            sc += prm[P_WIN]
    if core.is_chop(st, a):
        t = st[O_TOP]
        if ACT_KIND[t] == K_QUAD:
            sc += ru[R_CHOP_QUAD] / 10.0
        else:
            sc += ru[R_CHOP_TWO] * ACT_NCARDS[t] / 10.0
    sc += urg * (prm[P_DANGER] + prm[P_SHED] * _at_stake(ru, a) / 10.0)
    if cong:
        sc += urg * ru[R_CONG] / 10.0
    last = st[O_LAST]
    if not noblock and st[O_SIZE + last] <= 2 and last != seat:
        sc += prm[P_DANGER]  # the seat on top is about to go out: take the lead
    return sc


@njit(cache=True)
def _lead_terms(sc, st, ru, prm, a, s, nm, urg, noblock):
    """Leading: a master then a win line, shedding under pressure, and blocking: no
    weak combination a short-handed opponent could finish on."""
    if (s[a] >= 1.0 and nm <= 1) or nm == 0:
        sc += prm[P_WIN]
    sc += urg * prm[P_SHED] * _at_stake(ru, a) / 10.0
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
def decide_batch(states, ru, masks, prm, seed, out):
    wi, wf = _workspace()
    for i in range(states.shape[0]):
        out[i] = _decide(states[i], ru, masks[i], prm, seed, wi, wf)


class HeuristicAgent(Agent):
    """The strong hand-written baseline (see the module docstring)."""

    needs_obs = False
    replayable = True  # its randomness is salted by the position (_salt), never drawn from a stream

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

    def act_batch(self, states: np.ndarray, ru: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        out = np.empty(states.shape[0], dtype=np.int64)
        decide_batch(states, ru, masks, self.params, self.seed, out)
        return out
