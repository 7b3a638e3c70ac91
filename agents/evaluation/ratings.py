"""Ratings on the lá scale from a league's pair scores: fit, bootstrap, misfits.  No torch.

``score(A vs B)`` is the mean lá per game of one seat of A at a table whose other
seats are all B, over duplicate deals (:func:`agents.evaluation.evaluate.evaluate`).  The model is
``score(A vs B) ≈ r_A − r_B`` for both ordered pairs of every two agents, one agent
pinned at 0.  Being antisymmetric, it can fit only the antisymmetric part of the two,
the matchup score ``(score(A vs B) − score(B vs A)) / 2``; the symmetric part, the sum
``score(A vs B) + score(B vs A)``, is what a lone seat gains or loses beyond the
difference, and is reported beside the ratings, not fitted.  So :func:`rate` fits the
matchup scores by weighted least squares (:func:`fit`), each weighted by the inverse of
its variance, taken deal by deal so that the two directions' shared deals count.
Weighting the two directions separately would tilt each rating toward the less noisy
one, which is the lone weaker seat (its losses are smaller and steadier), and so make
what a rating means depend on noise.  What the model leaves out is shown, not hidden:
the misfits (matchups far from ``r_A − r_B``), the cycles, and the lone-seat sums.

The intervals come from a bootstrap over deals: every pair plays the same deals, so a
resample draws deal indices once and every pair's mean is taken over the same draw,
keeping the pairs' correlation (a hard deal is hard for all of them).  The weights
stay those of the whole sample, which makes the fit a fixed linear map of the
matchup means (:func:`fit_matrix`) and a resample costs one matrix product.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

#: Floor of a pair score's variance (lá²): a standard error of 0.01 lá.  Two agents that play
#: alike score exactly 0 in every deal; without a floor their weight would be infinite.
VAR_FLOOR = 1e-4
#: A matchup whose residual is more than this many of its own standard errors is a misfit.
MISFIT_Z = 2.0
#: A matchup score this many standard errors from 0 is a win in a cycle.
CYCLE_Z = 1.96

Pair = tuple[int, int]


def _check_pairs(n: int, pairs: Sequence[Pair]) -> list[Pair]:
    out = [(int(i), int(j)) for i, j in pairs]
    for i, j in out:
        if not (0 <= i < n and 0 <= j < n) or i == j:
            raise ValueError(f"a pair must name two different agents of 0..{n - 1}, not ({i}, {j})")
    return out


def design(n: int, pairs: Sequence[Pair]) -> np.ndarray:
    """``float[len(pairs), n]``: row ``(i, j)`` is +1 at ``i`` and −1 at ``j`` (the model's
    prediction of that pair is ``design @ r``)."""
    pairs = _check_pairs(n, pairs)
    x = np.zeros((len(pairs), n))
    for row, (i, j) in enumerate(pairs):
        x[row, i], x[row, j] = 1.0, -1.0
    return x


def fit_matrix(n: int, pairs: Sequence[Pair], variances: Sequence[float], pin: int) -> np.ndarray:
    """``M`` (``float[n, len(pairs)]``) with ``r = M @ scores`` the weighted least-squares
    ratings, ``r[pin] = 0``.  ValueError when the pairs leave some agent unconnected to the
    pinned one (its rating is then not determined)."""
    if not 0 <= pin < n:
        raise ValueError(f"the pinned agent must be one of 0..{n - 1}, not {pin}")
    x = design(n, pairs)
    var = np.asarray(variances, dtype=float)
    if var.shape != (len(x),) or not np.all(np.isfinite(var)) or np.any(var < 0):
        raise ValueError("variances must be one finite non-negative number per pair")
    sw = 1.0 / np.sqrt(np.maximum(var, VAR_FLOOR))
    free = [k for k in range(n) if k != pin]
    a = x[:, free] * sw[:, None]
    m_free, _, rank, _ = np.linalg.lstsq(a, np.diag(sw), rcond=None)
    if rank < len(free):
        raise ValueError("the pairs played do not connect every agent: their ratings are not determined")
    m = np.zeros((n, len(x)))
    m[free] = m_free
    return m


def fit(n: int, pairs: Sequence[Pair], scores: Sequence[float], variances: Sequence[float],
        pin: int = 0) -> np.ndarray:
    """The ratings ``r`` (``float[n]``, ``r[pin] = 0``) minimising
    ``Σ (score − (r_i − r_j))² / variance`` over the pairs ``(i, j)``."""
    s = np.asarray(scores, dtype=float)
    if s.shape != (len(pairs),):
        raise ValueError("scores must be one number per pair")
    return fit_matrix(n, pairs, variances, pin) @ s


def resample_means(deal_scores: np.ndarray, reps: int, seed: int) -> np.ndarray:
    """``float[reps, pairs]``: each pair's mean over a bootstrap resample of the deals
    (``deal_scores`` is ``float[pairs, deals]``, column ``d`` the same deal for every pair).
    The same seed gives the same resamples."""
    scores = np.asarray(deal_scores, dtype=float)
    n_pairs, deals = scores.shape
    rng = np.random.default_rng(seed)
    out = np.empty((reps, n_pairs))
    chunk = max(1, 1_000_000 // deals)  # resamples per step, so the counts take a few MB
    for lo in range(0, reps, chunk):
        k = min(chunk, reps - lo)
        idx = rng.integers(0, deals, size=(k, deals)) + (np.arange(k) * deals)[:, None]
        counts = np.bincount(idx.ravel(), minlength=k * deals).reshape(k, deals)
        out[lo:lo + k] = counts @ scores.T / deals
    return out


def _r(x: float) -> float:
    return round(float(x), 4)


def _sd(samples: np.ndarray) -> np.ndarray:
    """The bootstrap standard error of each column (of a vector: a scalar), floored."""
    return np.maximum(samples.std(axis=0, ddof=1), math.sqrt(VAR_FLOOR))


def matchups(pairs: Sequence[Pair]) -> tuple[list[Pair], np.ndarray]:
    """The unordered pairs ``(i, j)``, ``i < j``, among the ordered ``pairs``, and
    ``T`` (``float[len(pairs), matchups]``) with ``deal_scores.T @ T`` their matchup scores:
    the mean of ``score(i vs j)`` and ``−score(j vs i)`` over the directions played."""
    keys = sorted({(min(i, j), max(i, j)) for i, j in pairs})
    where = {k: u for u, k in enumerate(keys)}
    t = np.zeros((len(pairs), len(keys)))
    for k, (i, j) in enumerate(pairs):
        t[k, where[min(i, j), max(i, j)]] = 1.0 if i < j else -1.0
    return keys, t / np.abs(t).sum(0, keepdims=True)


def _cycles(names: Sequence[str], keys: list[Pair], d: np.ndarray, sd: np.ndarray) -> list[list[str]]:
    """Triangles ``[A, B, C]``: A beats B, B beats C and C beats A, each by a matchup score
    more than :data:`CYCLE_Z` standard errors from 0."""
    n = len(names)
    beats = np.zeros((n, n), dtype=bool)
    for u, (i, j) in enumerate(keys):
        if abs(d[u]) > CYCLE_Z * sd[u]:
            beats[i, j], beats[j, i] = d[u] > 0, d[u] < 0
    return [[names[a], names[b], names[c]] for a in range(n) for b in range(a + 1, n) for c in range(a + 1, n)
            if c != b and beats[a, b] and beats[b, c] and beats[c, a]]


def rate(names: Sequence[str], pairs: Sequence[Pair], deal_scores: np.ndarray, pin: int = 0,
         reps: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Ratings, their 95% bootstrap intervals and what the model leaves out, as JSON-able data.

    ``deal_scores[k, d]`` is the first agent of ``pairs[k]``'s mean lá in deal ``d`` (over
    its rotations), the same deals for every pair.  Keys: ``pin``; ``ratings`` (name →
    ``rating``, ``ci95``, ``se``); ``pairs`` (each ordered pair's ``score``, ``se`` and the
    model's ``predicted`` r_A − r_B); ``matchups`` (each two agents, ``a`` the higher rated:
    ``a_alone`` = score(a vs b), ``b_alone`` = score(b vs a), the matchup ``score``, its
    ``se``, ``predicted``, ``residual`` and ``z`` in bootstrap standard errors; ``sum`` =
    a_alone + b_alone with ``sum_se``, and ``k`` = −b_alone / a_alone); ``misfits`` (the
    matchups with ``|z|`` above :data:`MISFIT_Z`, worst first); ``cycles``; ``lone_seat_k``
    (k pooled by least squares through 0); ``fit`` (``chi2``, ``dof``, ``chi2_per_dof``);
    ``bootstrap``.
    """
    n = len(names)
    pairs = _check_pairs(n, pairs)
    scores = np.asarray(deal_scores, dtype=float)
    if scores.ndim != 2 or scores.shape[0] != len(pairs):
        raise ValueError("deal_scores must hold one row of deal scores per pair")
    if scores.shape[1] < 2:
        raise ValueError("a bootstrap over deals needs at least 2 deals")
    if reps < 2:
        raise ValueError(f"the bootstrap needs at least 2 resamples, not {reps}")
    deals = scores.shape[1]
    keys, t = matchups(pairs)
    both = np.vstack([scores, t.T @ scores])  # ordered pairs, then matchups, deal by deal
    s = both.mean(1)
    var = both.var(1, ddof=1) / deals
    p = len(pairs)
    m = fit_matrix(n, keys, var[p:], pin)
    x = design(n, keys)
    r = m @ s[p:]
    boot = resample_means(both, reps, seed)
    boot_r = boot[:, p:] @ m.T
    lo, hi = np.percentile(boot_r, [2.5, 97.5], axis=0)
    resid = s[p:] - x @ r
    resid_sd = _sd(boot[:, p:] - boot[:, p:] @ (x @ m).T)
    d_sd = _sd(boot[:, p:])
    z = resid / resid_sd
    where = {q: k for k, q in enumerate(pairs)}
    rows, num, den = [], 0.0, 0.0
    for u, (i, j) in enumerate(keys):
        sign = 1.0 if r[i] >= r[j] else -1.0
        a, b = (i, j) if sign > 0 else (j, i)
        ka, kb = where.get((a, b)), where.get((b, a))
        row = {"a": names[a], "b": names[b],
               "a_alone": None if ka is None else _r(s[ka]), "b_alone": None if kb is None else _r(s[kb]),
               "score": _r(sign * s[p + u]), "se": _r(math.sqrt(var[p + u])),
               "predicted": _r(abs(r[i] - r[j])),
               "residual": _r(sign * resid[u]), "z": round(float(sign * z[u]), 2),
               "sum": None, "sum_se": None, "k": None}
        if ka is not None and kb is not None:
            row |= {"sum": _r(s[ka] + s[kb]), "sum_se": _r(_sd(boot[:, ka] + boot[:, kb])),
                    "k": _r(-s[kb] / s[ka]) if abs(s[ka]) > 1e-12 else None}
            num, den = num - s[kb] * s[ka], den + s[ka] ** 2
        rows.append(row)
    chi2 = float(np.sum(resid ** 2 / np.maximum(var[p:], VAR_FLOOR)))
    dof = len(keys) - (n - 1)
    return {
        "pin": names[pin],
        "ratings": {names[a]: {"rating": _r(r[a]), "ci95": [_r(lo[a]), _r(hi[a])],
                               "se": _r(boot_r[:, a].std(ddof=1))} for a in range(n)},
        "pairs": [{"agent": names[i], "opponents": names[j], "score": _r(s[k]), "se": _r(math.sqrt(var[k])),
                   "predicted": _r(r[i] - r[j])} for k, (i, j) in enumerate(pairs)],
        "matchups": rows,
        "misfits": sorted((q for q in rows if abs(q["z"]) > MISFIT_Z), key=lambda q: -abs(q["z"])),
        "cycles": _cycles(names, keys, s[p:], d_sd),
        "lone_seat_k": _r(num / den) if den > 0 else None,
        "fit": {"chi2": round(chi2, 2), "dof": dof,
                "chi2_per_dof": round(chi2 / dof, 3) if dof > 0 else None},
        "bootstrap": {"reps": reps, "seed": seed, "unit": "deal", "deals": deals},
    }
