"""Duplicate-deal evaluation: ``samloc eval`` and :func:`evaluate`.

Card luck dominates single games of Sâm lốc, so every seeded deal is played
once with the agent in *each* seat and the opponents in the others.  Whatever
the cards alone decide cancels out: averaged over the rotations, a deal the
agents cannot influence scores exactly 0.  The unit of the confidence
interval is therefore the deal (the mean of its rotations), not the game.

The deals are those of ``seed`` in order (:mod:`sam_env.seeding`: the games
``SamLoc-v0`` reset with that seed deals, one per episode).  Deals that end at
once in an instant win need no decision and are skipped
(their duplicate score is 0 by construction); ``instant_deals_skipped`` counts
them.  Games run through the batched engine when both agents have
``act_batch``, else one decision at a time through :class:`Game`; either way
the engine checks every move and an illegal one stops the run with a message
naming the agent.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import shlex
import shutil
import sys
import time
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from numba import njit

from sam_env import core, seeding
from sam_env.actions import NUM_ACTIONS, move_str
from sam_env.cards import HAND_SIZE
from sam_env.game import Game, GameError
from sam_env.atomic import write_atomic, write_json_atomic, write_with
from sam_env.record import write_jsonl
from sam_env.rules import PRESET_NAMES, RuleSet, RulesError

from .base import Agent
from .registry import make_agent, parse_spec

MAX_DECISIONS = 1024  # per game; real games take far fewer


class IllegalMoveError(RuntimeError):
    """An agent chose a move the rules do not allow."""


# ---- the batched engine loop -----------------------------------------------------------
@njit(cache=True)
def _start_rotations(states, ru, hands, openers, n):
    for g in range(states.shape[0]):
        d = g // n
        core.start_game(states[g], ru, hands[d], n, openers[d], 0)


@njit(cache=True)
def _apply_rows(states, ru, rows, acts, log, logging):
    """Check and apply ``acts[i]`` to game ``rows[i]``; return the first bad i, or -1."""
    for i in range(rows.shape[0]):
        st = states[rows[i]]
        a = acts[i]
        if a < 0 or a >= NUM_ACTIONS or core.check_action(st, ru, st[core.O_TO_ACT], a) != core.OK:
            return i
        if logging:
            t = st[core.O_NDEC]
            if t >= log.shape[1]:
                return i
            log[rows[i], t] = a
        core.apply_action(st, ru, a)
    return -1


def _obs_for(agent: Agent, states: np.ndarray, ru: np.ndarray) -> np.ndarray | None:
    return agent.observations(states, ru, None) if agent.needs_obs else None


def _play_batched(agent: Agent, opp: Agent, rs: RuleSet, n: int, hands: np.ndarray,
                  openers: np.ndarray, logging: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Play every rotation of the deals at once; returns the final states (and move logs)."""
    ru = rs.to_array()
    g_count = hands.shape[0] * n
    states = core.new_states(g_count)
    _start_rotations(states, ru, hands, openers, n)
    a_seat = np.tile(np.arange(n, dtype=np.int32), hands.shape[0])
    log = np.full((g_count, MAX_DECISIONS if logging else 1), -1, dtype=np.int16)
    while True:
        live = np.flatnonzero(states[:, core.O_PHASE] != core.PH_OVER)
        if live.size == 0:
            break
        st_live = states[live]
        masks = np.zeros((live.size, NUM_ACTIONS), dtype=np.int8)
        core.batch_legal_mask(st_live, ru, masks)
        is_a = st_live[:, core.O_TO_ACT] == a_seat[live]
        acts = np.empty(live.size, dtype=np.int64)
        for who, sel in ((agent, is_a), (opp, ~is_a)):
            idx = np.flatnonzero(sel)
            if idx.size:
                sub = st_live[idx]
                acts[idx] = who.act_batch(sub, ru, _obs_for(who, sub, ru), masks[idx])
        bad = _apply_rows(states, ru, live.astype(np.int64), acts, log, logging)
        if bad >= 0:
            who = agent if is_a[bad] else opp
            g = int(live[bad])
            raise IllegalMoveError(
                f"agent {who.name!r} chose an illegal move "
                f"{move_str(int(acts[bad])) if 0 <= acts[bad] < NUM_ACTIONS else int(acts[bad])!r}"
                f" for seat {int(st_live[bad, core.O_TO_ACT])} (deal {g // n}, rotation {g % n});"
                f" legal: {[move_str(a) for a in np.flatnonzero(masks[bad])]}")
    return states, (log if logging else None)


def _game_of(rs: RuleSet, n: int, hand: np.ndarray, opener: int) -> Game:
    return Game(rs, n, [sorted(int(c) for c in hand[s]) for s in range(n)], int(opener))


def _play_slow(agent: Agent, opp: Agent, rs: RuleSet, n: int, hands: np.ndarray,
               openers: np.ndarray) -> tuple[np.ndarray, list[Game]]:
    """One decision at a time through Game (agents without a batched form, e.g. HTTP)."""
    games: list[Game] = []
    states = core.new_states(hands.shape[0] * n)
    for d in range(hands.shape[0]):
        for a_seat in range(n):
            g = _game_of(rs, n, hands[d], int(openers[d]))
            while g.result is None:
                seat = g.to_act
                who = agent if seat == a_seat else opp
                a = who.act(g, seat)
                try:
                    g.apply(int(a))
                except (GameError, ValueError) as exc:
                    raise IllegalMoveError(f"agent {who.name!r} chose an illegal move for seat {seat}"
                                           f" (deal {d}, rotation {a_seat}): {exc}") from None
            states[d * n + a_seat] = g.state
            games.append(g)
    return states, games


def _play_chunk(agent: Agent, opp: Agent, rs: RuleSet, n: int, hands: np.ndarray, openers: np.ndarray,
                logging: bool) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """One chunk of deals, every rotation: its statistics and (``logging``) its games as records."""
    records: list[dict[str, Any]] = []
    if agent.batched and opp.batched:
        states, log = _play_batched(agent, opp, rs, n, hands, openers, logging)
        if log is not None:
            for g in range(states.shape[0]):
                game = _game_of(rs, n, hands[g // n], int(openers[g // n]))
                for act in log[g, :states[g, core.O_NDEC]]:
                    game.apply(int(act))
                records.append(game.to_record())
    else:
        states, played = _play_slow(agent, opp, rs, n, hands, openers)
        if logging:
            records = [g.to_record() for g in played]
    return _stats(states, n), records


# ---- chunks played side by side: worker processes ------------------------------------------------
_pool_agents: tuple[Agent, Agent] | None = None  # a worker process's two agents, built once


def _pool_init(agent: str, opponents: str, seed: int) -> None:
    """A worker's start: one thread (the workers are sized to cores; set before the agents import torch),
    the agents built as evaluate builds them, so each chunk plays what it plays in one process."""
    global _pool_agents
    os.environ["OMP_NUM_THREADS"] = "1"
    _pool_agents = (make_agent(agent, seed=seed), make_agent(opponents, seed=seed + 1))


def _pool_chunk(rs: RuleSet, n: int, lo: int, hi: int, hands: np.ndarray, openers: np.ndarray,
                logging: bool) -> tuple[int, int, dict[str, np.ndarray], list[dict[str, Any]], float]:
    assert _pool_agents is not None, "_pool_init runs first"
    a, b = _pool_agents
    t0 = time.perf_counter()
    part, recs = _play_chunk(a, b, rs, n, hands, openers, logging)
    return lo, hi, part, recs, time.perf_counter() - t0


def _workers(workers: int) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, not {workers!r}")
    return workers


class EvalPool:
    """Worker processes that play an evaluation's chunks side by side (``samloc eval --workers N``),
    each holding its own copy of the two agents.  Only replayable agents (:attr:`Agent.replayable`)
    qualify: their chunks play alone what they play in one process, so the result is the one-process
    result to the digit, whatever the number of workers.  One pool serves every table of a run
    (:func:`evaluate_tables`); the agents are given as specs, which each worker loads."""

    def __init__(self, agent: "str | Agent", opponents: "str | Agent", seed: int, workers: int):
        if not (isinstance(agent, str) and isinstance(opponents, str)):
            raise ValueError("worker processes load the agents themselves: give them as specs (strings),"
                             " not Agent objects")
        if _workers(workers) < 2:
            raise ValueError(f"an evaluation pool needs at least 2 workers, not {workers!r}")
        self.key = (agent, opponents, int(seed))
        self.workers = workers
        self._executor = ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                                             initializer=_pool_init, initargs=self.key)

    def submit(self, *args: Any) -> Future:
        return self._executor.submit(_pool_chunk, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "EvalPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- statistics ---------------------------------------------------------------------------
def _stats(states: np.ndarray, n: int) -> dict[str, np.ndarray]:
    g = states.shape[0]
    a_seat = np.tile(np.arange(n), g // n)
    rows = np.arange(g)
    scores = states[:, core.O_SCORE:core.O_SCORE + n].astype(np.int64)
    sizes = states[:, core.O_SIZE:core.O_SIZE + n]
    end = states[:, core.O_END]
    winner = states[:, core.O_WINNER]
    declarer = states[:, core.O_DECLARER]
    nch = states[:, core.O_NCHOPS]
    ch = states[:, core.O_CHOPS:core.O_CHOPS + 3 * core.MAX_CHOPS].reshape(g, core.MAX_CHOPS, 3)
    valid = np.arange(core.MAX_CHOPS)[None, :] < nch[:, None]
    made = valid & (ch[:, :, 1] == a_seat[:, None])
    suffered = valid & (ch[:, :, 0] == a_seat[:, None])
    won = end == core.END_WON
    a_cong = won & (winner != a_seat) & (sizes[rows, a_seat] == core.HAND)
    opp_cong = np.where(won & (winner == a_seat), (sizes == core.HAND).sum(1), 0)
    return {
        "score": scores[rows, a_seat], "sum": scores.sum(1), "end": end,
        "win": winner == a_seat, "a_sam": declarer == a_seat,
        "opp_sam": (declarer >= 0) & (declarer != a_seat),
        "sam_ok": end == core.END_SAM_SUCCESS,
        "chops_made": made.sum(1), "chops_made_la": np.where(made, ch[:, :, 2], 0).sum(1),
        "chops_suffered": suffered.sum(1), "chops_suffered_la": np.where(suffered, ch[:, :, 2], 0).sum(1),
        "den": states[:, core.O_DEN] == a_seat, "a_cong": a_cong, "opp_cong": opp_cong,
        "decisions": states[:, core.O_NDEC],
    }


def _summary(parts: list[dict[str, np.ndarray]], n: int) -> dict[str, Any]:
    s = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    games = len(s["score"])
    deals = games // n
    deal_means = s["score"].reshape(deals, n).mean(1)
    mean = float(deal_means.mean()) if deals else 0.0
    sd = float(deal_means.std(ddof=1)) if deals > 1 else 0.0
    half = 1.96 * sd / math.sqrt(deals) if deals > 1 else float("inf")
    declared = int(s["a_sam"].sum())
    opp_declared = int(s["opp_sam"].sum())
    ends = Counter(core.END_NAMES[int(e)] for e in s["end"])
    return {
        "deals": deals, "games": games,
        "mean_score": round(mean, 4), "ci95": [round(mean - half, 4), round(mean + half, 4)],
        "deal_sd": round(sd, 4),
        "win_rate": round(float(s["win"].mean()), 4), "equal_play_win_rate": round(1.0 / n, 4),
        "sam_declared": declared,
        "sam_success_rate": round(float((s["a_sam"] & s["sam_ok"]).sum() / declared), 4) if declared else 0.0,
        "opp_sam_declared": opp_declared,
        "opp_sam_success_rate": (round(float((s["opp_sam"] & s["sam_ok"]).sum() / opp_declared), 4)
                                 if opp_declared else 0.0),
        "chops_made": int(s["chops_made"].sum()), "chops_made_la": int(s["chops_made_la"].sum()),
        "chops_suffered": int(s["chops_suffered"].sum()),
        "chops_suffered_la": int(s["chops_suffered_la"].sum()),
        "den_paid": int(s["den"].sum()), "cong": int(s["a_cong"].sum()),
        "cong_inflicted": int(s["opp_cong"].sum()),
        "ends": dict(sorted(ends.items())),
        "zero_sum": bool((s["sum"] == 0).all()),
        "decisions_per_game": round(float(s["decisions"].mean()), 2),
        "score_hist": {str(k): int(v) for k, v in sorted(Counter(s["score"].tolist()).items())},
    }


# ---- resumable runs: finished chunks on disk ---------------------------------------------------
CHUNKS = "chunks"  # the folder of finished chunks inside a run's --out folder, until the run completes
CHUNKS_FORMAT = "samloc-eval-chunks/1"


def agent_files(spec: "str | Agent") -> dict[str, str]:
    """The sha256 of each file a spec loads (weights, belief, ONNX), so finished chunks are never mixed
    with games of other weights under the same path; {} for built-in and remote agents."""
    if not isinstance(spec, str):
        return {}
    s = parse_spec(spec)
    if s.kind not in ("checkpoint", "search", "onnx"):
        return {}
    path = Path(s.target)
    files = [path] if path.is_file() else sorted(f for f in path.iterdir()
                                                 if f.suffix in (".safetensors", ".onnx") and f.is_file())
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def not_resumable(agents: Sequence[Agent], save_games: str | None) -> str | None:
    """Why an evaluation of ``agents`` cannot be continued from its finished chunks, or None if it can:
    a chunk must play the same games alone as inside the whole run."""
    if save_games is not None:
        return "--save-games writes every game, and the games of chunks played before are not kept"
    return next((f"{a.name} plays differently alone than in the whole run (a sampling temperature, a"
                 " random stream, a deadline or a remote server)" for a in agents if not a.replayable), None)


class ChunkStore:
    """One table's finished chunks (the statistics of their games), kept until the evaluation completes,
    so that an interrupted run continues where it stopped (``samloc eval --resume``).

    Sound only for replayable agents (:attr:`Agent.replayable`): a chunk then plays the same games alone
    as inside the whole run, so a resumed run's result is the uninterrupted one's.  ``key`` says what
    was evaluated; chunks of any other evaluation are refused, never mixed in."""

    def __init__(self, folder: str | Path, key: dict[str, Any]):
        self.folder = Path(folder)
        self.key = json.loads(json.dumps(key))  # as it reads back (tuples as lists)
        keyfile = self.folder / "key.json"
        if keyfile.is_file():
            saved = json.loads(keyfile.read_text(encoding="utf-8"))
            diff = sorted(k for k in self.key.keys() | saved.keys() if self.key.get(k) != saved.get(k))
            if diff:
                raise ValueError(f"{self.folder} holds chunks of another evaluation (it differs in"
                                 f" {', '.join(diff)}); use another --out")
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json_atomic(keyfile, self.key)

    def _path(self, lo: int, hi: int) -> Path:
        return self.folder / f"deals_{lo:08d}_{hi:08d}.npz"

    def load(self, lo: int, hi: int) -> tuple[dict[str, np.ndarray], float] | None:
        """A finished chunk's statistics and the seconds it took, or None if it is still to play."""
        path = self._path(lo, hi)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            part = {k: z[k] for k in z.files if k != "seconds"}
            return part, float(z["seconds"])

    def save(self, lo: int, hi: int, part: dict[str, np.ndarray], seconds: float) -> None:
        buf = io.BytesIO()
        np.savez(buf, seconds=np.float64(seconds), **part)
        write_atomic(self._path(lo, hi), buf.getvalue())

    def done(self) -> int:
        return sum(1 for _ in self.folder.glob("deals_*.npz"))


# ---- the Python entry point ------------------------------------------------------------------
def evaluate(agent: "str | Agent", opponents: "str | Agent",
             rules: "str | Mapping[str, Any] | RuleSet" = "hoi_quan_bai", players: int = 4,
             deals: int = 1000, seed: int = 0, *, save_games: str | None = None,
             progress: Callable[[int, int], None] | None = None, chunk: int = 512,
             deal_scores: bool = False, store: str | Path | None = None, workers: int = 1,
             pool: EvalPool | None = None) -> dict[str, Any]:
    """Duplicate evaluation of ``agent`` against ``opponents`` (specs or Agents).

    Returns a JSON-able dict: ``mean_score`` (the agent's lá per game) with its
    ``ci95``, ``win_rate``, ``sam_declared``/``sam_success_rate``, chops made and
    suffered, ``den_paid``, ``cong``, the score histogram, speed.  Identical
    results for the same arguments.  ``save_games`` writes every game as
    ``samloc/1`` JSON Lines.  ``deal_scores`` adds the agent's mean lá in each deal (over its
    rotations), deal by deal: a league's bootstrap resamples them (:mod:`agents.league`).
    ``store``: a folder that keeps each finished chunk (:class:`ChunkStore`); chunks already there are
    taken, not played again.  Both agents must be replayable, and ``save_games`` is then refused (the
    games of chunks played earlier are not kept).  ``seconds`` counts the chunks' own play time.
    ``workers`` > 1: the chunks are played side by side in that many processes (:class:`EvalPool`;
    replayable agents given as specs), with the one-process result; ``wall_seconds`` then says how
    long it took.  ``pool``: an :class:`EvalPool` of these agents and seed to play them in instead.
    """
    rs = RuleSet.parse(rules)
    n = rs.check_players(players)
    if isinstance(deals, bool) or not isinstance(deals, int) or deals < 1:
        raise ValueError(f"deals must be a positive integer, not {deals!r}")
    _workers(workers)
    a = make_agent(agent, seed=seed)
    b = make_agent(opponents, seed=seed + 1)
    if workers > 1 or pool is not None:
        why = not_resumable((a, b), None)
        if why is not None:
            raise ValueError(f"the chunks cannot be played apart by worker processes: {why}")
        if pool is not None and pool.key != (agent, opponents, seed):
            raise ValueError(f"the pool plays {pool.key[0]} against {pool.key[1]} with seed {pool.key[2]},"
                             f" not {agent} against {opponents} with seed {seed}")
    chunks = None
    if store is not None:
        why = not_resumable((a, b), save_games)
        if why is not None:
            raise ValueError(f"this evaluation cannot keep its finished chunks: {why}")
        chunks = ChunkStore(store, {
            "format": CHUNKS_FORMAT, "agent": a.name, "agent_settings": a.settings, "opponents": b.name,
            "agent_files": agent_files(agent), "opponent_files": agent_files(opponents),
            "rules": rs.to_dict(), "players": n, "deals": deals, "seed": seed, "chunk": chunk})
    ru = rs.to_array()
    hands = np.zeros((deals, core.MAX_PLAYERS, HAND_SIZE), dtype=np.int64)
    openers = np.zeros(deals, dtype=np.int64)
    skipped = int(core.playable_deals(seeding.stream(seed), 0, ru, n, hands, openers))
    logging = save_games is not None
    parts: dict[int, dict[str, np.ndarray]] = {}
    records: dict[int, list[dict[str, Any]]] = {}
    seconds = 0.0
    resumed = 0
    done_deals = 0
    todo: list[tuple[int, int]] = []
    for lo in range(0, deals, chunk):
        hi = min(deals, lo + chunk)
        done = chunks.load(lo, hi) if chunks is not None else None
        if done is None:
            todo.append((lo, hi))
            continue
        parts[lo] = done[0]
        seconds += done[1]
        resumed += 1
        done_deals += hi - lo
        if progress is not None:
            progress(done_deals, deals)

    def finished(lo: int, hi: int, part: dict[str, np.ndarray], recs: list[dict[str, Any]], dt: float) -> None:
        nonlocal seconds, done_deals
        parts[lo], records[lo] = part, recs
        seconds += dt
        done_deals += hi - lo
        if chunks is not None:
            chunks.save(lo, hi, part, dt)
        if progress is not None:
            progress(done_deals, deals)

    t_wall = time.perf_counter()
    side_by_side = (workers > 1 or pool is not None) and len(todo) > 1
    if not side_by_side:
        for lo, hi in todo:
            t0 = time.perf_counter()
            part, recs = _play_chunk(a, b, rs, n, hands[lo:hi], openers[lo:hi], logging)
            finished(lo, hi, part, recs, time.perf_counter() - t0)
    else:
        own = pool is None
        run_in = EvalPool(agent, opponents, seed, min(workers, len(todo))) if pool is None else pool
        processes = run_in.workers
        futures = [run_in.submit(rs, n, lo, hi, hands[lo:hi], openers[lo:hi], logging)
                   for lo, hi in todo]
        try:
            for fut in as_completed(futures):
                finished(*fut.result())
        finally:
            for fut in futures:
                fut.cancel()
            if own:
                run_in.close()
    wall = time.perf_counter() - t_wall
    parts_in_order = [parts[lo] for lo in sorted(parts)]
    out = {"agent": a.name, "opponents": b.name, "rules": rs.name, "players": n, "seed": seed,
           **_summary(parts_in_order, n), "instant_deals_skipped": skipped,
           "seconds": round(seconds, 3),
           "games_per_s": round(deals * n / seconds, 1) if seconds > 0 else None,
           "batched": a.batched and b.batched}
    if side_by_side:  # ``seconds`` sums the chunks' times (games_per_s: one process's rate); this is the run's
        out["workers"], out["wall_seconds"] = processes, round(wall, 3)
    if resumed:
        out["resumed_chunks"] = resumed
    if deal_scores:
        out["deal_scores"] = np.concatenate([p["score"] for p in parts_in_order]).reshape(deals, n).mean(1).tolist()
    if a.settings:  # e.g. a search's: the name alone does not say how it played
        out["agent_settings"] = a.settings
    if save_games is not None:
        Path(save_games).parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(save_games, [r for lo in sorted(records) for r in records[lo]])
        out["saved_games"] = save_games
    return out


# ---- reports -----------------------------------------------------------------------------------
def _markdown(res: dict[str, Any]) -> str:
    lines = [f"# Evaluation: {res['agent']} vs {res['opponents']}", "",
             "Duplicate deals: each deal played once per seat, the agent in every seat.",
             f"Seed {res['seed']}, {next(iter(res['by_table'].values()))['deals']} deals per table."
             + ("  Agent settings: " + ", ".join(f"{k}={v}" for k, v in res["agent_settings"].items())
                if res.get("agent_settings") else ""), "",
             *([f"Command: `{res['command']}`", ""] if res.get("command") else []),
             "| table | games | mean lá | 95% CI | win rate (equal play) | Sâm declared (success) "
             "| chops made / suffered (lá) | đền paid | cóng (inflicted) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in res["by_table"].items():
        off = " (out of training distribution)" if r.get("out_of_distribution") else ""
        lines.append(
            f"| {name}{off} | {r['games']} | {r['mean_score']:+.3f} | [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}] "
            f"| {r['win_rate']:.3f} ({r['equal_play_win_rate']:.3f}) "
            f"| {r['sam_declared']} ({r['sam_success_rate']:.0%}) "
            f"| {r['chops_made']} / {r['chops_suffered']} ({r['chops_made_la']} / {r['chops_suffered_la']}) "
            f"| {r['den_paid']} | {r['cong']} ({r['cong_inflicted']}) |")
    lines += ["", "Mean lá: the agent's net score per game (scores of a game sum to 0).",
              "The interval treats each deal (the mean over its rotations) as one sample.", "",
              "![score distribution](scores.png)", ""]
    for name, r in res["by_table"].items():
        ends = ", ".join(f"{k} {v}" for k, v in r["ends"].items())
        lines.append(f"- {name}: game ends: {ends}; opponents declared Sâm {r['opp_sam_declared']} times "
                     f"({r['opp_sam_success_rate']:.0%} success); "
                     f"{r['instant_deals_skipped']} instant-win deals "
                     f"skipped; {r['games_per_s']} games/s.")
    return "\n".join(lines) + "\n"


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(res["by_table"])
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 3.2 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        r = res["by_table"][name]
        xs = np.array([int(k) for k in r["score_hist"]])
        ys = np.array(list(r["score_hist"].values()))
        ax.bar(xs, ys, width=0.9, color="#3b7dd8")
        ax.axvline(0, color="black", lw=0.8)
        ax.axvline(r["mean_score"], color="#d84b3b", lw=1.5, label=f"mean {r['mean_score']:+.2f} lá")
        ax.set_yscale("log")
        ax.set_xlabel(f"{res['agent']}'s lá per game")
        ax.set_ylabel("games")
        ax.set_title(f"{name}: {res['agent']} vs {res['opponents']} "
                     f"({r['games']} games)")
        ax.legend()
    fig.tight_layout()
    write_with(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)


def write_report(res: dict[str, Any], out_dir: str | Path) -> Path:
    """``result.json``, ``report.md`` and ``scores.png`` in ``out_dir``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    write_atomic(d / "result.json", json.dumps(res, indent=2, ensure_ascii=False) + "\n")
    write_atomic(d / "report.md", _markdown(res))
    _plot(res, d / "scores.png")
    return d


def table_name(rules: "str | Mapping[str, Any] | RuleSet", players: int) -> str:
    """``rules/players``, the key of one table in reports (``hoi_quan_bai/4``)."""
    return f"{RuleSet.parse(rules).name}/{players}"


def evaluate_tables(agent: "str | Agent", opponents: "str | Agent", tables: Sequence[tuple[Any, int]], deals: int,
                    seed: int, save_games: str | None = None,
                    progress: Callable[[str, int, int], None] | None = None,
                    store: str | Path | None = None, workers: int = 1) -> dict[str, Any]:
    """:func:`evaluate` at several tables (rule set, players); ``by_table`` holds each table's result
    and the top level pools them (the mean of the tables' means, its CI from theirs).  ``store``: the
    folder of finished chunks, a subfolder per table (:class:`ChunkStore`).  ``workers`` > 1: one
    :class:`EvalPool` plays the chunks of every table."""
    by: dict[str, Any] = {}
    pool = EvalPool(agent, opponents, seed, workers) if _workers(workers) > 1 else None
    try:
        for rules, players in tables:
            name = table_name(rules, players)
            save = None
            if save_games is not None:
                save = save_games if len(tables) == 1 else str(Path(save_games).with_suffix(
                    "." + name.replace("/", "_").replace("+", "_") + ".jsonl"))
            by[name] = evaluate(agent, opponents, rules, players, deals, seed, save_games=save,
                                progress=None if progress is None else (lambda d, t, k=name: progress(k, d, t)),
                                store=None if store is None else Path(store) / _safe(name), pool=pool)
    finally:
        if pool is not None:
            pool.close()
    first = next(iter(by.values()))
    if len(by) == 1:
        top = dict(first)
    else:
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
    top["by_table"] = by
    return top


def _safe(s: str) -> str:
    """``s`` as a file name: letters, digits and ``-_.``, the rest ``_``, at most 40 characters."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)[-40:]


# ---- the command ------------------------------------------------------------------------------
def parse_tables(tables: str | None, rules: str | None, players: str | None) -> list[tuple[RuleSet, int]] | None:
    """The tables ``samloc eval`` is asked for: ``--tables all|R/P,...``, or ``--rules`` x ``--players``
    (lists skip the counts a rule set does not allow); None when none was asked for.  RulesError if bad."""
    if tables is not None:
        if rules is not None or players is not None:
            raise RulesError("give --tables, or --rules and --players, not both")
        if tables.strip() == "all":
            return [(RuleSet.preset(r), p) for r in PRESET_NAMES for p in range(2, RuleSet.preset(r).max_players + 1)]
        out = []
        for item in (t.strip() for t in tables.split(",") if t.strip()):
            name, sep, count = item.rpartition("/")
            if not sep or not count.isdigit():
                raise RulesError(f"--tables: {item!r} is not RULES/PLAYERS (e.g. hoi_quan_bai/4) or all")
            rs = RuleSet.parse(name)
            out.append((rs, rs.check_players(int(count))))
        if not out:
            raise RulesError("--tables needs at least one table")
        return out
    if rules is None and players is None:
        return None
    names = [r.strip() for r in (rules or "hoi_quan_bai").split(",") if r.strip()]
    try:
        counts = [int(p) for p in (players or "4").split(",") if p.strip()]
    except ValueError:
        raise RulesError(f"--players must be a number or a comma-separated list, not {players!r}") from None
    if not names or not counts:
        raise RulesError("--rules and --players need at least one value each")
    sets = [RuleSet.parse(r) for r in names]
    if len(counts) == 1:
        return [(rs, rs.check_players(counts[0])) for rs in sets]
    out = [(rs, p) for rs in sets for p in counts if 2 <= p <= rs.max_players]
    if not out:
        raise RulesError(f"no table of {', '.join(names)} allows {players} players")
    return out


def trained_tables(agent: Agent) -> tuple[tuple[RuleSet, int], ...] | None:
    """The (rules, players) tables an agent's network was trained for; None for rule-based agents."""
    t = agent.trained_tables
    return None if t is None else tuple((x.rules, x.players) for x in t)


def _chunk_folder(out: Path, agent: Agent, opponents: Agent, resume: bool,
                  save_games: str | None) -> Path | None:
    """Where the run keeps its finished chunks (``OUT/chunks``), or None when it cannot be resumed; an
    interrupted run's chunks are taken only with ``--resume`` (ValueError otherwise, and for a
    ``--resume`` that cannot be)."""
    folder = out / CHUNKS
    why = not_resumable((agent, opponents), save_games)
    if why is not None:
        if resume:
            raise ValueError(f"--resume cannot continue this run: {why}")
        return None
    if folder.exists() and not resume:
        raise ValueError(f"{out} holds an interrupted evaluation ({folder}): add --resume to continue it,"
                         " or choose another --out")
    return folder


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="samloc eval",
        description="Duplicate-deal evaluation: each seeded deal is played with the agent in every seat "
                    "and the opponents in the others, so the cards' luck cancels.")
    ap.add_argument("--agent", default="heuristic", help="agent spec (default heuristic): random, "
                    "heuristic[:variant], a checkpoint directory, a .onnx file, http://host:port")
    ap.add_argument("--opponents", default="random", help="spec of the other seats (default random)")
    ap.add_argument("--tables", help="RULES/PLAYERS,... or all (every preset at every allowed player count)")
    ap.add_argument("--rules", help="preset name(s), comma-separated (default: the agent's own tables if it "
                    "is a trained network, else hoi_quan_bai)")
    ap.add_argument("--players", help="player count(s), comma-separated (default: as --rules, else 4)")
    ap.add_argument("--off-table", action="store_true",
                    help="allow tables the agent's network was not trained for (reported as out of distribution)")
    ap.add_argument("--deals", type=int, default=1000, help="deals per table (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="end with the result as one JSON line")
    ap.add_argument("--out", help="run folder for result.json, report.md and scores.png "
                    "(default runs/eval/AGENT_vs_OPP__TIME)")
    ap.add_argument("--save-games", metavar="FILE.jsonl", help="write every game as samloc/1 JSON Lines")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes that play the chunks of 512 deals side by side (default 1; at most one"
                    " per core): the same result, sooner.  Replayable agents only")
    ap.add_argument("--resume", action="store_true",
                    help="continue an interrupted run: the same command with the same --out takes the chunks"
                    " of 512 deals it finished (kept in OUT/chunks until the run completes)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        tables = parse_tables(args.tables, args.rules, args.players)
        if args.deals < 1:
            raise ValueError("--deals must be at least 1")
        if args.workers < 1:
            raise ValueError("--workers must be at least 1")
        agent = make_agent(args.agent, seed=args.seed)
        opponents = make_agent(args.opponents)
        opponents.close()
        why = not_resumable((agent, opponents), None) if args.workers > 1 else None
        if why is not None:
            raise ValueError(f"--workers plays the chunks apart, which this run cannot: {why}")
        if args.resume and not args.out:
            raise ValueError("--resume continues the run in --out: give the --out folder of the"
                             " interrupted run")
        own = trained_tables(agent)
        if tables is None:
            tables = list(own) if own else [(RuleSet.preset("hoi_quan_bai"), 4)]
            if own and not args.json:
                print(f"tables: the ones {args.agent} was trained for: "
                      + ", ".join(table_name(r, p) for r, p in tables), file=sys.stderr)
        off = [table_name(r, p) for r, p in tables
               if own is not None and table_name(r, p) not in {table_name(*t) for t in own}]
        if off and not args.off_table:
            raise ValueError(f"{args.agent} was trained for {', '.join(table_name(*t) for t in own)}, not "
                             f"{', '.join(off)}; add --off-table to evaluate it there (out of training distribution)")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = (Path(args.out) if args.out
               else Path("runs") / "eval" / f"{_safe(agent.name)}_vs_{_safe(opponents.name)}__{stamp}")
        store = _chunk_folder(out, agent, opponents, args.resume, args.save_games)
        if args.resume and store is not None and not store.exists():
            print(f"samloc eval: {out} holds no interrupted run; starting at the first deal", file=sys.stderr)
    except (RulesError, ValueError) as exc:
        print(f"samloc eval: {exc}", file=sys.stderr)
        return 2

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    err = Console(stderr=True)
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("deals"), TimeRemainingColumn(), console=err, transient=args.json) as prog:
            tasks = {table_name(r, p): prog.add_task(table_name(r, p), total=args.deals) for r, p in tables}
            res = evaluate_tables(args.agent if args.workers > 1 else agent, args.opponents, tables, args.deals,
                                  args.seed, save_games=args.save_games,
                                  progress=lambda k, d, t: prog.update(tasks[k], completed=d), store=store,
                                  workers=args.workers)
    except (IllegalMoveError, RuntimeError, OSError, ValueError) as exc:
        print(f"samloc eval: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        kept = (f"; the finished chunks are kept in {store}: the same command with --resume continues it"
                if store is not None and store.exists() else "")
        print(f"samloc eval: interrupted{kept}", file=sys.stderr)
        return 130
    for name, r in res["by_table"].items():
        r["out_of_distribution"] = name in off
    res["out_of_distribution"] = off
    res["command"] = shlex.join(["samloc", "eval", *argv])  # what made the report, to make it again
    try:
        write_report(res, out)
    except OSError as exc:
        print(f"samloc eval: cannot write the report to {out}: {exc}", file=sys.stderr)
        return 1
    if store is not None:
        shutil.rmtree(store, ignore_errors=True)  # the report holds it all now
    res["report_dir"] = str(out)
    if not args.json:
        for name, r in res["by_table"].items():
            print(f"{name}, {r['deals']} deals ({r['games']} games): "
                  f"{res['agent']} vs {res['opponents']}: mean {r['mean_score']:+.3f} lá "
                  f"[{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}], win rate {r['win_rate']:.3f} "
                  f"(equal play {r['equal_play_win_rate']:.3f}), Sâm {r['sam_declared']} "
                  f"({r['sam_success_rate']:.0%} success), {r['games_per_s']} games/s"
                  + (f" in each of {r['workers']} processes ({r['wall_seconds']:.0f} s)" if "workers" in r else "")
                  + ("  [out of training distribution]" if r["out_of_distribution"] else ""))
        print(f"report: {out / 'report.md'}")
    print(json.dumps({k: v for k, v in res.items() if k not in ("by_table", "score_hist")} |
                     {"by_table": {k: {kk: vv for kk, vv in v.items() if kk != "score_hist"}
                                   for k, v in res["by_table"].items()}}, ensure_ascii=False))
    return 0
