"""Today's observation encoder (commit 8dd9a3c), kept verbatim as the reference the fast batched
encoder of :mod:`sam_env.obs` must match bit for bit (``tests/test_obs_fast.py``).

Only the kernels are copied; the layout constants (offsets, action tables, rules-block spec) are the
package's, since a layout change must change both.  The reference legal mask is the brute force over
:func:`sam_env.core.check_action`, independent of ``legal_actions``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sam_env.actions import ACT_COUNTS, ACT_KIND, ACT_RANK, K_SINGLE, NUM_ACTIONS
from sam_env.core import (HAND, HIST, MAX_PLAYERS, NR, O_CHAIN_FROM, O_CHAIN_TO, O_CHAIN_VAL, O_DECLARER,
                          O_HAND, O_HIST, O_LAST, O_N, O_NDEC, O_OPENER, O_PASSED, O_PHASE, O_PLAYED,
                          O_SCORE, O_SIZE, O_TO_ACT, O_TOP, O_TOP_CHOP, OK, PH_OVER, check_action)
from sam_env.obs import OBS_SIZE, RULE_ARG, RULE_KIND, RULE_SLOT
from sam_env.obs_layout import (AMOUNT_CLIP, F_BAO, F_CHAIN, F_DECL, F_HAND, F_HIST, F_LEFT, F_OPENER,
                                F_PASSED, F_PHASE, F_PLAYED, F_PLAYERS, F_PRESENT, F_PROGRESS, F_RULES,
                                F_SCORES,
                                F_TO_ACT, F_TOP_BY, F_TOP_CARDS, F_TOP_CHOP, F_TOP_KIND, F_TOP_RANK, F_UNSEEN,
                                HIST_ENTRY, LA_SCALE)
from sam_env.rule_params import AMOUNT, BIT, CONST, DEFINED, EQUALS, FLAG


# ---- kernels -----------------------------------------------------------------------
@njit(cache=True, inline="always")
def _therm(out, at, count):
    for k in range(4):
        out[at + k] = 1.0 if count > k else 0.0


@njit(cache=True, inline="always")
def _amount(v):
    x = v / LA_SCALE
    if x > AMOUNT_CLIP:
        return AMOUNT_CLIP
    if x < -AMOUNT_CLIP:
        return -AMOUNT_CLIP
    return x


@njit(cache=True, inline="always")
def _rel(s, seat, n):
    return (s - seat + n) % n


@njit(cache=True)
def write_rules(rule_array, slot, kind, arg, out, at):
    """Write the rules block of rule array ``rule_array`` at ``out[at:]``, cell ``i`` being ``kind[i]`` of
    ``rule_array[slot[i]]`` with ``arg[i]`` (the kinds of :mod:`sam_env.rule_params`)."""
    for i in range(slot.shape[0]):
        k = kind[i]
        if k == CONST:
            out[at + i] = arg[i]
            continue
        v = rule_array[slot[i]]
        if k == FLAG:
            x = 1.0 if v != 0 else 0.0
        elif k == EQUALS:
            x = 1.0 if v == arg[i] else 0.0
        elif k == BIT:
            x = 1.0 if (v >> arg[i]) & 1 else 0.0
        elif k == DEFINED:
            x = 1.0 if v >= 0 else 0.0
        elif k == AMOUNT:
            x = _amount(v) if v >= 0 else 0.0
        else:  # RATIO
            x = v / arg[i]
        out[at + i] = x


@njit(cache=True)
def _cards(st, seat, n, out):
    """Own hand, cards played, unseen cards."""
    for r in range(NR):
        own = st[O_HAND + seat * NR + r]
        _therm(out, F_HAND + r * 4, own)
        gone = own
        for s in range(n):
            c = st[O_PLAYED + s * NR + r]
            gone += c
            if c:
                _therm(out, F_PLAYED + (_rel(s, seat, n) * NR + r) * 4, c)
        _therm(out, F_UNSEEN + r * 4, 4 - gone)


@njit(cache=True)
def _seats(st, seat, n, out):
    """Per seat: cards left, báo 1, present, passed, score; who acts, opens, declared."""
    for s in range(n):
        r = _rel(s, seat, n)
        size = st[O_SIZE + s]
        out[F_LEFT + r * (HAND + 1) + size] = 1.0
        if size == 1:
            out[F_BAO + r] = 1.0
        out[F_PRESENT + r] = 1.0
        if st[O_PASSED + s]:
            out[F_PASSED + r] = 1.0
        out[F_SCORES + r] = _amount(st[O_SCORE + s])
    t = st[O_TO_ACT]
    if t >= 0:
        out[F_TO_ACT + _rel(t, seat, n)] = 1.0
    out[F_OPENER + _rel(st[O_OPENER], seat, n)] = 1.0
    out[F_PHASE + st[O_PHASE]] = 1.0
    d = st[O_DECLARER]
    if d < 0:
        out[F_DECL] = 1.0
    else:
        out[F_DECL + 1 + _rel(d, seat, n)] = 1.0


@njit(cache=True)
def _top(st, seat, n, out):
    """The combination on top and the open chop chain."""
    top = st[O_TOP]
    if top < 0:
        out[F_TOP_KIND] = 1.0
    else:
        out[F_TOP_KIND + ACT_KIND[top] - K_SINGLE + 1] = 1.0
        out[F_TOP_RANK + ACT_RANK[top]] = 1.0
        for r in range(NR):
            out[F_TOP_CARDS + r] = ACT_COUNTS[top, r] * 0.25
        last = st[O_LAST]
        if last >= 0:
            out[F_TOP_BY + _rel(last, seat, n)] = 1.0
        if st[O_TOP_CHOP]:
            out[F_TOP_CHOP] = 1.0
    if st[O_CHAIN_TO] >= 0:
        out[F_CHAIN] = _amount(st[O_CHAIN_VAL])
        out[F_CHAIN + 1] = 1.0
        if st[O_CHAIN_FROM] >= 0:
            out[F_CHAIN + 2 + _rel(st[O_CHAIN_FROM], seat, n)] = 1.0
        out[F_CHAIN + 2 + MAX_PLAYERS + _rel(st[O_CHAIN_TO], seat, n)] = 1.0


@njit(cache=True)
def _history(st, seat, n, out):
    """Progress, and the last HIST decisions, most recent first."""
    nd = st[O_NDEC]
    out[F_PROGRESS] = min(nd, 100) / 100.0
    k = min(nd, HIST)
    for j in range(k):
        i = nd - 1 - j
        h = O_HIST + (i % HIST) * 2
        a = st[h + 1]
        at = F_HIST + j * HIST_ENTRY
        out[at] = 1.0
        out[at + 1 + _rel(st[h], seat, n)] = 1.0
        out[at + 6 + ACT_KIND[a]] = 1.0
        for r in range(NR):
            c = ACT_COUNTS[a, r]
            if c:
                out[at + 15 + r] = c * 0.25


@njit(cache=True)
def encode_row(st, rule_array, seat, out):
    """Write seat ``seat``'s observation of state row ``st`` into ``out[:OBS_SIZE]``."""
    n = st[O_N]
    for i in range(OBS_SIZE):
        out[i] = 0.0
    _cards(st, seat, n, out)
    _seats(st, seat, n, out)
    _top(st, seat, n, out)
    _history(st, seat, n, out)
    write_rules(rule_array, RULE_SLOT, RULE_KIND, RULE_ARG, out, F_RULES)
    out[F_PLAYERS + n - 2] = 1.0


@njit(cache=True)
def encode_batch(states, rule_array, seats, out):
    """``out[g] = encode_row(states[g], rule_array, seats[g])`` for every game ``g``."""
    for g in range(states.shape[0]):
        encode_row(states[g], rule_array, seats[g], out[g])


@njit(cache=True)
def reference_mask_batch(states, rule_array, obs, masks, seats):
    """Today's ``encode_mask_batch``, the mask by brute force: every action ``check_action`` accepts."""
    for g in range(states.shape[0]):
        st = states[g]
        s = st[O_TO_ACT]
        seats[g] = s
        encode_row(st, rule_array, s if s >= 0 else 0, obs[g])
        m = masks[g]
        m[:] = 0
        if st[O_PHASE] != PH_OVER and s >= 0:
            for a in range(NUM_ACTIONS):
                if check_action(st, rule_array, s, a) == OK:
                    m[a] = 1
