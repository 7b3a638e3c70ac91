"""Collection: which rollout is asked of which worker with which weights, and which are learned from.

One interface, :class:`Scheduler`, two schedules:

* :class:`AsyncScheduler` (the default) pipelines: as soon as a worker's rollout arrives, the worker gets
  the next request (with the newest weights, one ``ray.put`` per update), so generation overlaps the
  update, and it collects between the update's gradient steps too.  Arrived rollouts wait in a
  :class:`RolloutQueue`; an update takes all of them once they hold ``ppo.batch_decisions``, and drops
  those more than ``learner.max_policy_lag`` updates behind (``charts/dropped_rollouts``).  The queue is
  bounded: a worker is asked again only while fewer than ``learner.queue_rollouts`` rollouts are in
  flight or waiting, else it waits for room.
* :class:`DeterministicScheduler` (``rollout.deterministic``): lanes (:class:`Lanes`), rollouts learned
  from in request order, one request out per worker, asked for when its previous rollout is learned from,
  a failed request asked again as it was; its checkpoints hold the lanes, so a resume goes on as if the
  run had never stopped.

Every request has a unique id (``Counters.next_request``); a rollout is counted once, when it is
consumed, and a request lost with a dead worker is asked again (async: under a new id with a new seed).

**Lanes.**  Worker ``w`` serves lane ``w``.  A lane has one request out at a time, and rollouts are
consumed in request order, whatever order they arrive in, so the weights a request plays (its version)
and the snapshot pool it meets are those the learner has at a point of the request sequence, never a
matter of timing.  A request carries the games its lane's previous rollout left
(:meth:`training.run.rollout.RolloutEngine.get_state`) and the seed ``mix(run seed, lane, request id)``: a
restarted worker, or a resumed run, plays the same rollout for it.  A checkpoint keeps each lane's games,
each lane's request out (id, version, pool) and the weights of the versions those requests play that the
learner no longer holds (at most one per lane, and a snapshot since dropped from the pool).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import ray
from ray.exceptions import ObjectLostError, RayActorError, RayTaskError

from ..config import TrainConfig
from ..errors import TrainError
from .rollout import request_seed
from .runstate import RunState
from .workers import WorkerHealth, arrived

Weights = dict[str, np.ndarray]


class RolloutQueue:
    """Rollouts (``{"batch", "stats", "version"}``, ``version`` = the updates behind their weights), oldest
    first; a rollout more than ``max_lag`` updates behind the learner is dropped when the learner takes its
    next batch, and counted: the learner never trains on stale data unknowingly."""

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


class Scheduler(ABC):
    """Asks the rollout workers for rollouts and hands the learner its batches.  The weights and the
    snapshot pool go to Ray once each (:meth:`publish`, :meth:`snapshot`) and every request shares them."""

    #: rollouts learned from in request order; the loop then stops only after an update and waits for
    #: every due evaluation
    in_order = False

    def __init__(self, cfg: TrainConfig, state: RunState, log: Callable[[str], None], batch_decisions: int):
        self.cfg, self.state, self.log = cfg, state, log
        # an update's size, the algorithm's (Algorithm.batch_decisions)
        self.batch_decisions = batch_decisions
        self.actors: list[Any] = []
        self.queue = RolloutQueue(cfg.learner.max_policy_lag)
        self.consumed: set[int] = set()
        self.health = WorkerHealth("rollout worker", 0, cfg.rollout.max_restarts)
        self.cur_weights: Weights = {}
        self.weights_ref: Any = None
        self.pool_refs: list[tuple[int, Any]] = []

    def start(self, actors: list[Any], weights: Weights) -> None:
        """The workers, the learner's weights and pool into Ray, then the first requests."""
        self.actors = actors
        self.health = WorkerHealth("rollout worker", len(actors), self.cfg.rollout.max_restarts)
        self.cur_weights = weights
        self.weights_ref = ray.put(weights)
        self.pool_refs = [(sid, ray.put(w)) for sid, w in self.state.pool]
        self._first_requests()

    def publish(self, weights: Weights) -> None:
        """The learner's new weights, for the requests from now on."""
        self.cur_weights = weights
        self.weights_ref = ray.put(weights)

    def snapshot(self, sid: int, weights: Weights) -> None:
        """A snapshot joined the pool (``state.pool``, already appended): its ref beside the others'."""
        refs = dict(self.pool_refs)
        refs[sid] = ray.put(weights)
        self.pool_refs = [(s, refs[s]) for s, _ in self.state.pool]

    def queued_decisions(self) -> int:
        return self.queue.decisions()

    def _consume(self, req: int, out: dict[str, Any]) -> None:
        if req in self.consumed:  # impossible by construction; kept as a guard
            raise TrainError(f"rollout {req} arrived twice")
        self.consumed.add(req)
        self.queue.put(out)

    def _failed(self, w: int, req: int, exc: Exception, again: str) -> None:
        """A rollout request failed: it is asked again once Ray has restarted the actor."""
        if self.health.failed(w, exc):
            self.state.counters.worker_failures += 1
            self.log(f"rollout worker {w} failed ({type(exc).__name__}); Ray restarts it,"
                     f" request {req} is {again}")

    def take(self, batch_decisions: int) -> list[dict[str, Any]]:
        """The next update's rollouts: every fresh one queued, once they hold ``batch_decisions``."""
        c = self.state.counters
        batches, dropped = self.queue.take(c.updates, batch_decisions)
        c.dropped_rollouts += dropped
        if batches or dropped:
            self._room()
        return batches

    def _room(self) -> None:
        """The queue has room again."""

    @abstractmethod
    def _first_requests(self) -> None: ...

    @abstractmethod
    def resubmit(self) -> None:
        """Ask again the workers whose actor Ray was restarting, once their wait is over."""

    @abstractmethod
    def collect(self, timeout: float) -> None:
        """Queue the rollouts that arrived (waiting up to ``timeout`` for the first) and ask again."""

    def to_checkpoint(self, pool_ids: set[int]) -> tuple[dict[str, np.ndarray], dict[str, Any] | None]:
        """What a checkpoint keeps of the schedule: (arrays, record or None)."""
        return {}, None

    def restore(self, where: str, arrays: dict[str, np.ndarray], record: dict[str, Any] | None,
                known: dict[int, Weights]) -> None:
        """The schedule a checkpoint kept (:meth:`to_checkpoint`)."""


class AsyncScheduler(Scheduler):
    """Workers asked again as soon as they deliver, with the newest weights (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, state: RunState, log: Callable[[str], None], batch_decisions: int):
        super().__init__(cfg, state, log, batch_decisions)
        self.pending: dict[Any, tuple[int, int]] = {}
        self.waiting: list[int] = []  # workers waiting for room in the queue
        self.capacity = 0             # rollouts in flight or waiting, at most

    def _first_requests(self) -> None:
        self.capacity = self.cfg.learner.queue_rollouts or len(self.actors) + 1
        for w in range(len(self.actors)):
            self._submit(w)

    def resubmit(self) -> None:
        for w in self.health.due():
            self._ask(w)

    def collect(self, timeout: float) -> None:
        """Each worker that delivered is asked again at once if the queue has room; a failed request is
        dropped and asked again."""
        for ref in arrived(self.pending, timeout):
            w, req = self.pending.pop(ref)
            try:
                out = ray.get(ref)
            except (RayActorError, RayTaskError, ObjectLostError) as exc:  # a lost node loses its results too
                self._failed(w, req, exc, "dropped and asked again")
                continue
            self.health.ok(w)
            self._consume(req, out)
            self._ask(w)

    def _ask(self, w: int) -> None:
        """Ask worker ``w`` again if the queue has room (rollouts in flight and waiting) or the learner
        still lacks a batch, else let it wait."""
        if (len(self.pending) + len(self.queue) < self.capacity
                or self.queue.decisions() < self.batch_decisions):
            self._submit(w)
        else:
            self.waiting.append(w)

    def _room(self) -> None:
        waiting, self.waiting = self.waiting, []
        for w in waiting:
            self._ask(w)

    def _submit(self, w: int) -> None:
        c = self.state.counters
        req = c.next_request
        c.next_request += 1
        seed = request_seed(self.cfg.seed, w, req)
        ref = self.actors[w].rollout.remote(self.weights_ref, c.updates, self.pool_refs, seed)
        self.pending[ref] = (w, req)


class DeterministicScheduler(Scheduler):
    """Lanes, consumed in request order (see the module docstring)."""

    in_order = True

    def __init__(self, cfg: TrainConfig, state: RunState, log: Callable[[str], None], batch_decisions: int):
        super().__init__(cfg, state, log, batch_decisions)
        self.lanes: Lanes | None = None  # restored by a resume

    def _first_requests(self) -> None:
        if self.lanes is None:
            self.lanes = Lanes(len(self.actors))
        asked = {r.lane for r in self.lanes.out.values()}
        for req in sorted(self.lanes.out.values(), key=lambda r: r.id):  # a resume: the requests out again
            self._send(req)
        for w in range(len(self.actors)):
            if w not in asked:
                self._ask_lane(w)

    def resubmit(self) -> None:
        for w in self.health.due():
            req = self.lanes.of_lane(w)
            if req is not None and req.ref is None:
                self._send(req)  # the same request again: the same rollout

    def collect(self, timeout: float) -> None:
        """Consume the oldest request's rollout when it is there (waiting up to ``timeout``), then ask its
        lane again with the learner's weights and pool as they are now."""
        req = self.lanes.next()
        if req is None or req.ref is None:  # it waits to be asked again (its worker is restarting)
            time.sleep(min(timeout, 0.05))
            return
        if not ray.wait([req.ref], timeout=timeout)[0]:
            return
        try:
            out = ray.get(req.ref)
        except (RayActorError, RayTaskError, ObjectLostError) as exc:  # a lost node loses its results too
            req.ref = None
            self._failed(req.lane, req.id, exc, "asked again as it was")
            return
        self.health.ok(req.lane)
        state = out.pop("state")
        self._consume(req.id, out)
        self.lanes.consumed(req, state)
        self._ask_lane(req.lane)

    def _ask_lane(self, lane: int) -> None:
        """The lane's next request, with the weights and the pool of now."""
        c = self.state.counters
        req = Request(c.next_request, lane, c.updates, self.cur_weights, list(self.state.pool),
                      refs=(self.weights_ref, self.pool_refs))
        c.next_request += 1
        self.lanes.ask(req)
        self._send(req)

    def _send(self, req: Request) -> None:
        """Ask ``req`` of its lane's worker (again after a failure, or after a resume: the same rollout)."""
        if req.refs is None:
            req.refs = (ray.put(req.weights), [(sid, ray.put(w)) for sid, w in req.pool])
        weights_ref, pool_refs = req.refs
        req.ref = self.actors[req.lane].rollout.remote(weights_ref, req.version, pool_refs,
                                                       request_seed(self.cfg.seed, req.lane, req.id),
                                                       {"state": self.lanes.states[req.lane]})

    def to_checkpoint(self, pool_ids: set[int]) -> tuple[dict[str, np.ndarray], dict[str, Any] | None]:
        if self.lanes is None:
            return {}, None
        return self.lanes.to_checkpoint(self.state.counters.updates, pool_ids)

    def restore(self, where: str, arrays: dict[str, np.ndarray], record: dict[str, Any] | None,
                known: dict[int, Weights]) -> None:
        """The lanes of the checkpoint, whose requests out are asked again as they were (a checkpoint of a
        run that was not deterministic has none: its lanes start afresh, said once)."""
        workers = self.cfg.rollout.num_workers
        if not record:
            self.log(f"{where} holds no deterministic lanes (written without rollout.deterministic):"
                     " the lanes start afresh")
            return
        if record["count"] != workers:
            raise TrainError(f"{where}: a deterministic run of {record['count']} lanes resumes with"
                             f" rollout.num_workers={record['count']}, not {workers}")
        try:
            self.lanes = Lanes.from_checkpoint(arrays, record, known)
        except ValueError as exc:
            raise TrainError(f"{where}: {exc}") from None


def make_scheduler(cfg: TrainConfig, state: RunState, log: Callable[[str], None],
                   batch_decisions: int) -> Scheduler:
    """The schedule ``rollout.deterministic`` asks for; an update takes ``batch_decisions``."""
    cls = DeterministicScheduler if cfg.rollout.deterministic else AsyncScheduler
    return cls(cfg, state, log, batch_decisions)
