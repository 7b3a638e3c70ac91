"""Rollouts waiting for the learner: a bounded queue that never hands out data older than it may be.

Workers deliver whenever they finish; the learner takes a batch when it is
free.  The queue holds at most ``maxlen`` rollouts (when full, the oldest is
dropped: a learner that slow would find it too old anyway), and a rollout
made with weights more than ``max_lag`` updates behind the learner's is
dropped when the learner takes its next batch.  Both are counted, never
silent: the trainer logs them as ``charts/dropped_rollouts``.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class RolloutQueue:
    """Rollouts (``{"batch", "stats", "version"}``, ``version`` = the updates behind their weights), oldest first."""

    def __init__(self, maxlen: int, max_lag: int):
        self.items: deque[dict[str, Any]] = deque()
        self.maxlen, self.max_lag = maxlen, max_lag

    def __len__(self) -> int:
        return len(self.items)

    def put(self, rollout: dict[str, Any]) -> int:
        """Add a rollout; returns how many were dropped to make room (0 or 1)."""
        dropped = 0
        if len(self.items) >= self.maxlen:
            self.items.popleft()
            dropped = 1
        self.items.append(rollout)
        return dropped

    def take(self, updates: int, decisions: int) -> tuple[list[dict[str, Any]], int]:
        """``(rollouts, dropped)``: the oldest rollouts holding at least ``decisions`` learner decisions
        (none while the queue holds fewer), for a learner that has made ``updates`` updates; first every
        rollout lagging more than ``max_lag`` updates is dropped and counted."""
        fresh = [r for r in self.items if updates - r["version"] <= self.max_lag]
        dropped = len(self.items) - len(fresh)
        self.items = deque(fresh)
        if sum(len(r["batch"]["act"]) for r in fresh) < decisions:
            return [], dropped
        out, n = [], 0
        while n < decisions:
            out.append(self.items.popleft())
            n += len(out[-1]["batch"]["act"])
        return out, dropped
