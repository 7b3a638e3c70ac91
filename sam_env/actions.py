"""The fixed discrete action table: every decision any seat can ever make.

The policy's action space, the engine's legal-move lists and the move strings
of PROTOCOL §1 are all this one table.  Suits never change the game, so an
action names ranks only.

======  ==========================  =====================================
ids     kind                        ``ACT_RANK`` / ``ACT_LEN``
======  ==========================  =====================================
0       ``pass``
1, 2    ``sam``, ``no_sam``
3–15    single of rank r            r (0 = 3 … 12 = 2) / 1
16–28   pair                        r / 2
29–41   triple                      r / 3
42–54   quad                        r / 4
55–122  straight, by length 3…10,   top *position* (A low = 1, 2 = 2,
        then top position           3 … K = 3 … 13, A high = 14) / length
123–200 double quad r1 < r2         r1, ``ACT_RANK2`` = r2 / 8
======  ==========================  =====================================

Changing the table changes every trained policy: bump ``ACTION_TABLE_VERSION``.
"""

from __future__ import annotations

import numpy as np

from .cards import NUM_RANKS, RANKS, RANK_2, RANK_A

ACTION_TABLE_VERSION = 1

K_PASS, K_SAM, K_NO_SAM, K_SINGLE, K_PAIR, K_TRIPLE, K_QUAD, K_STRAIGHT, K_DQUAD = range(9)
KIND_NAMES = ("pass", "sam", "no_sam", "single", "pair", "triple", "quad", "straight", "double quad")

PASS, SAM, NO_SAM = 0, 1, 2
SINGLE0 = 3
PAIR0 = SINGLE0 + NUM_RANKS
TRIPLE0 = PAIR0 + NUM_RANKS
QUAD0 = TRIPLE0 + NUM_RANKS
STRAIGHT0 = QUAD0 + NUM_RANKS
MIN_STRAIGHT, MAX_STRAIGHT = 3, 10
NUM_POSITIONS = 14  # straight positions 1 … 14

# Straight position → rank index.  Position 0 is unused.
POS_RANK = np.array([-1, RANK_A, RANK_2] + list(range(RANK_A)) + [RANK_A], dtype=np.int64)


def _build() -> tuple[np.ndarray, ...]:
    kind, rank, rank2, length, ncards, names = [], [], [], [], [], []
    counts = []

    def add(k: int, r: int, r2: int, ln: int, n: int, name: str, cnt: list[int]) -> None:
        kind.append(k), rank.append(r), rank2.append(r2), length.append(ln), ncards.append(n)
        names.append(name), counts.append(cnt)

    zero = [0] * NUM_RANKS
    add(K_PASS, -1, -1, 0, 0, "pass", zero)
    add(K_SAM, -1, -1, 0, 0, "sam", zero)
    add(K_NO_SAM, -1, -1, 0, 0, "no_sam", zero)
    for n, k in ((1, K_SINGLE), (2, K_PAIR), (3, K_TRIPLE), (4, K_QUAD)):
        for r in range(NUM_RANKS):
            cnt = [0] * NUM_RANKS
            cnt[r] = n
            add(k, r, -1, n, n, RANKS[r] * n, cnt)
    for ln in range(MIN_STRAIGHT, MAX_STRAIGHT + 1):
        for top in range(ln, NUM_POSITIONS + 1):
            cnt = [0] * NUM_RANKS
            name = ""
            for p in range(top - ln + 1, top + 1):
                cnt[POS_RANK[p]] += 1
                name += RANKS[POS_RANK[p]]
            add(K_STRAIGHT, top, -1, ln, ln, name, cnt)
    for r1 in range(NUM_RANKS):
        for r2 in range(r1 + 1, NUM_RANKS):
            cnt = [0] * NUM_RANKS
            cnt[r1] = cnt[r2] = 4
            add(K_DQUAD, r1, r2, 8, 8, RANKS[r1] * 4 + RANKS[r2] * 4, cnt)
    as_arr = lambda xs: np.array(xs, dtype=np.int64)  # noqa: E731
    return (as_arr(kind), as_arr(rank), as_arr(rank2), as_arr(length), as_arr(ncards),
            np.array(counts, dtype=np.int64), tuple(names))


ACT_KIND, ACT_RANK, ACT_RANK2, ACT_LEN, ACT_NCARDS, ACT_COUNTS, ACTION_NAMES = _build()
NUM_ACTIONS = len(ACTION_NAMES)
DQUAD0 = int(np.argmax(ACT_KIND == K_DQUAD))

_BY_NAME = {name: i for i, name in enumerate(ACTION_NAMES)}
# Straight string → action.  Built from the table, so "A23" and "QKA" both resolve.
_BY_COUNTS: dict[tuple[int, ...], int] = {}
for _a in range(SINGLE0, NUM_ACTIONS):
    _BY_COUNTS.setdefault(tuple(ACT_COUNTS[_a]), _a)


def straight_action(length: int, top: int) -> int:
    """Action id of the straight of ``length`` cards ending at position ``top``."""
    base = STRAIGHT0 + sum(NUM_POSITIONS - ln + 1 for ln in range(MIN_STRAIGHT, length))
    return base + top - length


def move_str(action: int) -> str:
    return ACTION_NAMES[action]


def parse_move(text: str) -> int:
    """A move string (PROTOCOL §1) → action id; ValueError naming the problem."""
    if not isinstance(text, str):
        raise ValueError(f"a move must be a string, not {text!r}")
    t = text.strip()
    low = t.lower()
    if low in ("pass", "sam", "no_sam"):
        return _BY_NAME[low]
    t = t.upper().replace("10", "T")
    if not t or any(c not in RANKS for c in t):
        raise ValueError(f"unknown move {text!r}")
    if t in _BY_NAME:
        return _BY_NAME[t]
    raise ValueError(f"{text!r} is not a combination (single, pair, triple, quad, straight or double quad)")


def action_from_counts(counts: list[int] | tuple[int, ...]) -> int:
    """The play whose cards have these rank counts, or -1 if they form no combination."""
    return _BY_COUNTS.get(tuple(counts), -1)
