"""Deterministic mode's schedule (``rollout.deterministic``): lanes, requests in order, and what a
checkpoint keeps of them.

Worker ``w`` serves lane ``w``.  A lane has one request out at a time, asked for when the lane's previous
rollout is *consumed*, and rollouts are consumed in request order, whatever order they arrive in.  So
the weights a request plays (its version) and the snapshot pool it meets are those the learner has at
a point of the request sequence, never a matter of timing.  A request carries the games its lane's
previous rollout left (:meth:`training.rollout.RolloutEngine.get_state`) and the seed
``mix(run seed, lane, request id)``: a restarted worker, or a resumed run, plays the same rollout for it.

A checkpoint keeps each lane's games, each lane's request out (id, version, pool) and the weights of the
versions those requests play that the learner no longer holds (at most one per lane, and a snapshot
since dropped from the pool), so a resumed run asks exactly those requests again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Weights = dict[str, np.ndarray]


@dataclass
class Request:
    """One rollout asked of a lane."""

    id: int
    lane: int
    version: int                       # updates behind the weights it plays
    weights: Weights                   # those weights
    pool: list[tuple[int, Weights]]    # the snapshot pool it plays against (id, weights), oldest first
    ref: Any = None                    # the rollout's ObjectRef while it is out (None: to be asked again)
    refs: Any = None                   # (weights ref, [(id, pool ref)]) once put into Ray


class Lanes:
    """The lanes' games and their requests out."""

    def __init__(self, count: int):
        self.count = count
        self.states: list[dict[str, np.ndarray] | None] = [None] * count  # None: not played yet
        self.out: dict[int, Request] = {}                   # request id -> request

    def next(self) -> Request | None:
        """The request to consume next: the oldest one out."""
        return self.out[min(self.out)] if self.out else None

    def of_lane(self, lane: int) -> Request | None:
        return next((r for r in self.out.values() if r.lane == lane), None)

    def ask(self, req: Request) -> None:
        self.out[req.id] = req

    def consumed(self, req: Request, state: dict[str, np.ndarray]) -> None:
        """``req``'s rollout is consumed; its lane goes on from ``state``."""
        del self.out[req.id]
        self.states[req.lane] = state

    def to_checkpoint(self, version: int, pool_ids: set[int]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, record)``: the lanes' games (``lane.<lane>.<key>``) and the weights of the versions
        the requests out play that a checkpoint does not hold otherwise (``bank.<version>.<name>``: not
        ``version``, the checkpoint's weights, nor a snapshot of ``pool_ids``); the record lists the
        requests out."""
        arrays: dict[str, np.ndarray] = {}
        for lane, st in enumerate(self.states):
            if st is not None:
                arrays |= {f"lane.{lane}.{k}": v for k, v in st.items()}
        bank: dict[int, Weights] = {}
        for req in self.out.values():
            for v, w in [(req.version, req.weights), *req.pool]:
                if v != version and v not in pool_ids:
                    bank[v] = w
        for v, w in bank.items():
            arrays |= {f"bank.{v}.{k}": a for k, a in w.items()}
        record = {"count": self.count,
                  "out": [[r.id, r.lane, r.version, [sid for sid, _ in r.pool]]
                          for r in sorted(self.out.values(), key=lambda r: r.id)]}
        return arrays, record

    @classmethod
    def from_checkpoint(cls, arrays: dict[str, np.ndarray], record: dict[str, Any],
                        known: dict[int, Weights]) -> "Lanes":
        """The lanes of :meth:`to_checkpoint`; ``known``: the weights of the checkpoint's version and of
        its pool's snapshots, by version.  ValueError when a request's weights are not there."""
        lanes = cls(int(record["count"]))
        weights = dict(known)
        for key, a in arrays.items():
            kind, num, name = key.split(".", 2)
            if kind == "lane":
                st = lanes.states[int(num)] or {}
                st[name] = a
                lanes.states[int(num)] = st
            elif kind == "bank":
                weights.setdefault(int(num), {})[name] = a
        for rid, lane, version, pool in record["out"]:
            missing = [v for v in (version, *pool) if v not in weights]
            if missing:
                raise ValueError(f"the weights of version {missing[0]} that request {rid} plays are not"
                                 " in the checkpoint")
            lanes.ask(Request(int(rid), int(lane), int(version), weights[version],
                              [(int(sid), weights[sid]) for sid in pool]))
        return lanes
