"""The match loop of a duplicate-deal evaluation: every rotation of a chunk of deals, played and
summed into per-game statistics.

Games run through the batched engine when both agents have ``act_batch``, else one decision at a
time through :class:`Game`; either way the engine checks every move and an illegal one stops the
run with a message naming the agent.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Callable

import numpy as np
from numba import njit

from sam_env import core
from sam_env.actions import NUM_ACTIONS, move_str
from sam_env.game import Game, GameError
from sam_env.table import Table

from ..base import Agent

MAX_DECISIONS = 1024  # per game; real games take far fewer
Tick = Callable[[int], None]  # the games of a chunk ended so far (a long chunk's progress)


class IllegalMoveError(RuntimeError):
    """An agent chose a move the rules do not allow."""


# ---- the batched engine loop -----------------------------------------------------------
@njit(cache=True)
def _start_rotations(states, rule_array, hands, openers, n):
    for g in range(states.shape[0]):
        d = g // n
        core.start_game(states[g], rule_array, hands[d], n, openers[d], 0)


@njit(cache=True)
def _apply_rows(states, rule_array, rows, acts, log, logging):
    """Check and apply ``acts[i]`` to game ``rows[i]``; return the first bad i, or -1."""
    for i in range(rows.shape[0]):
        st = states[rows[i]]
        a = acts[i]
        if a < 0 or a >= NUM_ACTIONS or core.check_action(st, rule_array, st[core.O_TO_ACT], a) != core.OK:
            return i
        if logging:
            t = st[core.O_NDEC]
            if t >= log.shape[1]:
                return i
            log[rows[i], t] = a
        core.apply_action(st, rule_array, a)
    return -1


def _obs_for(agent: Agent, states: np.ndarray, rule_array: np.ndarray) -> np.ndarray | None:
    return agent.observations(states, rule_array, None) if agent.needs_obs else None


def _play_batched(agent: Agent, opp: Agent, table: Table, hands: np.ndarray, openers: np.ndarray,
                  logging: bool, tick: Tick | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Play every rotation of the deals at once; returns the final states (and move logs)."""
    rule_array, n = table.rules.to_array(), table.players
    g_count = hands.shape[0] * n
    states = core.new_states(g_count)
    _start_rotations(states, rule_array, hands, openers, n)
    a_seat = np.tile(np.arange(n, dtype=np.int32), hands.shape[0])
    log = np.full((g_count, MAX_DECISIONS if logging else 1), -1, dtype=np.int16)
    ended = 0
    while True:
        live = np.flatnonzero(states[:, core.O_PHASE] != core.PH_OVER)
        if live.size == 0:
            break
        if tick is not None and g_count - live.size > ended:
            ended = g_count - live.size
            tick(ended)
        st_live = states[live]
        masks = np.zeros((live.size, NUM_ACTIONS), dtype=np.int8)
        core.batch_legal_mask(st_live, rule_array, masks)
        is_a = st_live[:, core.O_TO_ACT] == a_seat[live]
        acts = np.empty(live.size, dtype=np.int64)
        for who, sel in ((agent, is_a), (opp, ~is_a)):
            idx = np.flatnonzero(sel)
            if idx.size:
                sub = st_live[idx]
                acts[idx] = who.act_batch(sub, rule_array, _obs_for(who, sub, rule_array), masks[idx])
        bad = _apply_rows(states, rule_array, live.astype(np.int64), acts, log, logging)
        if bad >= 0:
            who = agent if is_a[bad] else opp
            g = int(live[bad])
            raise IllegalMoveError(
                f"agent {who.name!r} chose an illegal move "
                f"{move_str(int(acts[bad])) if 0 <= acts[bad] < NUM_ACTIONS else int(acts[bad])!r}"
                f" for seat {int(st_live[bad, core.O_TO_ACT])} (deal {g // n}, rotation {g % n});"
                f" legal: {[move_str(a) for a in np.flatnonzero(masks[bad])]}")
    return states, (log if logging else None)


def _game_of(table: Table, hand: np.ndarray, opener: int) -> Game:
    n = table.players
    return Game(table.rules, n, [sorted(int(c) for c in hand[s]) for s in range(n)], int(opener))


def _play_slow(agent: Agent, opp: Agent, table: Table, hands: np.ndarray, openers: np.ndarray,
               tick: Tick | None = None) -> tuple[np.ndarray, list[Game]]:
    """One decision at a time through Game (agents without a batched form, e.g. HTTP)."""
    n = table.players
    games: list[Game] = []
    states = core.new_states(hands.shape[0] * n)
    for d in range(hands.shape[0]):
        for a_seat in range(n):
            g = _game_of(table, hands[d], int(openers[d]))
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
            if tick is not None and len(games) < len(states):
                tick(len(games))
    return states, games


def play_chunk(agent: Agent, opp: Agent, table: Table, hands: np.ndarray, openers: np.ndarray,
               logging: bool, tick: Tick | None = None) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """One chunk of deals, every rotation: its statistics and (``logging``) its games as records.
    ``tick(games)`` hears how many of its games have ended, while some are still being played."""
    n = table.players
    records: list[dict[str, Any]] = []
    if agent.batched and opp.batched:
        states, log = _play_batched(agent, opp, table, hands, openers, logging, tick)
        if log is not None:
            for g in range(states.shape[0]):
                game = _game_of(table, hands[g // n], int(openers[g // n]))
                for act in log[g, :states[g, core.O_NDEC]]:
                    game.apply(int(act))
                records.append(game.to_record())
    else:
        states, played = _play_slow(agent, opp, table, hands, openers, tick)
        if logging:
            records = [g.to_record() for g in played]
    return _stats(states, n), records



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


def summarize(parts: list[dict[str, np.ndarray]], n: int) -> dict[str, Any]:
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

