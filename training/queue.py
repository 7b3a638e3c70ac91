"""Rollouts waiting for the learner, never handed out older than they may be.

Workers deliver whenever they finish; the learner takes a batch when it is
free.  A rollout made with weights more than ``max_lag`` updates behind the
learner's is dropped when the learner takes its next batch, and counted
(the trainer logs ``charts/dropped_rollouts``): the learner never trains on
stale data unknowingly.  The queue's bound is the trainer's: it asks a
worker again only while fewer than ``learner.queue_rollouts`` rollouts are
in flight or waiting here.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class RolloutQueue:
    """Rollouts (``{"batch", "stats", "version"}``, ``version`` = the updates behind their weights), oldest first."""

    def __init__(self, max_lag: int):
        self.items: deque[dict[str, Any]] = deque()
        self.max_lag = max_lag

    def __len__(self) -> int:
        return len(self.items)

    def put(self, rollout: dict[str, Any]) -> None:
        self.items.append(rollout)

    def decisions(self) -> int:
        """Learner decisions waiting."""
        return sum(len(r["batch"]["act"]) for r in self.items)

    def take(self, updates: int, decisions: int) -> tuple[list[dict[str, Any]], int]:
        """``(rollouts, dropped)``: every waiting rollout, once they hold at least ``decisions`` learner
        decisions (none before), for a learner that has made ``updates`` updates; first every rollout lagging
        more than ``max_lag`` updates is dropped and counted.  Taking all (the queue is bounded) keeps
        nothing waiting to grow older."""
        fresh = deque(r for r in self.items if updates - r["version"] <= self.max_lag)
        dropped = len(self.items) - len(fresh)
        self.items = fresh
        if self.decisions() < decisions:
            return [], dropped
        out, self.items = list(self.items), deque()
        return out, dropped
