"""The rules engine: compiled kernels over a flat int32 game state.

One engine, written for speed.  A game is a 1-D ``int32`` array (layout: the
``O_*`` offsets below); a batch of games is a 2-D array whose rows are games,
so the very same kernels serve the readable :class:`sam_env.game.Game`, the
batched stepper and the environments.  A rule set is a small int array
(``R_*``, declared in :mod:`sam_env.rule_params`).  Every kernel is ``numba.njit(cache=True)``; set
``NUMBA_DISABLE_JIT=1`` to run them as plain Python under a debugger.

Rank counts, not cards: suits never decide anything once the deal has been
checked for instant wins (the only suit rule), so hands are 13 counts per seat.

Hidden hands (a seat's view of a game, :meth:`Game.from_view`): seats in the
``O_HIDDEN`` bit mask have unknown cards, so their counts stay 0 and only their
sizes are tracked; kernels never offer them moves or turn rights that depend
on their cards, and the Python layer resolves such turns from the events.

Why one module past 600 lines: the state layout (``O_*``), the legality
kernels, the play and scoring kernels, the deal and the batch kernels call
each other both ways (a deal starts a game, which checks legality, which the
batch stepper and the scoring use), and every other layer reaches them as
``core.NAME``.  Split, they would import each other in a cycle or re-export
one another's names; together they are one compiled engine, as numba caches it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .actions import (ACT_COUNTS, ACT_KIND, ACT_LEN, ACT_NCARDS, ACT_RANK, DQUAD0,
                      K_DQUAD, K_PAIR, K_QUAD, K_SINGLE, K_STRAIGHT, MAX_STRAIGHT,
                      MIN_STRAIGHT, NO_SAM, NUM_ACTIONS, NUM_POSITIONS, PASS, POS_RANK, QUAD0,
                      SAM, SINGLE0, STRAIGHT0)
from .cards import HAND_SIZE as HAND, MAX_PLAYERS, NUM_CARDS, NUM_RANKS as NR, RANK_2 as R2, RANK_K, RANK_T
from .rule_params import SLOTS
from .seeding import rng_below  # the engine's random streams (also core.rng_below for kernels elsewhere)

# ---- rule-set array layout: sam_env.rule_params declares the slots ----------
R_MAX_PLAYERS = SLOTS["max_players"]
R_ACE_LOW = SLOTS["ace_low_straights"]
R_QUAD_CHOPS_TWO = SLOTS["quad_chops_single_two"]
R_DQUAD = SLOTS["double_quad_chops_pair_two"]
R_PASSED_CHOP = SLOTS["passed_can_chop"]
R_FINISH_TWO_FORBIDDEN = SLOTS["finish_with_two"]    # 1: forbidden (the choice's index)
R_BAO_ENFORCE = SLOTS["bao_mot"]                     # 1: enforce
R_INSTANT_MASK = SLOTS["instant_wins"]               # bit p: INSTANT_PATTERNS[p]
R_SAM_DECL = SLOTS["sam_declaration"]
R_CONG = SLOTS["cong"]                               # -1: none (card count)
R_TWO_LEFT = SLOTS["two_left"]
R_QUAD_LEFT = SLOTS["quad_left"]
R_CHOP_TWO = SLOTS["chop_two"]
R_CHOP_QUAD = SLOTS["chop_quad"]
R_SAM_WIN = SLOTS["sam_win"]
R_SAM_FAIL = SLOTS["sam_fail"]
R_SAM_FAIL_BLOCKER = SLOTS["sam_fail_to_blocker"]
R_SAM_DEN = SLOTS["sam_success_den"]
R_INSTANT_WIN = SLOTS["instant_win"]
R_INSTANT_ADDS = SLOTS["instant_win_adds_penalties"]
R_LOWEST_OPENER = SLOTS["first_opener"]              # 1: lowest_card
R_SIZE = len(SLOTS)

# ---- game-state array layout -------------------------------------------------
O_HAND = 0                                  # [seat*13 + rank] cards held
O_SIZE = O_HAND + MAX_PLAYERS * NR          # [seat] cards held
O_PLAYED = O_SIZE + MAX_PLAYERS             # [seat*13 + rank] cards played (public)
O_PASSED = O_PLAYED + MAX_PLAYERS * NR      # [seat] passed in this round
O_SCORE = O_PASSED + MAX_PLAYERS            # [seat] net lá so far
O_N = O_SCORE + MAX_PLAYERS                 # number of players
O_OPENER = O_N + 1
O_TO_ACT = O_OPENER + 1
O_PHASE = O_TO_ACT + 1                      # PH_SAM, PH_PLAY, PH_OVER
O_LAST = O_PHASE + 1                        # seat that made the top play; -1 = a lead is due
O_TOP = O_LAST + 1                          # action on top; -1 = none
O_TOP_CHOP = O_TOP + 1                      # the top was played as a chop
O_CHAIN_VAL = O_TOP_CHOP + 1                # value of the open chop chain
O_CHAIN_FROM = O_CHAIN_VAL + 1              # last chopped seat (pays); -1 = no chain
O_CHAIN_TO = O_CHAIN_FROM + 1               # last chopper (is paid)
O_DECLARER = O_CHAIN_TO + 1                 # Sâm declarer; -1 = none
O_SAM_ASKED = O_DECLARER + 1                # seats asked so far in the Sâm phase
O_DEN_PENDING = O_SAM_ASKED + 1             # seat T whose single may cost đền làng
O_DEN_TRANG = O_DEN_PENDING + 1             # first seat that passed a beatable Sâm play
O_END = O_DEN_TRANG + 1                     # END_* code
O_WINNER = O_END + 1
O_INSTANT = O_WINNER + 1                    # instant-win pattern index; -1 = none
O_DEN = O_INSTANT + 1                       # seat that paid đền; -1 = none
O_HIDDEN = O_DEN + 1                        # bit mask of seats whose cards are unknown
O_NDEC = O_HIDDEN + 1                       # decisions taken
O_NCHOPS = O_NDEC + 1                       # chop chains settled with a value
MAX_CHOPS = 16
O_CHOPS = O_NCHOPS + 1                      # [i*3 + 0/1/2] from, to, amount
HIST = 16                                   # decisions remembered (for observations)
O_HIST = O_CHOPS + 3 * MAX_CHOPS            # ring [(i % HIST)*2 + 0/1] = seat, action of decision i
STATE_SIZE = O_HIST + 2 * HIST              # O_NDEC counts the decisions taken

PH_SAM, PH_PLAY, PH_OVER = 0, 1, 2
END_NONE, END_WON, END_INSTANT, END_SAM_SUCCESS, END_SAM_FAILED, END_DRAW = range(6)
END_NAMES = (None, "won", "instant_win", "sam_success", "sam_failed", "draw")
PHASE_NAMES = ("sam", "play", "over")

# Instant-win pattern indices, RULES §4 priority order.
P_DRAGON, P_FOUR_TWOS, P_SAME_COLOR, P_THREE_TRIPLES, P_FIVE_PAIRS, P_POOR, P_RICH = range(7)

# Reasons a play is refused (see :func:`check_action`).
(OK, ERR_PHASE, ERR_NOT_SAM, ERR_NOT_PLAY, ERR_NOT_HELD, ERR_LEADER_PASS, ERR_NOT_BEAT,
 ERR_DQUAD_ONLY, ERR_PASSED, ERR_BAO_MOT, ERR_FINISH_TWO, ERR_NO_SAM_DECL, ERR_ACE_LOW) = range(13)


# ---- small helpers -------------------------------------------------------------
@njit(cache=True)
def _straight_run_ok(st, seat, rule_array, top, length):
    lo = top - length + 1
    if lo < 1 or (lo < 3 and rule_array[R_ACE_LOW] == 0):
        return False
    for p in range(lo, top + 1):
        if st[O_HAND + seat * NR + POS_RANK[p]] == 0:
            return False
    return True


@njit(cache=True)
def highest_rank(st, seat):
    for r in range(NR - 1, -1, -1):
        if st[O_HAND + seat * NR + r] > 0:
            return r
    return -1


@njit(cache=True)
def _holds(st, seat, a):
    base = O_HAND + seat * NR
    for r in range(NR):
        if st[base + r] < ACT_COUNTS[a, r]:
            return False
    return True


@njit(cache=True)
def beats(st, rule_array, a):
    """Does play ``a`` beat the combination on top (ignoring who plays it)?"""
    top = st[O_TOP]
    if top < 0:
        return ACT_KIND[a] != K_DQUAD
    tk, ak = ACT_KIND[top], ACT_KIND[a]
    if ak == K_DQUAD:
        return rule_array[R_DQUAD] != 0 and tk == K_PAIR and ACT_RANK[top] == R2
    if ak == K_QUAD:
        if tk == K_QUAD:
            return ACT_RANK[a] > ACT_RANK[top]
        return tk == K_SINGLE and ACT_RANK[top] == R2 and rule_array[R_QUAD_CHOPS_TWO] != 0
    if ak != tk:
        return False
    if ak == K_STRAIGHT and ACT_LEN[a] != ACT_LEN[top]:
        return False
    return ACT_RANK[a] > ACT_RANK[top]


@njit(cache=True)
def is_chop(st, a):
    """A quad (or double quad) played over a 2 or a quad."""
    top = st[O_TOP]
    if top < 0:
        return False
    ak = ACT_KIND[a]
    return (ak == K_QUAD or ak == K_DQUAD) and (ACT_KIND[top] == K_QUAD or ACT_RANK[top] == R2)


@njit(cache=True)
def _chop_right(st, rule_array, seat):
    """A seat that passed still gets its turn (RULES §6, passed_can_chop)."""
    if rule_array[R_PASSED_CHOP] == 0:
        return False
    top = st[O_TOP]
    if top < 0:
        return False
    if ACT_KIND[top] == K_SINGLE and ACT_RANK[top] == R2:
        lo = 0
        if rule_array[R_QUAD_CHOPS_TWO] == 0:
            return False
    elif ACT_KIND[top] == K_QUAD and st[O_TOP_CHOP] != 0:
        lo = ACT_RANK[top] + 1
    else:
        return False
    if (st[O_HIDDEN] >> seat) & 1:
        # unknown cards: it may hold a quad; the events say whether it took the turn
        return lo < NR and st[O_SIZE + seat] >= 4
    for r in range(lo, NR):
        if st[O_HAND + seat * NR + r] == 4:
            return True
    return False


@njit(cache=True)
def _stuck(st, rule_array, seat):
    """A leader with no legal lead: a lone 2 it may not finish with.

    A hidden seat is never known to be stuck; :func:`skip_turn` handles it.
    """
    return (rule_array[R_FINISH_TWO_FORBIDDEN] != 0 and st[O_SIZE + seat] == 1
            and st[O_HAND + seat * NR + R2] == 1)


@njit(cache=True)
def skip_turn(st, rule_array):
    """A hidden seat given a turn it may not have had (a chop right, or a lead
    while it might hold a lone 2) did not take it: move the turn on."""
    n = st[O_N]
    s = st[O_TO_ACT]
    if st[O_TOP] < 0:
        for i in range(1, n):
            s2 = (s + i) % n
            if not _stuck(st, rule_array, s2):
                st[O_TO_ACT] = s2
                return
        _end(st, END_DRAW, -1)
    else:
        _advance(st, rule_array, s)


@njit(cache=True)
def _restricted(st, rule_array, seat, a):
    """Rules that forbid an otherwise valid play: finishing with 2s, báo 1 enforced."""
    n = st[O_N]
    if rule_array[R_FINISH_TWO_FORBIDDEN] != 0 and ACT_NCARDS[a] == st[O_SIZE + seat] \
            and K_SINGLE <= ACT_KIND[a] <= K_QUAD and ACT_RANK[a] == R2:
        return ERR_FINISH_TWO
    if rule_array[R_BAO_ENFORCE] != 0 and ACT_KIND[a] == K_SINGLE and st[O_SIZE + (seat + 1) % n] == 1 \
            and not (st[O_HIDDEN] >> seat) & 1 and ACT_RANK[a] != highest_rank(st, seat):
        return ERR_BAO_MOT
    return OK


# ---- legal moves -----------------------------------------------------------------
@njit(cache=True)
def legal_actions(st, rule_array, out):
    """Write the legal actions of the seat to act into ``out``; return their number.

    Order: pass, then the table order (singles … straights … double quads).
    """
    ph = st[O_PHASE]
    if ph == PH_SAM:
        out[0] = SAM
        out[1] = NO_SAM
        return 2
    if ph != PH_PLAY:
        return 0
    seat = st[O_TO_ACT]
    if (st[O_HIDDEN] >> seat) & 1:
        return 0
    k = 0
    top = st[O_TOP]
    base = O_HAND + seat * NR
    if top >= 0:
        out[0] = PASS
        k = 1
        tk = ACT_KIND[top]
        tr = ACT_RANK[top]
        if st[O_PASSED + seat] != 0:
            # only the chop right: quads that beat the top
            for r in range(NR):
                if st[base + r] == 4 and beats(st, rule_array, QUAD0 + r):
                    a = QUAD0 + r
                    if _restricted(st, rule_array, seat, a) == OK:
                        out[k] = a
                        k += 1
            return k
        if tk == K_STRAIGHT:
            ln = ACT_LEN[top]
            for t in range(tr + 1, NUM_POSITIONS + 1):
                if _straight_run_ok(st, seat, rule_array, t, ln):
                    out[k] = STRAIGHT0 + _straight_base(ln) + t - ln
                    k += 1
            return k
        if tk == K_DQUAD:
            return k
        if tk <= K_QUAD:
            need = tk - K_SINGLE + 1
            start = SINGLE0 + (need - 1) * NR
            for r in range(tr + 1, NR):
                if st[base + r] >= need:
                    a = start + r
                    if _restricted(st, rule_array, seat, a) == OK:
                        out[k] = a
                        k += 1
            if tk == K_SINGLE and tr == R2 and rule_array[R_QUAD_CHOPS_TWO] != 0:
                for r in range(NR):
                    if st[base + r] == 4:
                        a = QUAD0 + r
                        if _restricted(st, rule_array, seat, a) == OK:
                            out[k] = a
                            k += 1
            if tk == K_PAIR and tr == R2 and rule_array[R_DQUAD] != 0:
                k = _add_dquads(st, seat, out, k)
        return k
    # a lead: every combination held
    for need in range(1, 5):
        start = SINGLE0 + (need - 1) * NR
        for r in range(NR):
            if st[base + r] >= need:
                a = start + r
                if _restricted(st, rule_array, seat, a) == OK:
                    out[k] = a
                    k += 1
    k = _add_straights(st, rule_array, seat, out, k)
    return k


@njit(cache=True)
def _straight_base(length):
    b = 0
    for ln in range(MIN_STRAIGHT, length):
        b += NUM_POSITIONS - ln + 1
    return b


@njit(cache=True)
def _add_straights(st, rule_array, seat, out, k):
    # bit p of held: position p is held (and may start a straight); a bit mask, not an array, so
    # that a lead allocates nothing
    held = 0
    lo = 1 if rule_array[R_ACE_LOW] != 0 else 3
    for p in range(lo, NUM_POSITIONS + 1):
        if st[O_HAND + seat * NR + POS_RANK[p]] > 0:
            held |= 1 << p
    for ln in range(MIN_STRAIGHT, MAX_STRAIGHT + 1):
        b = STRAIGHT0 + _straight_base(ln)
        full = (1 << ln) - 1
        for t in range(ln, NUM_POSITIONS + 1):
            if (held >> (t - ln + 1)) & full == full:
                out[k] = b + t - ln
                k += 1
    return k


@njit(cache=True)
def _add_dquads(st, seat, out, k):
    base = O_HAND + seat * NR
    a = DQUAD0
    for r1 in range(NR):
        for r2 in range(r1 + 1, NR):
            if st[base + r1] == 4 and st[base + r2] == 4:
                out[k] = a
                k += 1
            a += 1
    return k


@njit(cache=True)
def legal_mask(st, rule_array, mask):
    """``mask[a] = 1`` for each legal action (mask is cleared first)."""
    buf = np.empty(NUM_ACTIONS, dtype=np.int64)
    mask[:] = 0
    k = legal_actions(st, rule_array, buf)
    for i in range(k):
        mask[buf[i]] = 1
    return k


@njit(cache=True)
def check_action(st, rule_array, seat, a):
    """Why ``seat`` may not take action ``a`` now (an ERR_* code), or OK.

    For a hidden seat only what is public is checked: the combination beats
    the top and the seat holds enough cards.
    """
    ph = st[O_PHASE]
    if ph == PH_OVER:
        return ERR_PHASE
    if ph == PH_SAM:
        return OK if (a == SAM or a == NO_SAM) else ERR_NOT_SAM
    if a == SAM or a == NO_SAM:
        return ERR_NO_SAM_DECL
    hidden = (st[O_HIDDEN] >> seat) & 1
    if a == PASS:
        return ERR_LEADER_PASS if st[O_TOP] < 0 else OK
    if ACT_KIND[a] == K_STRAIGHT and rule_array[R_ACE_LOW] == 0 and ACT_RANK[a] - ACT_LEN[a] + 1 < 3:
        return ERR_ACE_LOW  # A-2-3 … runs do not exist without ace_low_straights
    if hidden:
        if ACT_NCARDS[a] > st[O_SIZE + seat]:
            return ERR_NOT_HELD
    elif not _holds(st, seat, a):
        return ERR_NOT_HELD
    if not beats(st, rule_array, a):
        if ACT_KIND[a] == K_DQUAD:
            return ERR_DQUAD_ONLY
        return ERR_NOT_BEAT
    if st[O_PASSED + seat] != 0 and not (ACT_KIND[a] == K_QUAD and rule_array[R_PASSED_CHOP] != 0
                                         and is_chop(st, a)
                                         and (ACT_RANK[st[O_TOP]] == R2 or st[O_TOP_CHOP] != 0)):
        return ERR_PASSED
    return _restricted(st, rule_array, seat, a)


# ---- applying a decision -----------------------------------------------------------
@njit(cache=True)
def _pay(st, frm, to, amount):
    st[O_SCORE + frm] -= amount
    st[O_SCORE + to] += amount


@njit(cache=True)
def _settle_chain(st):
    to = st[O_CHAIN_TO]
    if to >= 0:
        frm = st[O_CHAIN_FROM]
        v = st[O_CHAIN_VAL]
        if v != 0:
            _pay(st, frm, to, v)
            i = st[O_NCHOPS]
            if i < MAX_CHOPS:
                st[O_CHOPS + 3 * i] = frm
                st[O_CHOPS + 3 * i + 1] = to
                st[O_CHOPS + 3 * i + 2] = v
                st[O_NCHOPS] = i + 1
    st[O_CHAIN_TO] = -1
    st[O_CHAIN_FROM] = -1
    st[O_CHAIN_VAL] = 0


@njit(cache=True)
def penalty_counts(st, rule_array, seat):
    """(2s, complete quads) a loser holds: thối heo and thối tứ quý."""
    twos = st[O_HAND + seat * NR + R2]
    quads = 0
    for r in range(NR):
        if st[O_HAND + seat * NR + r] == 4:
            quads += 1
    return twos, quads


@njit(cache=True)
def loser_base(st, rule_array, seat):
    size = st[O_SIZE + seat]
    c = size
    if size == HAND and rule_array[R_CONG] >= 0:
        c = rule_array[R_CONG]
    twos, quads = penalty_counts(st, rule_array, seat)
    return c + rule_array[R_TWO_LEFT] * twos + rule_array[R_QUAD_LEFT] * quads


@njit(cache=True)
def _end(st, code, winner):
    st[O_PHASE] = PH_OVER
    st[O_END] = code
    st[O_WINNER] = winner
    st[O_TO_ACT] = -1


@njit(cache=True)
def _new_round(st, rule_array, leader):
    n = st[O_N]
    if st[O_DECLARER] < 0:
        _settle_chain(st)
    for s in range(n):
        st[O_PASSED + s] = 0
    st[O_TOP] = -1
    st[O_TOP_CHOP] = 0
    st[O_LAST] = -1
    st[O_DEN_PENDING] = -1
    for i in range(n):
        s = (leader + i) % n
        if not _stuck(st, rule_array, s):
            st[O_TO_ACT] = s
            return
    _end(st, END_DRAW, -1)


@njit(cache=True)
def _advance(st, rule_array, cur):
    """Pass the turn on from ``cur``: the next seat in the round, or a new round."""
    n = st[O_N]
    last = st[O_LAST]
    for i in range(1, n + 1):
        s = (cur + i) % n
        if s == last:
            _new_round(st, rule_array, last)
            return
        if st[O_PASSED + s] == 0 or _chop_right(st, rule_array, s):
            st[O_TO_ACT] = s
            return
    _new_round(st, rule_array, last)  # unreachable for a consistent state


@njit(cache=True)
def apply_action(st, rule_array, a):
    """Apply a legal action of the seat to act (check it first: :func:`check_action`)."""
    seat = st[O_TO_ACT]
    n = st[O_N]
    h = O_HIST + (st[O_NDEC] % HIST) * 2
    st[h] = seat
    st[h + 1] = a
    st[O_NDEC] += 1
    if st[O_PHASE] == PH_SAM:
        if a == SAM:
            st[O_DECLARER] = seat
            st[O_PHASE] = PH_PLAY
            st[O_TO_ACT] = seat
            return
        st[O_SAM_ASKED] += 1
        if st[O_SAM_ASKED] >= n:
            st[O_PHASE] = PH_PLAY
            st[O_TO_ACT] = st[O_OPENER]
        else:
            st[O_TO_ACT] = (seat + 1) % n
        return
    den_pending = st[O_DEN_PENDING]
    st[O_DEN_PENDING] = -1
    declarer = st[O_DECLARER]
    if a == PASS:
        if declarer >= 0 and seat != declarer and st[O_DEN_TRANG] < 0 and rule_array[R_SAM_DEN] != 0 \
                and not (st[O_HIDDEN] >> seat) & 1:
            buf = np.empty(NUM_ACTIONS, dtype=np.int64)
            if legal_actions(st, rule_array, buf) > 1:
                st[O_DEN_TRANG] = seat
        st[O_PASSED + seat] = 1
        _advance(st, rule_array, seat)
        return
    # a play
    if rule_array[R_BAO_ENFORCE] == 0 and ACT_KIND[a] == K_SINGLE and st[O_SIZE + (seat + 1) % n] == 1 \
            and not (st[O_HIDDEN] >> seat) & 1 and ACT_RANK[a] != highest_rank(st, seat):
        st[O_DEN_PENDING] = seat
    if is_chop(st, a):
        top = st[O_TOP]
        v = 0
        if ACT_KIND[top] == K_QUAD:
            v = rule_array[R_CHOP_QUAD]
        elif ACT_RANK[top] == R2:
            v = rule_array[R_CHOP_TWO] * ACT_NCARDS[top]
        st[O_CHAIN_VAL] += v
        st[O_CHAIN_FROM] = st[O_LAST]
        st[O_CHAIN_TO] = seat
        st[O_TOP_CHOP] = 1
    else:
        st[O_TOP_CHOP] = 0
    hidden = (st[O_HIDDEN] >> seat) & 1
    for r in range(NR):
        c = ACT_COUNTS[a, r]
        if c:
            if not hidden:
                st[O_HAND + seat * NR + r] -= c
            st[O_PLAYED + seat * NR + r] += c
    st[O_SIZE + seat] -= ACT_NCARDS[a]
    st[O_TOP] = a
    st[O_LAST] = seat
    st[O_PASSED + seat] = 0
    if declarer >= 0 and seat != declarer:
        _end(st, END_SAM_FAILED, seat)
        _score_sam_failed(st, rule_array, declarer, seat)
        return
    if st[O_SIZE + seat] == 0:
        if declarer == seat:
            _end(st, END_SAM_SUCCESS, seat)
            _score_sam_success(st, rule_array, seat)
        else:
            _end(st, END_WON, seat)
            _settle_chain(st)
            _score_win(st, rule_array, seat, den_pending == (seat - 1 + n) % n)
        return
    _advance(st, rule_array, seat)


@njit(cache=True)
def _score_win(st, rule_array, w, den):
    n = st[O_N]
    if (st[O_HIDDEN] & ~(1 << w)) != 0:
        return  # a seat's view cannot score hidden hands
    if den:
        t = (w - 1 + n) % n
        total = 0
        for s in range(n):
            if s != w:
                total += loser_base(st, rule_array, s)
        _pay(st, t, w, total)
        st[O_DEN] = t
        return
    for s in range(n):
        if s != w:
            _pay(st, s, w, loser_base(st, rule_array, s))


@njit(cache=True)
def _score_sam_success(st, rule_array, d):
    n = st[O_N]
    t = st[O_DEN_TRANG]
    if rule_array[R_SAM_DEN] != 0 and t >= 0:
        _pay(st, t, d, rule_array[R_SAM_WIN] * (n - 1))
        st[O_DEN] = t
        return
    for s in range(n):
        if s != d:
            _pay(st, s, d, rule_array[R_SAM_WIN])


@njit(cache=True)
def _score_sam_failed(st, rule_array, d, blocker):
    n = st[O_N]
    if rule_array[R_SAM_FAIL_BLOCKER] != 0:
        _pay(st, d, blocker, rule_array[R_SAM_FAIL] * (n - 1))
        return
    for s in range(n):
        if s != d:
            _pay(st, d, s, rule_array[R_SAM_FAIL])


# ---- the deal ------------------------------------------------------------------
@njit(cache=True)
def instant_pattern(cards, rule_array):
    """Best enabled instant-win pattern of a 10-card hand (card ids), or -1."""
    counts = np.zeros(NR, dtype=np.int64)
    red = 0
    for c in cards:
        counts[c // 4] += 1
        if c % 4 >= 2:
            red += 1
    mask = rule_array[R_INSTANT_MASK]
    if mask & (1 << P_DRAGON):
        run = 0
        best = 0
        lo = 1 if rule_array[R_ACE_LOW] != 0 else 3
        for p in range(lo, NUM_POSITIONS + 1):
            if counts[POS_RANK[p]] == 1:
                run += 1
                best = max(best, run)
            else:
                run = 0
        if best >= HAND:
            return P_DRAGON
    if mask & (1 << P_FOUR_TWOS) and counts[R2] == 4:
        return P_FOUR_TWOS
    if mask & (1 << P_SAME_COLOR) and (red == 0 or red == len(cards)):
        return P_SAME_COLOR
    if mask & (1 << P_THREE_TRIPLES):
        t = 0
        for r in range(NR):
            if counts[r] >= 3:
                t += 1
        if t >= 3:
            return P_THREE_TRIPLES
    if mask & (1 << P_FIVE_PAIRS):
        p = 0
        for r in range(NR):
            p += counts[r] // 2
        if p >= 5:
            return P_FIVE_PAIRS
    if mask & (1 << P_POOR) and counts[RANK_T:RANK_K + 1].sum() == 0:  # no 10, J, Q or K
        return P_POOR
    if mask & (1 << P_RICH) and counts[:RANK_T].sum() == 0:  # no 3-9
        return P_RICH
    return -1


@njit(cache=True)
def start_game(st, rule_array, hands, n, opener, hidden):
    """Fill ``st`` for a new game: ``hands[seat, 0:10]`` card ids (rows of hidden seats unused).

    Checks instant wins (when no seat is hidden) and sets the first decision.
    """
    st[:] = 0
    st[O_N] = n
    st[O_OPENER] = opener
    st[O_HIDDEN] = hidden
    for key in (O_LAST, O_TOP, O_CHAIN_FROM, O_CHAIN_TO, O_DECLARER, O_DEN_PENDING, O_DEN_TRANG,
                O_WINNER, O_INSTANT, O_DEN):
        st[key] = -1
    for s in range(n):
        st[O_SIZE + s] = HAND
        if not (hidden >> s) & 1:
            for c in hands[s]:
                st[O_HAND + s * NR + c // 4] += 1
    if hidden == 0 and rule_array[R_INSTANT_MASK] != 0:
        best, who = 99, -1
        for i in range(n):
            s = (opener + i) % n
            p = instant_pattern(hands[s], rule_array)
            if p >= 0 and p < best:
                best, who = p, s
        if who >= 0:
            st[O_INSTANT] = best
            _end(st, END_INSTANT, who)
            for s in range(n):
                if s != who:
                    v = rule_array[R_INSTANT_WIN]
                    if rule_array[R_INSTANT_ADDS] != 0:
                        twos, quads = penalty_counts(st, rule_array, s)
                        v += rule_array[R_TWO_LEFT] * twos + rule_array[R_QUAD_LEFT] * quads
                    _pay(st, s, who, v)
            return
    st[O_TO_ACT] = opener
    st[O_PHASE] = PH_SAM if rule_array[R_SAM_DECL] != 0 else PH_PLAY


# ---- seeded deals and batches (the convention: sam_env.seeding) --------------------
@njit(cache=True)
def deal(rng, i, n, hands):
    """Shuffle a deck with stream ``i`` and deal 10 cards to each of ``n`` seats."""
    deck = np.arange(NUM_CARDS)
    for j in range(NUM_CARDS - 1, 0, -1):
        k = rng_below(rng, i, j + 1)
        deck[j], deck[k] = deck[k], deck[j]
    for s in range(n):
        for c in range(HAND):
            hands[s, c] = deck[s * HAND + c]


@njit(cache=True)
def lowest_card_seat(hands, n):
    best, who = 99, 0
    for s in range(n):
        for c in hands[s]:
            if c < best:
                best, who = c, s
    return who


@njit(cache=True)
def random_deal(rng, i, rule_array, n, hands):
    """The next deal of stream ``i`` into ``hands``; returns its opener (drawn, or the lowest card)."""
    deal(rng, i, n, hands)
    if rule_array[R_LOWEST_OPENER] != 0:
        return lowest_card_seat(hands, n)
    return rng_below(rng, i, n)


@njit(cache=True)
def new_random_game(st, rule_array, rng, i, n, hands):
    """Deal a fresh game into ``st`` from stream ``i``."""
    start_game(st, rule_array, hands, n, random_deal(rng, i, rule_array, n, hands), 0)


@njit(cache=True)
def new_playable_game(st, rule_array, rng, i, n, hands):
    """Deal until a game needs a decision; return how many instant-win deals were skipped."""
    skipped = 0
    new_random_game(st, rule_array, rng, i, n, hands)
    while st[O_PHASE] == PH_OVER:
        skipped += 1
        new_random_game(st, rule_array, rng, i, n, hands)
    return skipped


@njit(cache=True)
def playable_deals(rng, i, rule_array, n, hands, openers):
    """``hands[d]`` and ``openers[d]``: the next ``len(hands)`` deals of stream ``i`` that need a
    decision (``samloc eval``'s deals); returns the instant-win deals skipped."""
    st = np.zeros(STATE_SIZE, dtype=np.int32)
    skipped = 0
    for d in range(hands.shape[0]):
        skipped += new_playable_game(st, rule_array, rng, i, n, hands[d])
        openers[d] = st[O_OPENER]
    return skipped


@njit(cache=True)
def batch_reset(states, rule_array, rng, n, hands):
    skipped = 0
    for g in range(states.shape[0]):
        skipped += new_playable_game(states[g], rule_array, rng, g, n, hands[g])
    return skipped


@njit(cache=True)
def batch_legal_mask(states, rule_array, masks):
    for g in range(states.shape[0]):
        legal_mask(states[g], rule_array, masks[g])


@njit(cache=True)
def batch_step(states, rule_array, actions, rng, n, hands, rewards, done, autoreset, checked=False):
    """Advance every game by one decision: ``actions[g]`` for the seat to act.

    Returns -1, or the index of the first game whose action was illegal (that
    game is left untouched).  ``rewards[g, seat]`` receives each seat's lá
    that moved in this step; ``done[g]`` whether the game ended.  With
    ``autoreset`` a finished game is replaced at once by a fresh seeded deal
    that needs a decision (deals that are instant wins need none and are
    skipped); its rewards and ``done`` still report the game that ended.
    ``checked``: the caller has checked every action against the legal mask of
    this very state (:func:`legal_mask`), so :func:`check_action` is skipped.
    """
    bad = -1
    for g in range(states.shape[0]):
        st = states[g]
        for s in range(MAX_PLAYERS):
            rewards[g, s] = 0
        done[g] = False
        a = actions[g]
        if not checked and (st[O_PHASE] == PH_OVER or a < 0 or a >= NUM_ACTIONS
                            or check_action(st, rule_array, st[O_TO_ACT], a) != OK):
            if bad < 0:
                bad = g
            continue
        for s in range(MAX_PLAYERS):
            rewards[g, s] = -st[O_SCORE + s]
        apply_action(st, rule_array, a)
        for s in range(MAX_PLAYERS):
            rewards[g, s] += st[O_SCORE + s]
        if st[O_PHASE] == PH_OVER:
            done[g] = True
            if autoreset:
                new_playable_game(st, rule_array, rng, g, n, hands[g])
    return bad


@njit(cache=True)
def batch_play_random(states, rule_array, rng, n, hands, n_games, no_sam):
    """Play ``n_games`` games to the end with uniformly random legal decisions.

    Each slot of the batch plays one game after another; ``no_sam`` answers
    every Sâm question with ``no_sam``.  Every move is checked with
    :func:`check_action` before it is applied.  Returns (games, decisions,
    illegal), where illegal must be 0.  Instant-win deals count as games.
    """
    G = states.shape[0]
    buf = np.empty(NUM_ACTIONS, dtype=np.int64)
    games = 0
    decisions = 0
    illegal = 0
    started = 0
    for g in range(G):
        states[g, O_PHASE] = PH_OVER
    progressed = True
    while progressed:
        progressed = False
        for g in range(G):
            st = states[g]
            while st[O_PHASE] == PH_OVER and started < n_games:
                new_random_game(st, rule_array, rng, g, n, hands[g])
                started += 1
                if st[O_PHASE] == PH_OVER:
                    games += 1
            if st[O_PHASE] == PH_OVER:
                continue
            progressed = True
            if st[O_PHASE] == PH_SAM and no_sam:
                a = NO_SAM
            else:
                k = legal_actions(st, rule_array, buf)
                a = buf[rng_below(rng, g, k)]
            if check_action(st, rule_array, st[O_TO_ACT], a) != OK:
                illegal += 1
            apply_action(st, rule_array, a)
            decisions += 1
            if st[O_PHASE] == PH_OVER:
                games += 1
    return games, decisions, illegal


def new_states(count: int) -> np.ndarray:
    return np.zeros((count, STATE_SIZE), dtype=np.int32)
