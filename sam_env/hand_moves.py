"""The fewest moves that play a hand out, for every hand of at most 10 cards: a table built by a DP.

A hand is its rank counts (13 ranks, each 0…4; suits never matter).  One move
sheds any number of cards of one rank (a single, pair, triple or quad), a
straight (one card of each of three or more consecutive positions, RULES.md
§3: ``A-2-3`` and a low 2 only under ``ace_low_straights``) or a double quad.
:func:`min_moves` is the length of the shortest such split: how far a hand is
from going out when nobody beats it, the hand-shape feature that PerfectDou
gives its critic and DouZero's successors their move filters.

Every hand of at most :data:`MAX_CARDS` cards has an index (:func:`hand_index`,
a ranking of bounded multisets: an offset per card count plus one table entry
per rank, :data:`INDEX_TERMS`), so that the whole table, :func:`moves_table`,
is read with one gather: a network looks a hand up with tensor ops alone and
exports to ONNX.  The table is filled in order of card count, each hand from
the hands one straight or double quad smaller, so building it is one pass
(about a second, once per process).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from .actions import ACT_COUNTS, ACT_KIND, ACT_LEN, ACT_RANK, K_DQUAD, K_STRAIGHT
from .cards import HAND_SIZE, NUM_RANKS

MAX_CARDS = HAND_SIZE
"""The largest hand the table holds (a dealt hand)."""


def _multisets() -> np.ndarray:
    """``N[r, m]``: hands of exactly ``m`` cards over the first ``r`` ranks (at most 4 of a rank)."""
    n = np.zeros((NUM_RANKS + 1, MAX_CARDS + 1), np.int64)
    n[0, 0] = 1
    for r in range(1, NUM_RANKS + 1):
        for m in range(MAX_CARDS + 1):
            n[r, m] = sum(n[r - 1, m - k] for k in range(5) if m - k >= 0)
    return n


_N = _multisets()
TABLE_SIZE = int(_N[NUM_RANKS].sum())
"""Hands of at most :data:`MAX_CARDS` cards (1,032,760)."""
COUNT_OFFSET = np.concatenate([[0], np.cumsum(_N[NUM_RANKS])[:-1]]).astype(np.int64)
"""The first index of the hands of each card count 0…MAX_CARDS."""


def _index_terms() -> np.ndarray:
    """``T[r, s, c]``: rank ``r``'s share of an index, holding ``c`` of it with ``s`` cards in ranks ``0…r``
    (the hands over ranks ``0…r`` with ``s`` cards and fewer than ``c`` of rank ``r`` come first)."""
    t = np.zeros((NUM_RANKS, MAX_CARDS + 1, 5), np.int64)
    for r in range(1, NUM_RANKS):
        for s in range(MAX_CARDS + 1):
            for c in range(5):
                t[r, s, c] = sum(_N[r, s - k] for k in range(c) if s - k >= 0)
    return t


INDEX_TERMS = _index_terms()


def hand_index(counts: np.ndarray) -> np.ndarray:
    """The table index of hands ``counts`` (int ``[..., 13]``, at most :data:`MAX_CARDS` cards)."""
    c = np.asarray(counts, np.int64)
    s = np.cumsum(c, axis=-1)
    if (s[..., -1] > MAX_CARDS).any() or (c < 0).any() or (c > 4).any():
        raise ValueError(f"a hand holds 0…4 of a rank and at most {MAX_CARDS} cards")
    ranks = np.arange(NUM_RANKS)
    return COUNT_OFFSET[s[..., -1]] + INDEX_TERMS[ranks, s, c].sum(axis=-1)


def _combos(ace_low: bool) -> np.ndarray:
    """The rank counts of each move of several ranks the rules allow: the straights (without
    ``ace_low``, none that reaches position 1 or 2: no ``A-2-3``, no low 2) and the double quads."""
    low = ACT_RANK - ACT_LEN + 1  # a straight's lowest position (ACT_RANK is its top position)
    keep = (ACT_KIND == K_DQUAD) | ((ACT_KIND == K_STRAIGHT) & (ace_low | (low >= 3)))
    return np.ascontiguousarray(ACT_COUNTS[keep], dtype=np.int64)


@njit(cache=True)
def _fill(table, combos, terms, offset):
    """``table[index(h)]`` = the fewest moves for every hand ``h`` of at most 10 cards, by card count."""
    nr = terms.shape[0]
    c = np.zeros(nr, np.int64)
    rest = np.zeros(nr, np.int64)
    for m in range(terms.shape[1]):
        # every hand of m cards, as an odometer over the ranks
        c[:] = 0
        _first(c, m)
        while True:
            best = 0
            for r in range(nr):
                if c[r] > 0:
                    best += 1
            for k in range(combos.shape[0]):
                ok = True
                for r in range(nr):
                    rest[r] = c[r] - combos[k, r]
                    if rest[r] < 0:
                        ok = False
                        break
                if ok:
                    v = 1 + table[_index(rest, terms, offset)]
                    if v < best:
                        best = v
            table[_index(c, terms, offset)] = best
            if not _next(c, m):
                break


@njit(cache=True)
def _index(c, terms, offset):
    s, at = 0, 0
    for r in range(c.shape[0]):
        s += c[r]
        at += terms[r, s, c[r]]
    return offset[s] + at


@njit(cache=True)
def _first(c, m):
    """The first hand of ``m`` cards: the lowest ranks filled first."""
    left = m
    for r in range(c.shape[0]):
        take = min(4, left)
        c[r] = take
        left -= take


@njit(cache=True)
def _next(c, m):
    """Step ``c`` to the next hand of ``m`` cards (any order that visits each once); False after the last."""
    nr = c.shape[0]
    # find the lowest rank r with cards whose card can move up to a rank above with room
    carry = 0
    for r in range(nr - 1):
        carry += c[r]
        c[r] = 0
        if c[r + 1] < 4 and carry > 0:
            c[r + 1] += 1
            carry -= 1
            # refill the lowest ranks with what is left
            for q in range(nr):
                if carry == 0:
                    break
                take = min(4, carry)
                c[q] = take
                carry -= take
            return True
    # restore nothing: the last hand was visited
    return False


@lru_cache(maxsize=2)
def moves_table(ace_low: bool) -> np.ndarray:
    """``uint8 [TABLE_SIZE]``: the fewest moves that play each hand out (:func:`hand_index` orders them)."""
    table = np.zeros(TABLE_SIZE, np.uint8)
    _fill(table, _combos(ace_low), INDEX_TERMS, COUNT_OFFSET)
    table.setflags(write=False)
    return table


def min_moves(counts: np.ndarray, ace_low: bool = True) -> int:
    """The fewest moves that play out the hand of rank counts ``counts`` (int ``[13]``)."""
    return int(moves_table(ace_low)[hand_index(counts)])
