"""Duplicate-deal evaluation: :func:`evaluate` (what ``samloc eval`` runs) at one table or several.

Card luck dominates single games of Sâm lốc, so every seeded deal is played
once with the agent in *each* seat and the opponents in the others.  Whatever
the cards alone decide cancels out: averaged over the rotations, a deal the
agents cannot influence scores exactly 0.  The unit of the confidence
interval is therefore the deal (the mean of its rotations), not the game.

The deals are those of ``seed`` in order (:mod:`sam_env.seeding`: the games
``SamLoc-v0`` reset with that seed deals, one per episode).  Deals that end at
once in an instant win need no decision and are skipped
(their duplicate score is 0 by construction); ``instant_deals_skipped`` counts
them.  The games are played a chunk of deals at a time (:mod:`agents.evaluation.matches`),
the chunks side by side or kept to resume (:mod:`agents.evaluation.eval_chunks`).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from sam_env import core, seeding
from sam_env.cards import HAND_SIZE
from sam_env.record import write_jsonl
from sam_env.table import Table

from ..base import Agent
from .eval_chunks import CHUNKS_FORMAT, ChunkStore, EvalPool, agent_files, check_workers, not_resumable
from .matches import play_chunk, summarize
from ..registry import make_agent

DEFAULT_TABLE = Table.default()


@dataclass
class _Played:
    """The chunks of one evaluation as they finish: their statistics, games and play time."""
    deals: int
    progress: Callable[[float, int], None] | None
    chunks: ChunkStore | None
    parts: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    records: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: float = 0.0
    resumed: int = 0
    done_deals: int = 0

    def finished(self, lo: int, hi: int, part: dict[str, np.ndarray], recs: list[dict[str, Any]],
                 dt: float, kept: bool = False) -> None:
        """A chunk played now (kept: by an earlier run, taken from the store)."""
        self.parts[lo], self.records[lo] = part, recs
        self.seconds += dt
        self.done_deals += hi - lo
        if kept:
            self.resumed += 1
        elif self.chunks is not None:
            self.chunks.save(lo, hi, part, dt)
        if self.progress is not None:
            self.progress(self.done_deals, self.deals)

    def in_order(self) -> list[dict[str, np.ndarray]]:
        return [self.parts[lo] for lo in sorted(self.parts)]


def evaluate(agent: "str | Agent", opponents: "str | Agent", table: Table = DEFAULT_TABLE,
             deals: int = 1000, seed: int = 0, *,
             save_games: str | None = None, progress: Callable[[float, int], None] | None = None,
             chunk: int = 512, deal_scores: bool = False, store: str | Path | None = None, workers: int = 1,
             pool: EvalPool | None = None, agent_spec: str | None = None) -> dict[str, Any]:
    """Duplicate evaluation of ``agent`` against ``opponents`` (specs or Agents) at ``table`` (a
    :class:`~sam_env.table.Table`, valid once built: its rule set and a player count it allows).

    Returns a JSON-able dict: ``mean_score`` (the agent's lá per game) with its
    ``ci95``, ``win_rate``, ``sam_declared``/``sam_success_rate``, chops made and
    suffered, ``den_paid``, ``cong``, the score histogram, speed.  Identical
    results for the same arguments.  ``save_games`` writes every game as
    ``samloc/1`` JSON Lines.  ``deal_scores`` adds the agent's mean lá in each deal (over its
    rotations), deal by deal: a league's bootstrap resamples them (:mod:`agents.evaluation.league`).
    ``store``: a folder that keeps each finished chunk (:class:`ChunkStore`); chunks already there are
    taken, not played again.  Both agents must be replayable, and ``save_games`` is then refused (the
    games of chunks played earlier are not kept).  ``seconds`` counts the chunks' own play time.
    ``progress(done, deals)`` hears of each chunk finished, and of a chunk played here part way (a
    fraction of a deal per game ended, short of the chunk's end).
    ``workers`` > 1: the chunks are played side by side in that many processes (:class:`EvalPool`;
    replayable agents given as specs), with the one-process result; ``wall_seconds`` then says how
    long it took.  ``pool``: an :class:`EvalPool` of these agents and seed to play them in instead.
    ``agent_spec``: the spec an ``agent`` given as an Agent was built from: a store's chunks are keyed on
    the files it names (:func:`agent_files`).
    """
    if not isinstance(table, Table):
        raise TypeError(f"table must be a Table (Table(RuleSet.parse(NAME), PLAYERS) where it comes in),"
                        f" not {type(table).__name__}")
    rules, n = table.rules, table.players
    if isinstance(deals, bool) or not isinstance(deals, int) or deals < 1:
        raise ValueError(f"deals must be a positive integer, not {deals!r}")
    check_workers(workers)
    a = make_agent(agent, seed=seed)
    b = make_agent(opponents, seed=seed + 1)
    apart = workers > 1 or pool is not None
    if apart:
        _check_apart(a, b, pool, (agent, opponents, seed))
    spec = agent_spec or agent
    chunks = None if store is None else _chunk_store(store, a, b, spec, opponents, save_games, {
        "rules": rules.to_dict(), "players": n, "deals": deals, "seed": seed, "chunk": chunk})
    hands = np.zeros((deals, core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
    openers = np.zeros(deals, dtype=np.int64)
    skipped = int(core.playable_deals(seeding.stream(seed), 0, rules.to_array(), n, hands, openers))
    played = _Played(deals, progress, chunks)
    todo = _take_kept(played, deals, chunk)
    t_wall = time.perf_counter()
    side_by_side = apart and len(todo) > 1
    logging = save_games is not None
    if side_by_side:
        processes = _play_apart(played, todo, pool, (agent, opponents, seed), workers, table, hands,
                                openers, logging)
    else:
        for lo, hi in todo:
            t0 = time.perf_counter()
            tick = None if progress is None else (lambda g, at=played.done_deals: progress(at + g / n, deals))
            part, recs = play_chunk(a, b, table, hands[lo:hi], openers[lo:hi], logging, tick)
            played.finished(lo, hi, part, recs, time.perf_counter() - t0)
    wall = time.perf_counter() - t_wall
    out = _result(a, b, table, seed, deals, played, skipped)
    # ``seconds`` sums the chunks' times (games_per_s: one process's rate); this is the run's
    if side_by_side:
        out["workers"], out["wall_seconds"] = processes, round(wall, 3)
    if played.resumed:
        out["resumed_chunks"] = played.resumed
    if deal_scores:
        out["deal_scores"] = (np.concatenate([p["score"] for p in played.in_order()])
                              .reshape(deals, n).mean(1).tolist())
    if a.settings:  # e.g. a search's: the name alone does not say how it played
        out["agent_settings"] = a.settings
    if save_games is not None:
        Path(save_games).parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(save_games, [r for lo in sorted(played.records) for r in played.records[lo]])
        out["saved_games"] = save_games
    return out


def _check_apart(a: Agent, b: Agent, pool: EvalPool | None, key: tuple[Any, Any, int]) -> None:
    """ValueError unless these agents' chunks may be played by worker processes (in ``pool``)."""
    why = not_resumable((a, b), None)
    if why is not None:
        raise ValueError(f"the chunks cannot be played apart by worker processes: {why}")
    if pool is not None and pool.key != key:
        raise ValueError(f"the pool plays {pool.key[0]} against {pool.key[1]} with seed {pool.key[2]},"
                         f" not {key[0]} against {key[1]} with seed {key[2]}")


def _chunk_store(store: str | Path, a: Agent, b: Agent, agent: "str | Agent", opponents: "str | Agent",
                 save_games: str | None, table: dict[str, Any]) -> ChunkStore:
    """The store of this evaluation's finished chunks, keyed by everything that decides their games."""
    why = not_resumable((a, b), save_games)
    if why is not None:
        raise ValueError(f"this evaluation cannot keep its finished chunks: {why}")
    return ChunkStore(store, {
        "format": CHUNKS_FORMAT, "agent": a.name, "agent_settings": a.settings, "opponents": b.name,
        "agent_files": agent_files(agent), "opponent_files": agent_files(opponents), **table})


def _take_kept(played: _Played, deals: int, chunk: int) -> list[tuple[int, int]]:
    """Take the chunks an earlier run kept; the (lo, hi) deal ranges still to play."""
    todo: list[tuple[int, int]] = []
    for lo in range(0, deals, chunk):
        hi = min(deals, lo + chunk)
        kept = played.chunks.load(lo, hi) if played.chunks is not None else None
        if kept is None:
            todo.append((lo, hi))
        else:
            played.finished(lo, hi, kept[0], [], kept[1], kept=True)
    return todo


def _play_apart(played: _Played, todo: list[tuple[int, int]], pool: EvalPool | None,
                key: tuple[Any, Any, int], workers: int, table: Table, hands: np.ndarray,
                openers: np.ndarray, logging: bool) -> int:
    """Play the chunks ``todo`` side by side in ``pool`` (else a pool of their own); its process count."""
    run_in = EvalPool(*key, min(workers, len(todo))) if pool is None else pool
    futures = [run_in.submit(table, lo, hi, hands[lo:hi], openers[lo:hi], logging) for lo, hi in todo]
    try:
        for fut in as_completed(futures):
            played.finished(*fut.result())
    finally:
        for fut in futures:
            fut.cancel()
        if pool is None:
            run_in.close()
    return run_in.workers


def _result(a: Agent, b: Agent, table: Table, seed: int, deals: int, played: _Played,
            skipped: int) -> dict[str, Any]:
    n = table.players
    return {"agent": a.name, "opponents": b.name, "rules": table.rules.name, "players": n, "seed": seed,
            **summarize(played.in_order(), n), "instant_deals_skipped": skipped,
            "seconds": round(played.seconds, 3),
            "games_per_s": round(deals * n / played.seconds, 1) if played.seconds > 0 else None,
            "batched": a.batched and b.batched}


def off_tables(own: Sequence[Table] | None, tables: Sequence[Table]) -> list[Table]:
    """Those of ``tables`` that a network trained for ``own`` never played (by what is played: a house
    rule set that changes nothing is its preset); none for an agent that plays every table (``own`` None)."""
    trained = {t.key for t in own or ()}
    return [] if own is None else [t for t in tables if t.key not in trained]


def safe_name(s: str) -> str:
    """``s`` as a file name: letters, digits and ``-_.``, the rest ``_``, at most 40 characters."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)[-40:]


def evaluate_tables(agent: "str | Agent", opponents: "str | Agent", tables: Sequence[Table], deals: int,
                    seed: int, save_games: str | None = None,
                    progress: Callable[[str, float, int], None] | None = None,
                    store: str | Path | None = None, workers: int = 1,
                    agent_spec: str | None = None) -> dict[str, Any]:
    """:func:`evaluate` at several tables; ``by_table`` holds each table's result by the table's name
    (``hoi_quan_bai/4``) and the top level pools them (the mean of the tables' means, its CI from
    theirs).  ``store``: the folder of finished chunks, a subfolder per table (:class:`ChunkStore`).
    ``workers`` > 1: one :class:`EvalPool` plays the chunks of every table.  ``agent_spec``: as for
    :func:`evaluate`."""
    by: dict[str, Any] = {}
    pool = EvalPool(agent, opponents, seed, workers) if check_workers(workers) > 1 else None
    try:
        for table in tables:
            name = table.name
            save = None
            if save_games is not None:
                save = save_games if len(tables) == 1 else str(Path(save_games).with_suffix(
                    "." + name.replace("/", "_").replace("+", "_") + ".jsonl"))
            by[name] = evaluate(agent, opponents, table, deals, seed, save_games=save,
                                progress=None if progress is None
                                else (lambda d, t, k=name: progress(k, d, t)),
                                store=None if store is None else Path(store) / safe_name(name), pool=pool,
                                agent_spec=agent_spec)
    finally:
        if pool is not None:
            pool.close()
    top = dict(next(iter(by.values()))) if len(by) == 1 else _pooled(by, deals, seed)
    top["by_table"] = by
    return top


def _pooled(by: dict[str, dict[str, Any]], deals: int, seed: int) -> dict[str, Any]:
    """Several tables' results as one: the mean of their means, its CI from theirs, the counts summed."""
    first = next(iter(by.values()))
    hist: Counter[int] = Counter()
    for r in by.values():
        hist.update({int(k): v for k, v in r["score_hist"].items()})
    games = sum(r["games"] for r in by.values())
    means = [r["mean_score"] for r in by.values()]
    halves = [(r["ci95"][1] - r["ci95"][0]) / 2 for r in by.values()]
    mean = sum(means) / len(means)
    half = math.sqrt(sum(h * h for h in halves)) / len(halves)
    declared = sum(r["sam_declared"] for r in by.values())
    players = sorted({r["players"] for r in by.values()})
    top = {"agent": first["agent"], "opponents": first["opponents"],
           "rules": ",".join(dict.fromkeys(r["rules"] for r in by.values())),
           "players": players[0] if len(players) == 1 else players, "seed": seed,
           "deals": deals * len(by), "games": games,
           "mean_score": round(mean, 4), "ci95": [round(mean - half, 4), round(mean + half, 4)],
           "win_rate": round(sum(r["win_rate"] * r["games"] for r in by.values()) / games, 4),
           "equal_play_win_rate": round(sum(r["equal_play_win_rate"] * r["games"] for r in by.values())
                                        / games, 4),
           "sam_declared": declared,
           "sam_success_rate": round(sum(r["sam_success_rate"] * r["sam_declared"] for r in by.values())
                                     / declared, 4) if declared else 0.0,
           **{k: sum(r[k] for r in by.values()) for k in ("chops_made", "chops_made_la", "chops_suffered",
                                                         "chops_suffered_la", "den_paid", "cong",
                                                         "cong_inflicted", "opp_sam_declared")},
           "zero_sum": all(r["zero_sum"] for r in by.values()),
           "seconds": round(sum(r["seconds"] for r in by.values()), 3),
           **({"workers": max(r["workers"] for r in by.values() if "workers" in r),
               "wall_seconds": round(sum(r.get("wall_seconds", r["seconds"]) for r in by.values()), 3)}
              if any("workers" in r for r in by.values()) else {}),
           "score_hist": {str(k): v for k, v in sorted(hist.items())}}
    if "agent_settings" in first:
        top["agent_settings"] = first["agent_settings"]
    return top
