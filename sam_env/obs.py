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
divided by ``LA_SCALE`` = 20 and clipped to [0, 10] (scores: [-10, 10]).  The table
below is generated from :data:`sam_env.obs_layout.SECTIONS`, where the layout is declared.

{LAYOUT}

``OBS_SIZE`` = {OBS_SIZE}.  The perfect-information vector of :func:`encode_full`
(for a critic only, never a policy input) appends ``FULL_EXTRA`` = 260 cells:
every relative seat's hand, 5 × 13 × 4.

Changing the layout changes every trained policy: bump ``OBS_VERSION``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .actions import ACT_COUNTS, ACT_KIND, ACT_RANK, K_SINGLE, NUM_ACTIONS
from .cards import MIN_PLAYERS
from .core import (HAND, HIST, MAX_PLAYERS, NR, O_CHAIN_FROM, O_CHAIN_TO, O_CHAIN_VAL, O_DECLARER,
                   O_HAND, O_HIST, O_LAST, O_N, O_NDEC, O_OPENER, O_PASSED, O_PHASE, O_PLAYED,
                   O_SCORE, O_SIZE, O_TO_ACT, O_TOP, O_TOP_CHOP, legal_actions)
from .obs_layout import (AMOUNT_CLIP, F_BAO, F_CHAIN, F_DECL, F_HAND, F_HIST, F_LEFT, F_OPENER, F_PASSED,
                         F_PHASE, F_PLAYED, F_PLAYERS, F_PRESENT, F_PROGRESS, F_RULES, F_SCORES, F_TO_ACT,
                         F_TOP_BY, F_TOP_CARDS, F_TOP_CHOP, F_TOP_KIND, F_TOP_RANK, F_UNSEEN, HIST_ENTRY,
                         LA_SCALE, OBS_SIZE, OFFSETS, RULE_FEATURES, SECTIONS, layout_table, obs_bounds,
                         rule_cells, rule_offset, view)
from .rule_params import AMOUNT, BIT, CONST, DEFINED, EQUALS, FLAG

if __doc__:  # None under python -OO
    __doc__ = __doc__.replace("{LAYOUT}", layout_table()).replace("{OBS_SIZE}", str(OBS_SIZE))

__all__ = ["AMOUNT_CLIP", "FULL_EXTRA", "FULL_SIZE", "HIST_ENTRY", "LA_SCALE", "OBS_SIZE", "OBS_VERSION",
           "OFFSETS", "RULE_FEATURES", "SECTIONS", "describe", "describe_rules", "encode", "encode_batch",
           "encode_full", "encode_full_batch", "encode_full_row", "encode_hidden_batch", "encode_mask_batch",
           "encode_row", "encode_to_act", "obs_bounds", "rule_offset", "rule_spec", "view", "write_rules"]

OBS_VERSION = 1
FULL_EXTRA = MAX_PLAYERS * NR * 4
FULL_SIZE = OBS_SIZE + FULL_EXTRA


def rule_spec(cells: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rules block as three int arrays for :func:`write_rules`: each cell's kernel slot (-1: none),
    kind and argument (``cells``: :func:`sam_env.obs_layout.rule_cells`)."""
    return (np.array([-1 if p is None else p.slot for p, _ in cells], dtype=np.int64),
            np.array([c.kind for _, c in cells], dtype=np.int64),
            np.array([c.arg for _, c in cells], dtype=np.int64))


RULE_SLOT, RULE_KIND, RULE_ARG = rule_spec(rule_cells())


# ---- kernels -----------------------------------------------------------------------
@njit(cache=True, inline="always")
def _amount(v):
    x = v / LA_SCALE
    if x > AMOUNT_CLIP:
        return AMOUNT_CLIP
    if x < -AMOUNT_CLIP:
        return -AMOUNT_CLIP
    return x


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


# Tables for the encoder: a thermometer per count, and each action's history entry (present, kind
# one-hot, rank counts / 4; the seat cells are left zero), whose counts are also the top's cards.
THERM = np.array([1.0 if c > k else 0.0 for c in range(5) for k in range(4)],
                 dtype=np.float32)  # count c at 4c
_KIND_AT, _CARDS_AT = 6, 15  # where a history entry's kind one-hot and rank counts start
HIST_ROW = np.zeros((NUM_ACTIONS, HIST_ENTRY), dtype=np.float32)
HIST_ROW[:, 0] = 1.0
HIST_ROW[np.arange(NUM_ACTIONS), _KIND_AT + ACT_KIND] = 1.0
HIST_ROW[:, _CARDS_AT:] = ACT_COUNTS * 0.25
HIST_FLAT = HIST_ROW.ravel()
assert HIST & (HIST - 1) == 0, "the history ring's index is masked, so HIST must be a power of two"


@njit(cache=True, inline="always")
def _rel(s, seat, n):
    """Relative seat of ``s`` (``(s - seat) % n`` for s in [-1, n), without a division)."""
    r = s - seat + n
    return r - n if r >= n else r


@intrinsic
def _copy_cells(typingctx, dst, at, src, start, count):
    """``dst[at:at + count] = src[start:start + count]`` as one ``memcpy`` of float32 cells, unchecked: a
    constant ``count`` becomes a few vector moves where a loop of cells compiles to one store each."""
    if not all(isinstance(a, types.Array) and a.layout == "C" and a.dtype == types.float32
               for a in (dst, src)):
        return None  # a memcpy of cells needs two C-contiguous float32 arrays
    def codegen(context, builder, sig, args):
        d = context.make_array(sig.args[0])(context, builder, args[0])
        s = context.make_array(sig.args[2])(context, builder, args[2])
        cgutils.raw_memcpy(builder, builder.gep(d.data, [args[1]]), builder.gep(s.data, [args[3]]),
                           args[4], 4)
        return context.get_dummy_value()
    return types.void(dst, at, src, start, count), codegen


@njit(cache=True, inline="always")
def _therm(out, at, count):
    _copy_cells(out, at, THERM, 4 * min(max(count, 0), 4), 4)


@njit(cache=True, inline="always")
def _therm_any(out, at, count):
    """:func:`_therm` into an array of any numeric dtype."""
    for k in range(4):
        out[at + k] = 1 if count > k else 0


@njit(cache=True, inline="always")
def _zero(out, lo, hi):
    for i in range(lo, hi):
        out[i] = 0.0


@njit(cache=True)
def _cards(st, seat, n, out):
    """Own hand, unseen cards and cards played: every cell written (slots ``r >= n`` zeroed)."""
    for r in range(NR):
        own = st[O_HAND + seat * NR + r]
        gone = own
        for s in range(n):
            gone += st[O_PLAYED + s * NR + r]
        _therm(out, F_HAND + r * 4, own)
        _therm(out, F_UNSEEN + r * 4, 4 - gone)
    for rr in range(n):
        s = seat + rr - n if seat + rr >= n else seat + rr
        for r in range(NR):
            _therm(out, F_PLAYED + (rr * NR + r) * 4, st[O_PLAYED + s * NR + r])
    _zero(out, F_PLAYED + n * NR * 4, F_LEFT)


@njit(cache=True)
def _seats(st, seat, n, out):
    """Per seat: cards left, báo 1, present, passed, score; who acts, opens, declared (cells pre-zeroed)."""
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
    """The combination on top and the open chop chain (cells pre-zeroed)."""
    top = st[O_TOP]
    if top < 0:
        out[F_TOP_KIND] = 1.0
    else:
        out[F_TOP_KIND + ACT_KIND[top] - K_SINGLE + 1] = 1.0
        out[F_TOP_RANK + ACT_RANK[top]] = 1.0
        _copy_cells(out, F_TOP_CARDS, HIST_FLAT, top * HIST_ENTRY + _CARDS_AT, NR)
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
    """Progress, and the last HIST decisions, most recent first: every history cell written."""
    nd = st[O_NDEC]
    out[F_PROGRESS] = min(nd, 100) / 100.0
    k = min(nd, HIST)
    for j in range(k):
        h = O_HIST + ((nd - 1 - j) & (HIST - 1)) * 2
        at = F_HIST + j * HIST_ENTRY
        _copy_cells(out, at, HIST_FLAT, st[h + 1] * HIST_ENTRY, HIST_ENTRY)
        out[at + 1 + _rel(st[h], seat, n)] = 1.0
    _zero(out, F_HIST + k * HIST_ENTRY, F_HIST + HIST * HIST_ENTRY)


@njit(cache=True)
def _encode(st, seat, rules, out):
    """The observation, its rules block copied from ``rules`` (:func:`rules_block`): each cell
    written once or zeroed once, no division (the batched hot path)."""
    n = st[O_N]
    _cards(st, seat, n, out)
    _zero(out, F_LEFT, F_HIST)
    _seats(st, seat, n, out)
    _top(st, seat, n, out)
    _history(st, seat, n, out)
    for i in range(rules.shape[0]):
        out[F_RULES + i] = rules[i]
    _zero(out, F_PLAYERS, OBS_SIZE)
    out[F_PLAYERS + n - MIN_PLAYERS] = 1.0


@njit(cache=True)
def rules_block(rule_array):
    """The rules block of rule array ``rule_array``, once per batch (every row of a batch shares it)."""
    out = np.empty(RULE_SLOT.shape[0], dtype=np.float32)
    write_rules(rule_array, RULE_SLOT, RULE_KIND, RULE_ARG, out, 0)
    return out


@njit(cache=True)
def encode_row(st, rule_array, seat, out):
    """Write seat ``seat``'s observation of state row ``st`` into ``out[:OBS_SIZE]``."""
    _encode(st, seat, rules_block(rule_array), out)


@njit(cache=True)
def encode_batch(states, rule_array, seats, out):
    """``out[g] = encode_row(states[g], rule_array, seats[g])`` for every game ``g``."""
    rules = rules_block(rule_array)
    for g in range(states.shape[0]):
        _encode(states[g], seats[g], rules, out[g])


def encode_to_act(states: np.ndarray, rule_array: np.ndarray) -> np.ndarray:
    """``float32[N, OBS_SIZE]``: every engine row's observation for the seat to act there."""
    out = np.zeros((states.shape[0], OBS_SIZE), dtype=np.float32)
    encode_batch(states, rule_array, states[:, O_TO_ACT].astype(np.int64), out)
    return out


@njit(cache=True)
def encode_full_row(st, rule_array, seat, out):
    """Perfect information for a critic: the observation, then every relative seat's hand."""
    encode_row(st, rule_array, seat, out)
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
            _therm_any(out, base + r * 4, st[O_HAND + s * NR + r])


@njit(cache=True)
def encode_full_batch(states, rule_array, seats, out):
    for g in range(states.shape[0]):
        encode_full_row(states[g], rule_array, seats[g], out[g])


@njit(cache=True)
def encode_hidden_batch(states, seats, out):
    """``out[g]`` = the last ``FULL_EXTRA`` entries of :func:`encode_full_row` (any numeric dtype).

    The trainer ships these 0/1 entries as uint8 next to the observation, a
    quarter of the bytes of the float32 perfect-information vector.
    """
    for g in range(states.shape[0]):
        _hands(states[g], seats[g], out[g], 0)


@njit(cache=True)
def encode_mask_batch(states, rule_array, obs, masks, seats):
    """Observation and legal mask of the seat to act, for every game (one pass over the batch)."""
    buf = np.empty(NUM_ACTIONS, dtype=np.int64)
    rules = rules_block(rule_array)
    for g in range(states.shape[0]):
        st = states[g]
        s = st[O_TO_ACT]
        seats[g] = s
        _encode(st, s if s >= 0 else 0, rules, obs[g])
        m = masks[g]
        m[:] = 0
        k = legal_actions(st, rule_array, buf)
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
    """Split a vector into its named sections, flat (for debugging and docs; :func:`view` shapes them)."""
    return {s.name: obs[OFFSETS[s.name]:OFFSETS[s.name] + s.size] for s in SECTIONS}


def describe_rules(obs: np.ndarray) -> dict[str, float]:
    """The rules block by feature name (``RULE_FEATURES``)."""
    return {name: float(obs[F_RULES + i]) for i, name in enumerate(RULE_FEATURES)}
