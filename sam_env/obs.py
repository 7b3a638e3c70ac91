"""What one seat may know, as a flat ``float32`` vector (``OBS_VERSION`` 1).

The policy sees a game only through :func:`encode` / :func:`encode_row`.  The
vector is built from the engine's state row, reading only public fields and
the observer's own hand, so it is the same for the full game and for the
seat's view (:meth:`Game.from_view`), and swapping cards between the other
hands never changes it.  It never reads other seats' ``O_HAND``, nor
``O_HIDDEN``, ``O_DEN_PENDING`` or ``O_DEN_TRANG`` (they depend on hidden
cards).

Seats are *relative*: slot ``r`` is seat ``(observer + r) % n``, so slot 0 is
the observer, slot 1 plays next, slot ``n - 1`` is tay trên.  Slots
``r >= n`` stay zero.  Rank counts use a thermometer code: four cells per
rank, cell ``k`` is 1 when the count is more than ``k``.  "one-hot R" below is
a one-hot over relative seats (all zero for "nobody").  Amounts of lá are
divided by ``LA_SCALE`` = 20 and clipped to [0, 10] (scores: [-10, 10]).

=====  ========================  ====  ==============================================
start  name                      size  contents
=====  ========================  ====  ==============================================
0      ``hand``                    52  own hand, 13 ranks × thermometer 4
52     ``unseen``                  52  cards neither held nor played (other hands, undealt)
104    ``played``                 260  cards played, per relative seat, 5 × 13 × 4
364    ``cards_left``              55  cards held per relative seat, one-hot 0…10
419    ``bao_1``                    5  relative seat holds exactly one card
424    ``present``                  5  relative seat is at the table (r < n)
429    ``passed``                   5  relative seat passed in this round
434    ``to_act``                   5  one-hot R of the seat to act
439    ``opener``                   5  one-hot R of the opener
444    ``phase``                    3  one-hot sam, play, over
447    ``declarer``                 6  [0] nobody declared Sâm, [1+r] relative declarer
453    ``top_kind``                 7  none (a lead is due), single, pair, triple,
                                       quad, straight, double quad
460    ``top_rank``                15  one-hot ACT_RANK of the top (straights: top
                                       position 1…14)
475    ``top_cards``               13  rank counts of the top / 4
488    ``top_by``                   5  one-hot R of the seat that played the top
493    ``top_chop``                 1  the top was played as a chop
494    ``chain``                   12  open chop chain: [0] value, [1] open,
                                       [2:7] one-hot R chopped, [7:12] one-hot R chopper
506    ``scores``                   5  net lá so far per relative seat (chops settled)
511    ``progress``                 1  decisions taken / 100, clipped to 1
512    ``history``                448  last 16 decisions, most recent first, 28 each:
                                       [0] present, [1:6] one-hot R, [6:15] kind
                                       (pass, sam, no_sam, single … double quad),
                                       [15:28] rank counts / 4
960    ``rules``                   29  rule parameters, see ``RULE_FEATURES``
989    ``players``                  4  one-hot player count 2…5
=====  ========================  ====  ==============================================

``OBS_SIZE`` = 993.  The perfect-information vector of :func:`encode_full`
(for a critic only, never a policy input) appends ``FULL_EXTRA`` = 260 cells:
every relative seat's hand, 5 × 13 × 4.

Changing the layout changes every trained policy: bump ``OBS_VERSION``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import core
from .actions import ACT_COUNTS, ACT_KIND, ACT_RANK, K_SINGLE, NUM_ACTIONS
from .core import (HAND, MAX_PLAYERS, NR, O_CHAIN_FROM, O_CHAIN_TO, O_CHAIN_VAL, O_DECLARER,
                   O_HAND, O_HIST, O_LAST, O_N, O_NDEC, O_OPENER, O_PASSED, O_PHASE, O_PLAYED,
                   O_SCORE, O_SIZE, O_TO_ACT, O_TOP, O_TOP_CHOP, HIST)
from .rules import INSTANT_PATTERNS

OBS_VERSION = 1

#: Lá per unit of value: the observation's amounts, the trainer's reward scale
#: (``training.config.EnvConfig.reward_scale``) and the search's values in lá.
LA_SCALE = 20.0
AMOUNT_CLIP = 10.0
_LA = f"/{LA_SCALE:g}"   # the suffix of a rule feature that is an amount of lá ("/20")

HIST_ENTRY = 28
# The rules block, one cell per name in this order ("x=v": parameter x is v;
# "x/20": the amount x in lá / LA_SCALE); the kernel writes each at its RF_* offset.
RULE_FEATURES = (
    "ace_low_straights", "quad_chops_single_two", "double_quad_chops_pair_two", "passed_can_chop",
    "finish_with_two=forbidden", "bao_mot=enforce",
    *(f"instant:{p}" for p in INSTANT_PATTERNS),
    "sam_declaration", "cong defined", "cong" + _LA, "two_left" + _LA, "quad_left" + _LA,
    "chop_two" + _LA, "chop_quad" + _LA, "sam_win" + _LA, "sam_fail" + _LA, "sam_fail_to_blocker",
    "sam_success_den", "instant_win" + _LA, "instant_win_adds_penalties", "first_opener=lowest_card",
    f"max_players/{MAX_PLAYERS}", f"hand size/{HAND}",
)

# (name, size) in order; the offsets below are derived from this table.
SECTIONS = (
    ("hand", NR * 4), ("unseen", NR * 4), ("played", MAX_PLAYERS * NR * 4),
    ("cards_left", MAX_PLAYERS * (HAND + 1)), ("bao_1", MAX_PLAYERS), ("present", MAX_PLAYERS),
    ("passed", MAX_PLAYERS), ("to_act", MAX_PLAYERS), ("opener", MAX_PLAYERS), ("phase", 3),
    ("declarer", 1 + MAX_PLAYERS), ("top_kind", 7), ("top_rank", 15), ("top_cards", NR),
    ("top_by", MAX_PLAYERS), ("top_chop", 1), ("chain", 2 + 2 * MAX_PLAYERS),
    ("scores", MAX_PLAYERS), ("progress", 1), ("history", HIST * HIST_ENTRY),
    ("rules", len(RULE_FEATURES)), ("players", 4),
)


def _offsets() -> dict[str, int]:
    out, at = {}, 0
    for name, size in SECTIONS:
        out[name] = at
        at += size
    out["_end"] = at
    return out


OFFSETS = _offsets()
OBS_SIZE = OFFSETS["_end"]
FULL_EXTRA = MAX_PLAYERS * NR * 4
FULL_SIZE = OBS_SIZE + FULL_EXTRA

F_HAND = OFFSETS["hand"]
F_UNSEEN = OFFSETS["unseen"]
F_PLAYED = OFFSETS["played"]
F_LEFT = OFFSETS["cards_left"]
F_BAO = OFFSETS["bao_1"]
F_PRESENT = OFFSETS["present"]
F_PASSED = OFFSETS["passed"]
F_TO_ACT = OFFSETS["to_act"]
F_OPENER = OFFSETS["opener"]
F_PHASE = OFFSETS["phase"]
F_DECL = OFFSETS["declarer"]
F_TOP_KIND = OFFSETS["top_kind"]
F_TOP_RANK = OFFSETS["top_rank"]
F_TOP_CARDS = OFFSETS["top_cards"]
F_TOP_BY = OFFSETS["top_by"]
F_TOP_CHOP = OFFSETS["top_chop"]
F_CHAIN = OFFSETS["chain"]
F_SCORES = OFFSETS["scores"]
F_PROGRESS = OFFSETS["progress"]
F_HIST = OFFSETS["history"]
F_RULES = OFFSETS["rules"]
F_PLAYERS = OFFSETS["players"]


def rule_offset(name: str) -> int:
    """Where rule feature ``name`` (one of ``RULE_FEATURES``) sits in the vector."""
    return F_RULES + RULE_FEATURES.index(name)


RF_ACE_LOW = rule_offset("ace_low_straights")
RF_QUAD_CHOPS_TWO = rule_offset("quad_chops_single_two")
RF_DQUAD = rule_offset("double_quad_chops_pair_two")
RF_PASSED_CHOP = rule_offset("passed_can_chop")
RF_FINISH_TWO_FORBIDDEN = rule_offset("finish_with_two=forbidden")
RF_BAO_ENFORCE = rule_offset("bao_mot=enforce")
RF_INSTANT = rule_offset("instant:" + INSTANT_PATTERNS[0])  # pattern p (bit p of the mask) at RF_INSTANT + p
RF_SAM_DECL = rule_offset("sam_declaration")
RF_CONG_DEFINED = rule_offset("cong defined")
RF_CONG = rule_offset("cong" + _LA)
RF_TWO_LEFT = rule_offset("two_left" + _LA)
RF_QUAD_LEFT = rule_offset("quad_left" + _LA)
RF_CHOP_TWO = rule_offset("chop_two" + _LA)
RF_CHOP_QUAD = rule_offset("chop_quad" + _LA)
RF_SAM_WIN = rule_offset("sam_win" + _LA)
RF_SAM_FAIL = rule_offset("sam_fail" + _LA)
RF_SAM_FAIL_BLOCKER = rule_offset("sam_fail_to_blocker")
RF_SAM_DEN = rule_offset("sam_success_den")
RF_INSTANT_WIN = rule_offset("instant_win" + _LA)
RF_INSTANT_ADDS = rule_offset("instant_win_adds_penalties")
RF_LOWEST_OPENER = rule_offset("first_opener=lowest_card")
RF_MAX_PLAYERS = rule_offset(f"max_players/{MAX_PLAYERS}")
RF_HAND_SIZE = rule_offset(f"hand size/{HAND}")
N_INSTANT = len(INSTANT_PATTERNS)


def obs_bounds() -> tuple[np.ndarray, np.ndarray]:
    """Exact per-cell ``(low, high)`` of the vector (for a Gymnasium ``Box``)."""
    low = np.zeros(OBS_SIZE, dtype=np.float32)
    high = np.ones(OBS_SIZE, dtype=np.float32)
    high[F_CHAIN] = AMOUNT_CLIP
    low[F_SCORES:F_SCORES + MAX_PLAYERS] = -AMOUNT_CLIP
    high[F_SCORES:F_SCORES + MAX_PLAYERS] = AMOUNT_CLIP
    for i, name in enumerate(RULE_FEATURES):
        if name.endswith(_LA):
            high[F_RULES + i] = AMOUNT_CLIP
    return low, high


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
def encode_row(st, ru, seat, out):
    """Write seat ``seat``'s observation of state row ``st`` into ``out[:OBS_SIZE]``."""
    n = st[O_N]
    for i in range(OBS_SIZE):
        out[i] = 0.0
    # own hand, cards played, unseen cards
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
    # per seat
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
    # the combination on top
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
    # the open chop chain
    if st[O_CHAIN_TO] >= 0:
        out[F_CHAIN] = _amount(st[O_CHAIN_VAL])
        out[F_CHAIN + 1] = 1.0
        if st[O_CHAIN_FROM] >= 0:
            out[F_CHAIN + 2 + _rel(st[O_CHAIN_FROM], seat, n)] = 1.0
        out[F_CHAIN + 2 + MAX_PLAYERS + _rel(st[O_CHAIN_TO], seat, n)] = 1.0
    nd = st[O_NDEC]
    out[F_PROGRESS] = min(nd, 100) / 100.0
    # the last HIST decisions, most recent first
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
    # rule parameters and player count
    out[RF_ACE_LOW] = 1.0 if ru[core.R_ACE_LOW] else 0.0
    out[RF_QUAD_CHOPS_TWO] = 1.0 if ru[core.R_QUAD_CHOPS_TWO] else 0.0
    out[RF_DQUAD] = 1.0 if ru[core.R_DQUAD] else 0.0
    out[RF_PASSED_CHOP] = 1.0 if ru[core.R_PASSED_CHOP] else 0.0
    out[RF_FINISH_TWO_FORBIDDEN] = 1.0 if ru[core.R_FINISH_TWO_FORBIDDEN] else 0.0
    out[RF_BAO_ENFORCE] = 1.0 if ru[core.R_BAO_ENFORCE] else 0.0
    m = ru[core.R_INSTANT_MASK]
    for p in range(N_INSTANT):
        out[RF_INSTANT + p] = 1.0 if (m >> p) & 1 else 0.0
    out[RF_SAM_DECL] = 1.0 if ru[core.R_SAM_DECL] else 0.0
    if ru[core.R_CONG] >= 0:
        out[RF_CONG_DEFINED] = 1.0
        out[RF_CONG] = _amount(ru[core.R_CONG])
    out[RF_TWO_LEFT] = _amount(ru[core.R_TWO_LEFT])
    out[RF_QUAD_LEFT] = _amount(ru[core.R_QUAD_LEFT])
    out[RF_CHOP_TWO] = _amount(ru[core.R_CHOP_TWO])
    out[RF_CHOP_QUAD] = _amount(ru[core.R_CHOP_QUAD])
    out[RF_SAM_WIN] = _amount(ru[core.R_SAM_WIN])
    out[RF_SAM_FAIL] = _amount(ru[core.R_SAM_FAIL])
    out[RF_SAM_FAIL_BLOCKER] = 1.0 if ru[core.R_SAM_FAIL_BLOCKER] else 0.0
    out[RF_SAM_DEN] = 1.0 if ru[core.R_SAM_DEN] else 0.0
    out[RF_INSTANT_WIN] = _amount(ru[core.R_INSTANT_WIN])
    out[RF_INSTANT_ADDS] = 1.0 if ru[core.R_INSTANT_ADDS] else 0.0
    out[RF_LOWEST_OPENER] = 1.0 if ru[core.R_LOWEST_OPENER] else 0.0
    out[RF_MAX_PLAYERS] = ru[core.R_MAX_PLAYERS] / MAX_PLAYERS
    out[RF_HAND_SIZE] = 1.0  # HAND cards dealt / HAND: room for other deal sizes
    out[F_PLAYERS + n - 2] = 1.0


@njit(cache=True)
def encode_batch(states, ru, seats, out):
    """``out[g] = encode_row(states[g], ru, seats[g])`` for every game ``g``."""
    for g in range(states.shape[0]):
        encode_row(states[g], ru, seats[g], out[g])


def encode_to_act(states: np.ndarray, ru: np.ndarray) -> np.ndarray:
    """``float32[N, OBS_SIZE]``: every engine row's observation for the seat to act there."""
    out = np.zeros((states.shape[0], OBS_SIZE), dtype=np.float32)
    encode_batch(states, ru, states[:, core.O_TO_ACT].astype(np.int64), out)
    return out


@njit(cache=True)
def encode_full_row(st, ru, seat, out):
    """Perfect information for a critic: the observation, then every relative seat's hand."""
    encode_row(st, ru, seat, out)
    _hands(st, seat, out, OBS_SIZE)


@njit(cache=True)
def _hands(st, seat, out, at):
    """Every seat's hand, relative to ``seat``, as thermometers in ``out[at:at + FULL_EXTRA]``."""
    n = st[O_N]
    for i in range(at, at + FULL_EXTRA):
        out[i] = 0
    for s in range(n):
        base = at + _rel(s, seat, n) * NR * 4
        for r in range(NR):
            _therm(out, base + r * 4, st[O_HAND + s * NR + r])


@njit(cache=True)
def encode_full_batch(states, ru, seats, out):
    for g in range(states.shape[0]):
        encode_full_row(states[g], ru, seats[g], out[g])


@njit(cache=True)
def encode_hidden_batch(states, seats, out):
    """``out[g]`` = the last ``FULL_EXTRA`` entries of :func:`encode_full_row` (any numeric dtype).

    The trainer ships these 0/1 entries as uint8 next to the observation, a
    quarter of the bytes of the float32 perfect-information vector.
    """
    for g in range(states.shape[0]):
        _hands(states[g], seats[g], out[g], 0)


@njit(cache=True)
def encode_mask_batch(states, ru, obs, masks, seats):
    """Observation and legal mask of the seat to act, for every game (one pass over the batch)."""
    buf = np.empty(NUM_ACTIONS, dtype=np.int64)
    for g in range(states.shape[0]):
        st = states[g]
        s = st[O_TO_ACT]
        seats[g] = s
        encode_row(st, ru, s if s >= 0 else 0, obs[g])
        m = masks[g]
        m[:] = 0
        k = core.legal_actions(st, ru, buf)
        for i in range(k):
            m[buf[i]] = 1


# ---- the readable API ------------------------------------------------------------------
def _check_seat(game, seat: int) -> int:
    if isinstance(seat, bool) or not isinstance(seat, (int, np.integer)) or not 0 <= seat < game.players:
        raise ValueError(f"seat must be a seat from 0 to {game.players - 1}, not {seat!r}")
    return int(seat)


def encode(game, seat: int) -> np.ndarray:
    """``float32[OBS_SIZE]``: what ``seat`` knows of ``game`` (a :class:`~sam_env.game.Game`)."""
    seat = _check_seat(game, seat)
    if game.view_seat is not None and game.view_seat != seat:
        raise ValueError(f"this game is seat {game.view_seat}'s view; it cannot be observed by seat {seat}")
    out = np.empty(OBS_SIZE, dtype=np.float32)
    encode_row(game.state, game.rules_array, seat, out)
    return out


def encode_full(game, seat: int) -> np.ndarray:
    """``float32[FULL_SIZE]``: :func:`encode` plus every hand, for a critic (never a policy input)."""
    seat = _check_seat(game, seat)
    if game.view_seat is not None:
        raise ValueError("a seat's view has hidden hands: it has no perfect-information vector")
    out = np.empty(FULL_SIZE, dtype=np.float32)
    encode_full_row(game.state, game.rules_array, seat, out)
    return out


def describe(obs: np.ndarray) -> dict[str, np.ndarray]:
    """Split a vector into its named sections (for debugging and docs)."""
    return {name: obs[OFFSETS[name]:OFFSETS[name] + size] for name, size in SECTIONS}


def describe_rules(obs: np.ndarray) -> dict[str, float]:
    """The rules block by feature name (``RULE_FEATURES``)."""
    return {name: float(obs[F_RULES + i]) for i, name in enumerate(RULE_FEATURES)}
