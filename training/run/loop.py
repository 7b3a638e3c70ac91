"""The run loop: one sitting of a training run, top to bottom in named phases.

    start      Ray (embedded or joined), the learner's device, TensorBoard, the workers, a new run's start
               hooks (the warm start), the first requests
    loop until total_decisions, max_minutes or a stop signal:
      collect        the algorithm's own workers, then the rollouts that arrived (the scheduler asks again)
      learn          the learner's rate for the run's progress, the algorithm's update on the batch
      after-update   the blind-policy probe (every learner.guard_every; before every checkpoint too),
                     snapshot into the pool, the due evaluation launched, the due checkpoint,
                     then the algorithm's hooks
      stage          the next stage, when the one it is in ends (``stages``): a checkpoint, the algorithm
                     and the workers whose settings changed built anew, on the same network
      evaluate       a finished periodic evaluation recorded
      log            TensorBoard's counters, the display
    end        the evaluation in flight recorded, the final checkpoint, the summary

The parts own their state: :class:`~training.run.runstate.RunState` (counters, pool, lineage, checkpoints),
:class:`~training.run.workers.WorkerPool` (Ray, GPU, placement), a :class:`~training.run.scheduler.Scheduler`
(async or deterministic), :class:`~training.run.evaluation.PeriodicEval` (what it plays is a part too: the
configured opponents, or ``samloc exploit``'s frozen target), :class:`~training.run.runlog.Board` and
:class:`~training.run.runlog.Display` (what the run shows), and the algorithm: any class that fulfils
the loop's contract (:class:`~training.run.algorithm.Algorithm`), handed to it in the stage plan
(:class:`~training.run.stages.StagePlan`, made by :func:`training.launch.stage_plan`).  Its hooks see a
:class:`~training.run.algorithm.RunContext`, not the loop.

``rollout.deterministic`` trades speed for reproducible runs: the deterministic scheduler, a sitting that
stops only after an update, every due evaluation waited for rather than skipped, and torch's
deterministic algorithms; its checkpoints hold the lanes, so a resume goes on as if the run had never
stopped.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from agents.nets.format import list_checkpoints
from agents.nets.guards import BlindPolicyError, check_blind_policy
from sam_env.atomic import write_json_atomic

from ..config import TrainConfig, stop_reason
from ..errors import TrainError
from .algorithm import RunContext, StartHook
from .evaluation import EvalTarget, OpponentsEval, PeriodicEval
from .learner import DeviceError, Progress, resolve_device, wants_cuda
from .precision import settle_precision
from .runlog import Board, Display, Rate, StopSignals
from .runstate import Counters, RunState
from .scheduler import make_scheduler
from .sizing import apply_sizing
from .stages import StagePlan, stage_record
from .workers import WorkerPool


class MinutesClock:
    """A schedule in training wall time: due at the first update past each multiple of ``minutes``
    (``checkpoint.every_minutes``, ``eval.every_minutes``; 0: never)."""

    def __init__(self, minutes: float, wall_s: float):
        self.every = 60.0 * minutes
        self.next = self._after(wall_s)

    def _after(self, wall_s: float) -> float:
        return (wall_s // self.every + 1) * self.every if self.every else float("inf")

    def due(self, wall_s: float) -> bool:
        """Whether a multiple was passed since the last time it was due; the next is then the one after."""
        if wall_s < self.next:
            return False
        self.next = self._after(wall_s)
        return True


class RunLoop:
    """One training run in ``run_dir`` (new, or resumed from its newest good checkpoint).

    ``plan``: the stages with each one's algorithm class (:func:`training.launch.stage_plan`; a run
    without stages: its one); ``start_hooks``: work before a new run's first update, by name (the warm
    start); ``evaluation``: what the periodic evaluation plays (default: ``eval.opponents``);
    ``on_update``: called after every update (tests use it to inject faults).
    :func:`training.launch.new_loop` makes one from a config."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, plan: StagePlan, resume: bool = False,
                 ray_address: str | None = None, command: str | None = None,
                 log: Callable[[str], None] | None = None,
                 on_update: Callable[["RunLoop"], None] | None = None, dashboard: bool = False,
                 start_hooks: dict[str, StartHook] | None = None, evaluation: EvalTarget | None = None):
        torch.set_num_threads(1)
        self.cfg = cfg
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.on_update = on_update
        command = command or " ".join(shlex.quote(a) for a in sys.argv)
        torch.manual_seed(cfg.seed)
        self.state = RunState(cfg, run_dir, command, self.log)
        self.plan = plan
        self.start_hooks = start_hooks or {}
        if self.plan:  # the stage decides the algorithm: a resume's is its checkpoint's
            stage = self.state.checkpointed_stage() if resume else 0
            if stage >= len(self.plan.stages):
                raise TrainError(f"{run_dir}: its checkpoint is in stage {stage}, and stages lists"
                                 f" {len(self.plan.stages)} (a resume keeps the run's stages)")
            self.plan.apply(cfg, stage)
        self.algo = self.plan.algorithm(self.state.stage)(cfg, self.state, self.log)
        self.scheduler = make_scheduler(cfg, self.state, self.log, self.algo.batch_decisions)
        self.workers = WorkerPool(cfg, ray_address, dashboard, self.log)
        self.target = evaluation or OpponentsEval(cfg)
        self.placement: list[dict[str, Any]] = []
        self.eval_at_start = True  # a new run's periodic evaluation also measures the untrained network
        restored = None
        if resume:
            restored = self.state.restore(self.algo.learner)
            if cfg.rollout.deterministic:
                known = {self.state.counters.updates: self.algo.learner.weights()} | dict(self.state.pool)
                arrays = {k: v.numpy() for k, v in restored.tensors.items()
                          if k.startswith(("lane.", "bank."))}
                self.scheduler.restore(str(restored.path), arrays, restored.state.get("lanes"), known)
        elif cfg.init_from:
            self.state.init_from(self.algo.learner, Path(cfg.init_from))
        if self.plan and not self.state.stage_starts:
            self.state.stage_starts = [stage_record(0, self.plan.name(0), "the run starts",
                                                    self.state.counters)]
        self.state.write_run_files(resume)
        self.algo.begin(restored)
        if restored is not None:
            c = self.state.counters
            self.log(f"resumed from {restored.path} (update {c.updates},"
                     f" {c.decisions_trained:,} decisions trained)")
        self.was_deterministic = torch.are_deterministic_algorithms_enabled()

    @property
    def counters(self) -> Counters:
        """The run's counters (the run state's)."""
        return self.state.counters

    @property
    def net(self) -> torch.nn.Module:
        return self.algo.learner.net

    # ---- the loop ---------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train until ``total_decisions`` or ``max_minutes``; returns the run's summary."""
        stop = StopSignals(self.log)
        in_order = self.scheduler.in_order
        try:
            self.start()
            reason = self._stop_reason()
            with self.display, stop:
                while not reason:
                    batches = self.collect()
                    if batches:
                        self.learn(batches)
                        self.after_update()
                        self.next_stage_if_due()           # stage
                    self.evaluator.poll()                  # evaluate
                    self.log_progress()
                    if batches or not in_order:  # deterministic: only after an update (nothing queued)
                        reason = self._stop_reason() or stop.reason
            with stop:  # the end too: a signal now stops nothing half-way, a second one stops at once
                if self.evaluator.in_flight is not None:
                    self.save()  # a checkpoint before waiting for the evaluation: a Ctrl-C there leaves it
                self.evaluator.finish()  # a periodic evaluation in flight is part of the curve
                self.log_scalars()
                final = self.save()
        finally:
            if hasattr(self, "evaluator"):  # start() makes it: after a clean end none is in flight
                self.evaluator.abandon()
            self.algo.stop()
            self.workers.stop()
            torch.use_deterministic_algorithms(self.was_deterministic)
        summary = self.summary(reason, final)
        write_json_atomic(self.state.run_dir / "summary.json", summary)
        self.board.writer.flush()
        return summary

    def start(self) -> None:
        """Ray, the learner's device, TensorBoard, the workers, a new run's warm start, the first requests.
        The sitting's wall time counts from here: Ray's start and the warm start are a part of training."""
        cfg, c = self.cfg, self.state.counters
        self.wall0, self.t0 = c.wall_s, time.perf_counter()  # Ray's start counts as training
        self.checkpoint_clock = MinutesClock(cfg.checkpoint.every_minutes, self.wall())
        self.eval_clock = MinutesClock(cfg.eval.every_minutes, self.wall())
        if cfg.checkpoint.every_minutes and self.state.resumed_from is None and c.updates == 0:
            self.save()  # minute 0: the starting weights, a time-to-strength curve's first point
        if self.scheduler.in_order:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what cuBLAS needs for it
            torch.use_deterministic_algorithms(True)
        self.workers.start()
        if wants_cuda(cfg.learner.device):
            self.workers.reserve_gpu()
        try:
            device = resolve_device(cfg.learner.device)
        except DeviceError as exc:
            raise TrainError(str(exc)) from None
        self.algo.learner.to(device)
        sized = apply_sizing(cfg, self.workers.cpus(), device.type, type(self.algo))
        self.workers.check_cpus(self.algo.worker_groups(cfg))  # a refusal is one line: before what was sized
        short = self.plan.shortfall(self.workers.cpus(), device.type, embedded=not self.workers.ray_address)
        if short and not self.workers.ray_address:
            raise TrainError(short)
        settled, _ = settle_precision(self.algo.learner, cfg.rollout.deterministic)  # learner.precision: auto
        chosen = [line for line in (settled, *sized.splitlines()) if line]
        if chosen:  # the figures chosen go into the run folder's config, which a resume reads
            for line in chosen:
                self.log(line)
            self.state.write_config()
        self.board = Board(cfg, self.state, c.decisions_trained if self.state.resumed_from else -1)
        actors, self.placement = self.workers.place(self.algo.rollout_actor(), self.algo.rollout_workers,
                                                    "rollout worker", cfg.rollout.cpus_per_worker)
        self.evaluator = PeriodicEval(self.target, self.state, self.board, self.algo.eval_note)
        self.rate = Rate()
        self.display = Display(cfg, self.state, self.algo.display_rows)
        if self.plan:
            st = self.state
            self.log(f"stage {st.stage} of {len(self.plan.stages)}: {self.plan.name(st.stage)}"
                     + (" (resumed)" if st.resumed_from else ""))
            if st.resumed_from is None and st.counters.updates == 0:
                self.board.stage(st.stage_starts[0])
        if self.state.counters.updates == 0 and not self.state.resumed_from:
            for name, hook in self.start_hooks.items():
                for k, v in hook(self.algo.learner, cfg, self.log).items():
                    self.board.scalar(f"{name}/{k}", v, 0)
        self.last_log = time.perf_counter()
        self.scheduler.start(actors, self.algo.learner.weights())
        self.ctx = RunContext(state=self.state, board=self.board,
                              take=lambda n: self.scheduler.take(n), between_steps=self.between_steps,
                              place=self.workers.place, evaluate=self.evaluate, save=self.save,
                              seconds_left=self.seconds_left, wall=self.wall)
        self.algo.start(self.ctx)
        if (cfg.eval.every_updates or cfg.eval.every_minutes) and self.eval_at_start \
                and self.state.counters.updates == 0 \
                and self.evaluator.in_flight is None:  # (an algorithm may have launched its own)
            self.evaluate()  # the curve's first point, at step 0: the network before any update

    def collect(self) -> list[dict[str, Any]]:
        """The algorithm's own workers, then the rollouts that arrived; the next update's batch, if any."""
        self.scheduler.resubmit()
        ready = self.scheduler.queued_decisions() >= self.algo.batch_decisions  # then wait for nothing
        self.scheduler.collect(self.algo.collect(self.ctx, 0 if ready else 0.5))
        return self.algo.take(self.ctx)

    def between_steps(self) -> None:
        """Run between the update's gradient steps: keep the workers busy (the deterministic schedule
        consumes nothing here: when a rollout arrives must not change which weights its lane plays next)."""
        self.scheduler.resubmit()
        if not self.scheduler.in_order:
            self.scheduler.collect(self.algo.collect(self.ctx, 0))

    def learn(self, batches: list[dict[str, Any]]) -> None:
        """One update: the learner's rate for the run's progress, the algorithm's learn, the new weights
        published, the update counted."""
        algo, c = self.algo, self.state.counters
        starts = self.state.stage_starts
        algo.learner.begin_update(Progress(c.updates, c.decisions_trained, self.wall(),
                                           starts[-1]["wall_s"] if starts else 0.0))
        t0 = time.perf_counter()
        algo.losses = algo.learn(self.ctx, batches)
        algo.losses["update_s"] = time.perf_counter() - t0
        self.scheduler.publish(algo.learner.weights())
        self.count_update(batches)

    def count_update(self, batches: list[dict[str, Any]]) -> None:
        """The counters of one update on ``batches`` and its TensorBoard figures: the algorithm's losses,
        the learner's (its rate), and what the rollouts' games brought (the lá against fixed opponents, the
        episodes)."""
        c = self.state.counters
        c.updates += 1
        c.decisions_trained += self.algo.decisions_in(batches)
        step = c.decisions_trained
        self.algo.write_losses(self.ctx, step)
        for k, v in self.algo.learner.figures.items():
            self.board.scalar(f"charts/{k}", v, step)
        rollouts = [b for b in batches if "stats" in b]
        if not rollouts:
            return
        c.rollouts += len(rollouts)
        st: dict[str, float] = {}
        for b in rollouts:
            for k, v in b["stats"].items():
                st[k] = st.get(k, 0) + v
        c.games += int(st["games"])
        c.decisions += int(st["decisions"])
        c.sam_declared += int(st["sam_declared"])
        for kind in ("heuristic", "pool"):
            if st[f"vs_{kind}_games"]:
                mean = st[f"vs_{kind}_sum"] / st[f"vs_{kind}_games"]
                self.board.scalar(f"charts/train_vs_{kind}_la", mean, step)
        self.board.scalar("charts/sam_declared_per_game", st["sam_declared"] / max(1, st["games"]), step)
        self.board.episodes(st, step)

    def after_update(self) -> None:
        """Snapshot, evaluation and checkpoint on their schedules, the test hook, the algorithm's hooks."""
        cfg, c = self.cfg, self.state.counters
        self.rate.add(time.perf_counter(), c.decisions_trained, c.updates, c.decisions)
        if cfg.learner.guard_every and c.updates % cfg.learner.guard_every == 0:
            self.guard()  # before the weights go anywhere: the pool, an evaluation, a checkpoint
        if c.updates % cfg.rollout.snapshot_every == 0:
            self.snapshot()
        wall = self.wall()
        if (cfg.eval.every_updates and c.updates % cfg.eval.every_updates == 0) or self.eval_clock.due(wall):
            if self.scheduler.in_order:  # deterministic: every due evaluation, none skipped
                self.evaluator.finish()
            self.evaluate(if_idle=True)
        if c.updates % cfg.checkpoint.every_updates == 0 or self.checkpoint_clock.due(wall):
            c.wall_s = self.wall()
            self.save()
        if self.on_update is not None:
            self.on_update(self)
        self.algo.after_update(self.ctx)

    # ---- stages -------------------------------------------------------------------------------------------
    def next_stage_if_due(self) -> None:
        """The next stage, once the one the run is in ends (its minutes, its updates or a plateau)."""
        st = self.state
        why = self.plan.ends(st.stage, st.stage_starts[-1], st.counters.updates, self.wall(),
                             self.cfg.max_minutes, st.eval_history) if self.plan else ""
        if why:
            self.next_stage(why)

    def next_stage(self, why: str) -> None:
        """One step between updates: the next stage's settings on the run's config, the algorithm built anew
        on the same network and optimizer, the rollout workers rebuilt when what they play changed, the
        algorithm's own workers started, and a checkpoint of the moment (the last network of one stage and
        the first of the next)."""
        st, c, old = self.state, self.state.counters, self.algo
        c.wall_s = self.wall()
        self.log(f"stage {st.stage} ({self.plan.name(st.stage)}) ends at update {c.updates}: {why};"
                 f" stage {st.stage + 1} ({self.plan.name(st.stage + 1)}) begins")
        before = self._rollout_key()
        old.stop()
        st.stage += 1
        self.plan.apply(self.cfg, st.stage)
        cls = self.plan.algorithm(st.stage)
        sized = apply_sizing(self.cfg, self.workers.cpus(), old.learner.device.type, cls)
        for line in sized.splitlines():
            self.log(line)
        self.workers.check_cpus(cls.worker_groups(self.cfg))
        self.algo = cls(self.cfg, st, self.log)
        self.algo.learner.net.load_state_dict(old.learner.net.state_dict())
        self.algo.learner.opt.load_state_dict(old.learner.opt.state_dict())  # Adam's moments go on
        self.algo.learner.to(old.learner.device)
        # a stage may say auto
        settled, _ = settle_precision(self.algo.learner, self.cfg.rollout.deterministic)
        if settled:
            self.log(settled)
        self.algo.begin(None)
        st.stage_starts.append(stage_record(st.stage, self.plan.name(st.stage), why, c))
        st.write_config()
        if self._rollout_key() != before:
            self.workers.release(self.scheduler.actors)
            self.scheduler = make_scheduler(self.cfg, st, self.log, self.algo.batch_decisions)
            actors, self.placement = self.workers.place(self.algo.rollout_actor(), self.algo.rollout_workers,
                                                        "rollout worker", self.cfg.rollout.cpus_per_worker)
            self.scheduler.start(actors, self.algo.learner.weights())
        else:  # the same games, learned from by the new algorithm
            self.scheduler.batch_decisions = self.algo.batch_decisions
            self.scheduler.queue.max_lag = self.cfg.learner.max_policy_lag
        self.evaluator.note, self.display.rows = self.algo.eval_note, self.algo.display_rows
        self.algo.start(self.ctx)
        self.board.stage(st.stage_starts[-1])
        self.save()

    def _rollout_key(self) -> tuple[Any, ...]:
        """What the rollout workers play and compute: when it changes at a stage, they are started anew."""
        a = self.algo
        return (type(a).rollout_actor, a.targets(self.cfg), a.rollout_workers, repr(self.cfg.rollout),
                repr(self.cfg.env))

    def snapshot(self) -> None:
        """The learner's weights join the pool of past selves the rollouts play against."""
        w = self.algo.learner.weights()
        self.state.pool.append((self.state.counters.updates, w))
        self.scheduler.snapshot(self.state.counters.updates, w)

    def evaluate(self, if_idle: bool = False, finish_older: bool = False) -> None:
        """Launch the periodic evaluation of the learner's weights now (``if_idle``: unless one is in
        flight; ``finish_older``: one in flight of an earlier update is first waited for and recorded)."""
        flight = self.evaluator.in_flight
        if finish_older and flight is not None and flight[1]["updates"] != self.state.counters.updates:
            self.evaluator.finish()
        if if_idle and self.evaluator.in_flight is not None:
            return
        # the point's time (the step-0 one comes after Ray and a warm start)
        self.state.counters.wall_s = self.wall()
        self.evaluator.launch(self.algo.learner.weights(), self.net.hparams(), self.cfg.eval.deals)

    def log_progress(self) -> None:
        now = time.perf_counter()
        self.state.counters.wall_s = self.wall()
        if now - self.last_log >= self.cfg.log_every_s:
            self.log_scalars()
            self.last_log = now
        self.display.update(self.rate)

    def log_scalars(self) -> None:
        """The counters, then the algorithm's figures, once per step."""
        if self.board.counters(self.rate):
            self.algo.log_scalars(self.ctx, self.state.counters.decisions_trained)

    def wall(self) -> float:
        """Training wall time over every sitting so far."""
        return self.wall0 + time.perf_counter() - self.t0

    def seconds_left(self) -> float:
        """Wall seconds until the run's ``max_minutes`` or the stage's share of it, whichever is first (inf
        without either): an algorithm does not begin what cannot end inside them."""
        stage_mark = self.plan.mark_minutes(self.state.stage, self.cfg.max_minutes) if self.plan else None
        mark = stage_mark or self.cfg.max_minutes  # the shares so far add up to at most max_minutes
        return 60 * mark - self.wall() if mark else math.inf

    def _stop_reason(self) -> str:
        c = self.state.counters
        return stop_reason(self.cfg.total_decisions, self.cfg.max_minutes, c.decisions_trained, c.wall_s)

    # ---- checkpoints and the summary -------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        meta = self.state.metadata()
        self.algo.metadata(meta)
        return meta

    def guard(self) -> None:
        """The blind-policy probe of the learner's network (agents/nets/guards.py); TrainError (one line,
        naming the run's last checkpoint) when its policy reads the hidden hands."""
        try:
            check_blind_policy(self.algo.learner.net)
        except BlindPolicyError as exc:
            last = list_checkpoints(self.state.run_dir)
            raise TrainError(f"{self.state.run_dir}: update {self.counters.updates}: {exc}; the run stops,"
                             " and these weights are neither checkpointed nor exported (the last checkpoint:"
                             f" {last[-1] if last else 'none'})") from None

    def save(self) -> Path:
        """A checkpoint of everything --resume needs (the schedule's lanes and the algorithm's part too),
        after the guard's probe: a network that peeks is never written."""
        self.guard()
        arrays, lanes = self.scheduler.to_checkpoint({sid for sid, _ in self.state.pool})
        tensors = {k: torch.from_numpy(np.array(v)) for k, v in arrays.items()}  # Ray's are read-only
        state: dict[str, Any] = {"lanes": lanes} if lanes is not None else {}
        extra_tensors, extra_state = self.algo.to_checkpoint()
        path = self.state.save(self.algo.learner, self.metadata(), tensors | extra_tensors,
                               state | extra_state)
        self.algo.saved(path)
        return path

    def summary(self, reason: str, final: Path) -> dict[str, Any]:
        c, r = self.state.counters, self.rate.rates(window=False)
        out = {"name": self.cfg.name, "run_dir": str(self.state.run_dir), "checkpoint": str(final),
               "stop_reason": reason, "updates": c.updates, "games": c.games, "decisions": c.decisions,
               "decisions_trained": c.decisions_trained, "rollouts": c.rollouts,
               "dropped_rollouts": c.dropped_rollouts, "device": str(self.algo.learner.device),
               "worker_failures": c.worker_failures, "wall_s": round(c.wall_s, 1),
               "session_rates": r, "last_eval": self.state.last_eval,
               "workers": [{"worker": p["worker"], "node_id": p["node_id"]} for p in self.placement]}
        if self.plan:
            out["stages"] = self.state.stage_starts
        self.algo.summary(out)
        return out
