"""Random games written as records and replayed: a quick end-to-end check of the engine
(``samloc demo``).  Every game is written as a samloc/1 JSON Lines record and replayed, and
the replay must agree with the play."""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .game import Game
from .record import replay_report, write_jsonl
from .rules import RuleSet


@dataclass(frozen=True)
class Roundtrip:
    """What :func:`roundtrip` did: the games' ends, the seconds each half took, the disagreements."""

    games: int
    ends: dict[str, int]
    play_seconds: float
    replay_seconds: float
    mismatches: int
    records: Path


def roundtrip(rules: RuleSet, players: int, games: int, seed: int, out: Path) -> Roundtrip:
    """Play ``games`` uniformly random games (deals of ``seed``), write their records to ``out``,
    replay them."""
    rng = random.Random(seed)
    t0 = time.perf_counter()
    records, ends = [], Counter()
    for i in range(games):
        g = Game.new(rules, players, seed=seed * 1_000_003 + i)
        while not g.finished:
            g.apply(rng.choice(g.legal_actions()))
        records.append(g.to_record())
        ends[g.result.end] += 1
    t_play = time.perf_counter() - t0
    out.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(str(out), records)
    t0 = time.perf_counter()
    mismatches = sum(not replay_report(r)["ok"] for r in records)
    return Roundtrip(games, dict(ends), t_play, time.perf_counter() - t0, mismatches, out)
