"""Seeds and random streams: one convention for every deal, one mixer.

**Deals.**  A seed ``S`` names one sequence of deals.  Its stream is
splitmix64 started at word 0 of ``numpy.random.SeedSequence(S)``; each deal
draws a Fisher-Yates shuffle of the 52 cards (51 draws), gives seat ``s``
cards ``10s … 10s+9``, then draws the opener (unless the rules give it to the
lowest card).  *Deal k of seed S* is the ``k``-th deal of that sequence, and
every part of the project deals by it:

- ``Game.new(rules, players, seed=S, deal=k)`` is deal ``k`` of seed ``S``
  (``deal=0`` by default); it may be an instant win, already over;
- ``samloc eval --seed S`` (:func:`agents.evaluation.evaluate.evaluate`) plays the deals
  of seed ``S`` in order, skipping those that end at once in an instant win;
- a batch reset with seed ``S`` (``GameBatch``, ``SelfPlayBatch``,
  ``OpponentGames`` and so the Gymnasium vector env) gives game ``g`` the
  deals of seed ``S + g``, one game after another, instant wins skipped:
  Gymnasium's convention (sub-env ``i`` of a vector env reset with ``S`` is
  reset with ``S + i``);
- so one env (``SamLoc-v0``, the PettingZoo env) reset with ``S`` plays the
  deals of ``samloc eval --seed S``, one per episode (an opponent env also
  skips a deal in which its learning seat never gets a decision).

Word 1 of the same ``SeedSequence`` is a second stream for whatever else an
opponent env draws (the learning seat, random opponents), so they never
shift the deals.

**Mixing.**  :func:`mix64` (splitmix64's finalizer) is the one bit mixer of
the compiled code: the streams (:func:`rng_next`) and the search's salts use
it.  :func:`mix` folds integers into a 63-bit seed in plain Python (the
trainer's per-worker and per-evaluation seeds).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: splitmix64's increment (2^64 / golden ratio) and its two finalizer multipliers.
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1
# as uint64 scalars, which numba freezes into the compiled code
GOLDEN_U64 = np.uint64(GOLDEN)
MIX1_U64 = np.uint64(MIX1)
MIX2_U64 = np.uint64(MIX2)


# ---- compiled: the mixer and the streams ---------------------------------------------
@njit(cache=True)
def mix64(z):
    """splitmix64's finalizer: a bijection of uint64 in which every input bit moves every output bit."""
    z = (z ^ (z >> np.uint64(30))) * MIX1_U64
    z = (z ^ (z >> np.uint64(27))) * MIX2_U64
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def rng_next(rng, i):
    """splitmix64 step of stream ``i`` (``rng`` is a uint64 array): reproducible on every platform."""
    rng[i] += GOLDEN_U64
    return mix64(rng[i])


@njit(cache=True)
def rng_below(rng, i, k):
    """Uniform integer in [0, k) from stream ``i``."""
    return np.int64(rng_next(rng, i) % np.uint64(k))


# ---- Python: seeds and stream states ------------------------------------------------------
def _check_seed(seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
    return int(seed)


def stream(seed: int, words: int = 1) -> np.ndarray:
    """``uint64[words]``: the stream states of seed ``seed`` (word 0 deals, word 1 the rest)."""
    return np.random.SeedSequence(_check_seed(seed)).generate_state(words, dtype=np.uint64)


def seed_streams(seed: int, count: int, words: int = 1) -> np.ndarray:
    """``uint64[words * count]`` for a batch of ``count`` games reset with ``seed``: game ``g``
    has seed ``seed + g``, its word ``w`` at ``w * count + g``."""
    seed = _check_seed(seed)
    out = np.empty(words * count, dtype=np.uint64)
    for g in range(count):
        out[g::count] = stream(seed + g, words)
    return out


def fresh_seed() -> int:
    """A random seed from the OS, for an unseeded deal or ``reset(seed=None)`` on a never-seeded env."""
    return int(np.random.SeedSequence().entropy % (2 ** 63))


def mix(*xs: int) -> int:
    """A 63-bit seed from integers, stable across runs and platforms.

    Each integer (taken mod 2^64) is folded in with splitmix64's first
    multiplier and a shift: ``h = ((h ^ x) * MIX1) mod 2^64; h ^= h >> 31``,
    from ``h = GOLDEN``.  The trainer derives its worker and evaluation seeds
    with it, so these numbers must never change.
    """
    h = GOLDEN
    for x in xs:
        h = (h ^ (int(x) & _MASK64)) * MIX1 & _MASK64
        h ^= h >> 31
    return h & 0x7FFFFFFFFFFFFFFF
