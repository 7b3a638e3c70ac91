"""The trainer: drives the Ray rollout actors, feeds the learner, evaluates, checkpoints, reports.

Pipelining: as soon as a worker's rollout arrives, the worker gets the next
request (with the newest weights, one ``ray.put`` per update), so generation
on the workers overlaps the PPO update here; the trainer collects between
the update's gradient steps too, so a worker never waits for a long update.
Arrived rollouts wait in a queue; an update takes all of them once they
hold ``ppo.batch_decisions``, and drops those more than ``learner.max_policy_lag`` updates behind (counted in
``charts/dropped_rollouts``; the lag is ``losses/policy_lag``).  The queue
is bounded: a worker is asked again only while fewer than
``learner.queue_rollouts`` rollouts are in flight or waiting, else it waits
for room, so workers only wait for a learner that is that far behind, and
never burn CPU on data that would be thrown away.

The learner runs in this process, on ``learner.device``; a CUDA learner
first asks Ray for a GPU on this node (a placement group), so on a cluster
``samloc train`` runs on the GPU node and the workers go wherever Ray has
CPUs.  An embedded Ray listens on 127.0.0.1 only.  Every request has a unique id;
a rollout is counted once, when it is consumed, and a request lost with a
dead worker (Ray restarts the actor, ``max_task_retries=0``) is simply asked
again under a new id with a new seed, so nothing is counted twice.  While Ray
restarts an actor, requests to it fail at once as "unavailable": they are
asked again every half second and count as the same failure, so a restart
that is slow on a loaded machine does not use up ``max_restarts``.

``rollout.deterministic`` trades speed for reproducible runs: the schedule of
:mod:`training.lanes` (rollouts learned from in request order, one request
out per worker, asked for when its previous rollout is learned from, a
failed request asked again as it was), stops only after an update, waits
for a running evaluation rather than skip a due one, and torch's
deterministic algorithms; its checkpoints hold the lanes, so a resume goes
on as if the run had never stopped.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from agents.nets import checkpoint as ckpt
from agents.nets.format import CheckpointMeta, latest_good, list_checkpoints
from sam_env.actions import ACTION_TABLE_VERSION
from sam_env.atomic import write_atomic, write_json_atomic
from sam_env.obs import OBS_VERSION
from sam_env.seeding import mix

from .config import (TrainConfig, eval_players, eval_rules, flat, stop_reason, to_dict, to_yaml,
                     training_tables)
from .lanes import Lanes, Request
from .learner import DeviceError, Learner, resolve_device, wants_cuda
from .queue import RolloutQueue
from .rollout import _actor_class, request_seed

REPO = Path(__file__).resolve().parent.parent


class TrainError(RuntimeError):
    """Training cannot go on (one-line reason)."""


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        commit = out.stdout.strip() or "unknown"
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@dataclass
class Counters:
    """Progress that survives a resume exactly."""

    updates: int = 0
    games: int = 0
    decisions: int = 0            # every decision generated in consumed rollouts
    decisions_trained: int = 0    # learner decisions consumed by updates
    rollouts: int = 0             # rollouts learned from
    dropped_rollouts: int = 0     # rollouts more than learner.max_policy_lag updates old when taken
    next_request: int = 0         # request ids handed out (never reused)
    worker_failures: int = 0
    sam_declared: int = 0
    wall_s: float = 0.0           # training wall time over all sessions
    snapshot_ids: list[int] = field(default_factory=list)


def _evaluate_remote_fn():
    import ray

    @ray.remote(num_cpus=0)
    def evaluate_remote(weights: dict[str, np.ndarray], hp: dict[str, int], opponents: list[str],
                        snap: dict[str, np.ndarray] | None, rules: str, players: int, deals: int,
                        seed: int) -> dict[str, Any]:
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)
        from .evaluation import evaluate_weights
        return evaluate_weights(weights, hp, opponents, snap, rules, players, deals, seed)

    return evaluate_remote


def embedded_cpus() -> int:
    """The CPUs of the Ray that ``samloc train`` starts on this machine (never fewer than 2)."""
    return max(2, os.cpu_count() or 2)


def cpu_shortfall(cfg: TrainConfig, have: float, embedded: bool) -> str:
    """'' when the workers (rollout, and search with ``distill.enabled``) fit in ``have`` CPUs, else why not
    in one line (for an embedded Ray, which never grows, with the settings that would fit)."""
    on = {"rollout": not cfg.distill.enabled or cfg.distill.ppo, "distill": cfg.distill.enabled}
    groups = [(sec, getattr(cfg, sec)) for sec in ("rollout", "distill") if on[sec]]
    need = sum(g.num_workers * g.cpus_per_worker for _, g in groups)
    if need <= have + 1e-9:
        return ""
    msg = " + ".join(f"{sec}.num_workers={g.num_workers} x {sec}.cpus_per_worker={g.cpus_per_worker:g}"
                     for sec, g in groups) + f" need {need:g} CPUs, Ray has {have:g}"
    if embedded and len(groups) == 1:
        sec, g = groups[0]
        fit = int(have // g.cpus_per_worker)
        share = f"{sec}.cpus_per_worker={int(have / g.num_workers * 100) / 100:g}"
        msg += f" (use {sec}.num_workers={fit} or {share})" if fit > 0 else f" (use {share})"
    elif embedded:
        msg += " (use fewer workers or lower their cpus_per_worker)"
    return msg


def recorded_lineage(meta: CheckpointMeta, where: str) -> list[dict[str, Any]]:
    """The ``lineage`` a checkpoint's metadata holds (none before it was recorded), checked."""
    before = meta.raw.get("lineage") or []
    if not isinstance(before, list) or not all(isinstance(e, dict) for e in before):
        raise TrainError(f"{where}: its metadata's lineage is not a list of runs")
    return list(before)


def lineage_of(meta: CheckpointMeta, path: Path) -> list[dict[str, Any]]:
    """What a run started from ``path`` records of its ancestry: the starting checkpoint's own lineage,
    then that checkpoint's run (commands, wall time, counts).  A stage trained in several runs (a shipped
    bot's ``init_from`` in each session) so keeps every command and wall time in its metadata."""
    cfg = meta.raw.get("config") if isinstance(meta.raw.get("config"), dict) else {}
    return [*recorded_lineage(meta, f"init_from {path}"), {
        "checkpoint": str(path), "name": meta.name, "init_from": str(cfg.get("init_from") or ""),
        "command": meta.command, "resumes": list(meta.resumes), "wall_time_s": meta.wall_time_s,
        "updates": meta.updates, "decisions_trained": meta.decisions_trained, "git_commit": meta.git_commit,
        "saved": str(meta.raw.get("saved") or "")}]


class Trainer:
    """One training run in ``run_dir`` (new, or resumed from its newest good checkpoint)."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, resume: bool = False, ray_address: str | None = None,
                 command: str | None = None, log: Callable[[str], None] | None = None,
                 on_update: Callable[["Trainer"], None] | None = None, dashboard: bool = False):
        torch.set_num_threads(1)
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.ray_address = ray_address
        self.dashboard = dashboard  # Ray's dashboard (embedded Ray: on 127.0.0.1), only when asked
        self.command = command or " ".join(shlex.quote(a) for a in sys.argv)
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.on_update = on_update  # called after every update (tests use it to inject faults)
        self.placement: list[dict[str, Any]] = []
        self.c = Counters()
        torch.manual_seed(cfg.seed)
        self.learner = Learner(cfg)  # on the CPU until _start has the device
        self.gen = torch.Generator().manual_seed(mix(cfg.seed, 1))
        self.pool: deque[tuple[int, dict[str, np.ndarray]]] = deque(maxlen=cfg.rollout.pool_size)
        self.eval_history: list[dict[str, Any]] = []
        self.last_eval: dict[str, Any] | None = None
        self.losses: dict[str, float] = {}
        self.resumed_from: Path | None = None
        # TensorBoard: the last step of the charts/ scalars, and the step this sitting starts after
        self.tb_step = self.tb_first = -1
        # The command that started the run, and every --resume since: a resumed bot's
        # metadata still says how it was trained, not only how it was finished.
        self.first_command, self.resumes = self.command, []
        #: the runs these weights descend from by init_from, oldest first (:func:`lineage_of`)
        self.lineage: list[dict[str, Any]] = []
        self.gpu_reservation: Any = None
        self.actors: list[Any] = []
        self.started_ray = False
        self.det = cfg.rollout.deterministic
        self.was_deterministic = torch.are_deterministic_algorithms_enabled()
        self.lanes: Lanes | None = None  # deterministic mode's schedule (restored by a resume)
        if resume:
            self._restore()
        elif cfg.init_from:
            self._init_from(Path(cfg.init_from))
        #: the code this sitting runs, read once: the tree may move on while it trains
        self.code_commit = git_commit()
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(self.run_dir / "config.yaml", to_yaml(cfg))  # the resolved config
            if not resume:
                write_json_atomic(self.run_dir / "run.json", {
                    "git_commit": self.code_commit, "command": self.command,
                    "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "obs_version": OBS_VERSION, "action_table_version": ACTION_TABLE_VERSION})
        except OSError as exc:
            raise TrainError(f"cannot write the run folder {self.run_dir}: {exc.strerror or exc}") from None

    @property
    def net(self) -> torch.nn.Module:
        return self.learner.net

    @property
    def rollout_workers(self) -> int:
        """Rollout actors this trainer runs (a subclass may need none)."""
        return self.cfg.rollout.num_workers

    # ---- checkpoints ------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        cfg = self.cfg
        tables = training_tables(cfg)
        return {
            "name": cfg.name, "config": to_dict(cfg), "rules": sorted({t.rules.name for t in tables}),
            "players": sorted({t.players for t in tables}), "tables": [t.to_record() for t in tables],
            "reward_scale": cfg.env.reward_scale,
            "heuristic_share": cfg.rollout.opponent_fraction * cfg.rollout.heuristic_share,
            "obs_version": OBS_VERSION, "action_table_version": ACTION_TABLE_VERSION,
            "updates": self.c.updates, "games": self.c.games, "decisions": self.c.decisions,
            "decisions_trained": self.c.decisions_trained, "git_commit": self.code_commit,
            "command": self.first_command, "resumes": self.resumes,
            "wall_time_s": round(self.c.wall_s, 1), "saved": time.strftime("%Y-%m-%d %H:%M:%S"),
            "lineage": self.lineage,
            "last_eval": self.last_eval,
        }

    def save(self) -> Path:
        """A checkpoint of everything --resume needs, as CPU tensors; on a full disk the last good one stays."""
        tensors: dict[str, torch.Tensor] = {}
        opt_state = self.learner.state()
        for idx, st in opt_state["state"].items():
            for k, v in st.items():
                tensors[f"opt.{idx}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
        for sid, w in self.pool:
            for k, v in w.items():
                tensors[f"pool.{sid}.{k}"] = torch.from_numpy(v)
        tensors["rng.torch"] = torch.get_rng_state()
        tensors["rng.gen"] = self.gen.get_state()
        state = {"counters": vars(self.c) | {"snapshot_ids": [sid for sid, _ in self.pool]},
                 "param_groups": opt_state["param_groups"], "eval_history": self.eval_history}
        if self.lanes is not None:  # deterministic mode: the lanes' games and their requests out
            arrays, state["lanes"] = self.lanes.to_checkpoint(self.c.updates, {sid for sid, _ in self.pool})
            tensors |= {k: torch.from_numpy(np.array(v)) for k, v in arrays.items()}  # Ray's are read-only
        extra_tensors, extra_state = self._extra_state()
        tensors |= extra_tensors
        state |= extra_state
        name = f"ckpt_{self.c.updates:08d}"
        try:
            path = ckpt.save_checkpoint(self.run_dir / "checkpoints" / name, self.net, self.metadata(), tensors, state)
        except OSError as exc:
            good = list_checkpoints(self.run_dir)
            raise TrainError(f"checkpoint {name} not written ({exc.strerror or exc}); the last good one stays: "
                             f"{good[-1] if good else 'none yet'}") from None
        ckpt.prune(self.run_dir, self.cfg.checkpoint.keep)
        return path

    def _extra_state(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """What a subclass keeps in a checkpoint besides the trainer's own: (tensors, JSON state)."""
        return {}, {}

    def _restore_extra(self, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
        """A subclass's part of a checkpoint, on a resume (:meth:`_extra_state` wrote it)."""

    def _init_from(self, path: Path) -> None:
        """Start a new run from another checkpoint's network (its optimizer and counters are not taken)."""
        net, meta = ckpt.load_checkpoint(path)  # versions checked there
        if net.hparams() != self.net.hparams():
            raise TrainError(f"init_from {path}: the model shape {net.hparams()} differs from the config's "
                             f"{self.net.hparams()}")
        self.net.load_state_dict(net.state_dict())
        self.lineage = lineage_of(meta, path)
        self.log(f"starting from the network of {path} ({meta.decisions_trained:,} decisions trained)")

    def _restore(self) -> None:
        path = latest_good(self.run_dir, trainer=True, warn=self.log)
        tensors, state = ckpt.load_trainer_state(path)
        net, meta = ckpt.load_checkpoint(path)  # versions checked there
        self.first_command = meta.command or self.command
        self.resumes = [*meta.resumes, self.command]
        self.lineage = recorded_lineage(meta, str(path))
        if net.hparams() != self.net.hparams():
            raise TrainError(f"{path}: the model shape {net.hparams()} differs from the config's")
        self.net.load_state_dict(net.state_dict())
        c = state["counters"]
        self.c = Counters(**{k: c[k] for k in vars(Counters()) if k in c})
        opt_state: dict[str, Any] = {"state": {}, "param_groups": state["param_groups"]}
        for key, v in tensors.items():
            if key.startswith("opt."):
                _, idx, k = key.split(".", 2)
                opt_state["state"].setdefault(int(idx), {})[k] = v
        self.learner.opt.load_state_dict(opt_state)  # on the CPU; _start moves it to learner.device
        self.learner.set_lr(self.cfg.ppo.lr)
        for sid in c.get("snapshot_ids", []):
            prefix = f"pool.{sid}."
            self.pool.append((sid, {k[len(prefix):]: v.numpy() for k, v in tensors.items() if k.startswith(prefix)}))
        torch.set_rng_state(tensors["rng.torch"])
        self.gen.set_state(tensors["rng.gen"])
        if self.det:
            self._restore_lanes(path, tensors, state.get("lanes"))
        self.eval_history = self._evals_on_record(list(state.get("eval_history", [])))
        self.last_eval = self.eval_history[-1] if self.eval_history else None
        self.tb_step = self.tb_first = self.c.decisions_trained
        self.resumed_from = path
        self._restore_extra(tensors, state)
        self.log(f"resumed from {path} (update {self.c.updates}, {self.c.decisions_trained:,} decisions trained)")

    def _restore_lanes(self, path: Path, tensors: dict[str, torch.Tensor], saved: dict[str, Any] | None) -> None:
        """Deterministic mode: the lanes of the checkpoint, whose requests out are asked again as they were
        (a checkpoint of a run that was not deterministic has none: its lanes start afresh, said once)."""
        workers = self.cfg.rollout.num_workers
        if not saved:
            self.log(f"{path} holds no deterministic lanes (written without rollout.deterministic):"
                     " the lanes start afresh")
            return
        if saved["count"] != workers:
            raise TrainError(f"{path}: a deterministic run of {saved['count']} lanes resumes with"
                             f" rollout.num_workers={saved['count']}, not {workers}")
        arrays = {k: v.numpy() for k, v in tensors.items() if k.startswith(("lane.", "bank."))}
        known = {self.c.updates: self.learner.weights()} | {sid: w for sid, w in self.pool}
        try:
            self.lanes = Lanes.from_checkpoint(arrays, saved, known)
        except ValueError as exc:
            raise TrainError(f"{path}: {exc}") from None

    def _evals_on_record(self, saved: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The evaluations of this run up to the resumed checkpoint.  ``eval.jsonl`` may hold more than the
        checkpoint's history: an evaluation launched at a checkpoint ends after it was written.  Those up to
        the checkpoint's update are kept (the weights are the resumed ones); later ones were made by work
        that is lost and will be redone, so they leave ``eval.jsonl``, as TensorBoard purges its points."""
        f = self.run_dir / "eval.jsonl"
        if not f.is_file():
            return saved
        lines = [ln for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()]
        kept, lost = [], 0
        for ln in lines:
            try:
                entry = json.loads(ln)
            except json.JSONDecodeError:  # a line cut short by a kill
                lost += 1
                continue
            if entry.get("updates", 0) <= self.c.updates:
                kept.append(entry)
            else:
                lost += 1
        if lost:
            write_atomic(f, "".join(json.dumps(e) + "\n" for e in kept))
            self.log(f"eval.jsonl: {lost} evaluation(s) after update {self.c.updates} dropped"
                     " (their work is redone)")
        return kept if len(kept) >= len(saved) else saved

    # ---- the loop: start, then submit / collect / update / evaluate / checkpoint / log ----------
    def run(self) -> dict[str, Any]:
        """Train until ``total_decisions`` or ``max_minutes``; returns the run's summary."""
        stop = StopSignals(self.log)
        try:
            self._start()
            s = self.session
            s.stop_reason = self._stop_reason()
            with s.display, stop:
                while not s.stop_reason:
                    self._resubmit_restarted()
                    ready = s.queue.decisions() >= self.cfg.ppo.batch_decisions  # then wait for nothing
                    self._collect(timeout=0 if ready else 0.5)
                    batches = self._take()
                    if batches:
                        self._update(batches)
                        self._after_update()
                    self._poll_eval()
                    self._log()
                    if batches or not self.det:  # deterministic: only after an update (nothing queued)
                        s.stop_reason = self._stop_reason() or stop.reason
            if s.eval_ref is not None:  # let a periodic evaluation in flight finish: it is part of the curve
                import ray
                self._record_eval(ray.get(s.eval_ref[0]), s.eval_ref[1])
            self._log_scalars(s.rate)
            final = self.save()
        finally:
            self._stop()
            torch.use_deterministic_algorithms(self.was_deterministic)
        summary = self.summary(s.rate, s.stop_reason, final)
        write_json_atomic(self.run_dir / "summary.json", summary)
        self.writer.flush()
        return summary

    def _start(self) -> None:
        """Ray, the learner's device, TensorBoard, the actors, the first requests."""
        import ray
        from torch.utils.tensorboard import SummaryWriter

        cfg = self.cfg
        if self.det:
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what cuBLAS needs for it
            torch.use_deterministic_algorithms(True)
        self.started_ray = self._start_ray()
        if wants_cuda(cfg.learner.device):
            self._reserve_gpu()
        try:
            self.learner.to(resolve_device(cfg.learner.device))
        except DeviceError as exc:
            raise TrainError(str(exc)) from None
        self._check_cpus()
        try:
            # A resume purges the points after its checkpoint (work lost with a killed sitting, redone now),
            # not those at its step: the final ones of the sitting it continues.
            purge = self.tb_first + 1 if self.resumed_from else None
            self.writer = SummaryWriter(str(self.run_dir), purge_step=purge)
        except OSError as exc:
            raise TrainError(f"cannot write the run folder {self.run_dir}: {exc.strerror or exc}") from None
        if self.c.updates == 0:
            self.writer.add_text("config", "```\n" + to_yaml(cfg) + "\n```", 0)
        Actor = _actor_class()
        cfg_dict = to_dict(cfg)
        self.actors = [Actor.options(num_cpus=cfg.rollout.cpus_per_worker, max_restarts=cfg.rollout.max_restarts,
                                     max_task_retries=0, scheduling_strategy="SPREAD").remote(cfg_dict, w)
                       for w in range(self.rollout_workers)]
        self.placement = self._wait_placed(self.actors, "rollout worker", cfg.rollout.cpus_per_worker)
        self.cur_weights = self.learner.weights()
        self.weights_ref = ray.put(self.cur_weights)
        self.pool_refs = [(sid, ray.put(w)) for sid, w in self.pool]
        self.pending: dict[Any, tuple[int, int]] = {}
        self.consumed: set[int] = set()
        self.health = WorkerHealth("rollout worker", len(self.actors), cfg.rollout.max_restarts)
        self.session = _Session(wall0=self.c.wall_s, eval_fn=_evaluate_remote_fn(),
                                display=_Display(cfg, self), queue=RolloutQueue(cfg.learner.max_policy_lag),
                                capacity=cfg.learner.queue_rollouts or len(self.actors) + 1)
        if not self.det:
            for w in range(len(self.actors)):
                self._submit(w)
            return
        if self.lanes is None:
            self.lanes = Lanes(len(self.actors))
        asked = {r.lane for r in self.lanes.out.values()}
        for req in sorted(self.lanes.out.values(), key=lambda r: r.id):  # a resume: the requests out again
            self._send(req)
        for w in range(len(self.actors)):
            if w not in asked:
                self._ask_lane(w)

    def _start_ray(self) -> bool:
        """Join the cluster at ``ray_address``, or start an embedded Ray that listens on 127.0.0.1 only
        (Ray has no authentication of its own: nobody else on the network may reach it).  False when
        Ray was already running in this process."""
        import ray
        if ray.is_initialized():
            return False
        env = {"env_vars": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}
        if self.ray_address:
            ray.init(address=self.ray_address, runtime_env=env, log_to_driver=False, logging_level="error")
            return True
        from ray._private import ray_constants
        # Ray binds every server to loopback alone when its node address is 127.0.0.1, and it keeps that
        # address only where it offers no multi-node clusters: this switch (off on macOS and Windows).
        clusters, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
        # Ray starts its workers at nice 15; here they are the run's own work beside a learner at nice 0
        # that waits for them, and any other load on the machine would starve them (RAY_worker_niceness wins)
        system = {} if "RAY_worker_niceness" in os.environ else {"worker_niceness": 0}
        try:
            ray.init(address="local", _node_ip_address="127.0.0.1", num_cpus=embedded_cpus(),
                     include_dashboard=self.dashboard, runtime_env=env, log_to_driver=False,
                     logging_level="error", _system_config=system)
        finally:
            ray_constants.ENABLE_RAY_CLUSTER = clusters
        return True

    def _reserve_gpu(self) -> None:
        """Ask Ray for one GPU on this node (where the learner runs), so no other Ray work takes it;
        refuse at once, in one line, when the node has none."""
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group

        spec = self.cfg.learner.device
        node_id = ray.get_runtime_context().get_node_id()
        node = next(n for n in ray.nodes() if n["NodeID"] == node_id)
        ip = node["NodeManagerAddress"]
        if node["Resources"].get("GPU", 0) < 1:
            total = ray.cluster_resources().get("GPU", 0)
            where = (f"the cluster's {total:g} GPU(s) are on other nodes: run samloc train on a GPU node" if total
                     else "the Ray cluster has no GPU")
            raise TrainError(f"learner.device={spec}: Ray has no GPU for the learner on this node ({ip}); {where}"
                             f" (or use learner.device=cpu)")
        pg = placement_group([{"GPU": 1, f"node:{ip}": 0.001}])
        if not ray.wait([pg.ready()], timeout=10)[0]:
            remove_placement_group(pg)
            raise TrainError(f"learner.device={spec}: the GPU of this node ({ip}) is held by other Ray work")
        self.gpu_reservation = pg

    def _check_cpus(self) -> None:
        """Workers that cannot fit: refused here at once (an embedded Ray never grows), said on a cluster."""
        import ray
        msg = cpu_shortfall(self.cfg, ray.cluster_resources().get("CPU", 0), embedded=not self.ray_address)
        if msg and not self.ray_address:
            raise TrainError(msg)
        if msg:
            self.log(msg + "; waiting for more nodes to join (rollout.place_timeout_s)")

    def _wait_placed(self, actors: list[Any], what: str, cpus: float) -> list[dict[str, Any]]:
        """Every process of ``actors`` (each a ``what`` asking for ``cpus``), once started; what Ray is
        waiting for is said every few seconds, and after ``rollout.place_timeout_s`` it is an error."""
        import ray
        from ray.exceptions import RayActorError

        ro = self.cfg.rollout
        pending = {a.info.remote(): w for w, a in enumerate(actors)}
        info: dict[int, dict[str, Any]] = {}
        t0 = time.perf_counter()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=5.0)
            for ref in ready:
                w = pending.pop(ref)
                try:
                    info[w] = ray.get(ref)
                except RayActorError as exc:
                    raise TrainError(f"{what} {w} did not start: {str(exc).splitlines()[0]}") from None
            if not pending:
                break
            waited, free = time.perf_counter() - t0, ray.available_resources().get("CPU", 0)
            why = (f"Ray has {free:g} CPUs free, each asks for {cpus:g}" if free < cpus
                   else "their processes are starting")
            msg = f"{len(pending)} of {len(actors)} {what}s not started after {waited:.0f} s ({why})"
            if ro.place_timeout_s and waited >= ro.place_timeout_s:
                raise TrainError(msg + "; giving up (rollout.place_timeout_s)")
            self.log(msg)
        return [info[w] for w in range(len(actors))]

    def _stop(self) -> None:
        import ray
        if not ray.is_initialized():
            return
        for a in self.actors:
            ray.kill(a, no_restart=True)
        if self.gpu_reservation is not None:
            from ray.util.placement_group import remove_placement_group
            remove_placement_group(self.gpu_reservation)
            self.gpu_reservation = None
        if self.started_ray:
            ray.shutdown()

    def _resubmit_restarted(self) -> None:
        """Ask again the workers whose actor Ray was restarting, once their wait is over."""
        for w in self.health.due():
            if self.lanes is not None:
                req = self.lanes.of_lane(w)
                if req is not None and req.ref is None:
                    self._send(req)  # the same request again: the same rollout
            else:
                self._ask(w)

    def _collect(self, timeout: float) -> None:
        """Queue the rollouts that arrived (waiting up to ``timeout`` for the first); each worker that
        delivered is asked again at once, with the newest weights, if the queue has room.  A failed request
        is dropped and asked again."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        s = self.session
        if self.lanes is not None:
            self._collect_in_order(timeout)
            return
        for ref in arrived(self.pending, timeout):
            w, req = self.pending.pop(ref)
            try:
                out = ray.get(ref)
            except (RayActorError, RayTaskError) as exc:
                self._worker_failed(w, req, exc)
                continue
            self.health.ok(w)
            if req in self.consumed:  # impossible by construction; kept as a guard
                raise TrainError(f"rollout {req} arrived twice")
            self.consumed.add(req)
            s.queue.put(out)
            self._ask(w)

    def _collect_in_order(self, timeout: float) -> None:
        """Deterministic mode: consume the oldest request's rollout when it is there (waiting up to
        ``timeout``), then ask its lane again with the learner's weights and pool as they are now."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        req = self.lanes.next()
        if req is None or req.ref is None:  # it waits to be asked again (its worker is restarting)
            time.sleep(min(timeout, 0.05))
            return
        if not ray.wait([req.ref], timeout=timeout)[0]:
            return
        try:
            out = ray.get(req.ref)
        except (RayActorError, RayTaskError) as exc:
            req.ref = None
            self._worker_failed(req.lane, req.id, exc)
            return
        self.health.ok(req.lane)
        if req.id in self.consumed:  # impossible by construction; kept as a guard
            raise TrainError(f"rollout {req.id} arrived twice")
        self.consumed.add(req.id)
        self.lanes.consumed(req, out.pop("state"))
        self.session.queue.put(out)
        self._ask_lane(req.lane)

    def _ask_lane(self, lane: int) -> None:
        """Deterministic mode: the lane's next request, with the weights and the pool of now."""
        req = Request(self.c.next_request, lane, self.c.updates, self.cur_weights, list(self.pool),
                      refs=(self.weights_ref, self.pool_refs))
        self.c.next_request += 1
        self.lanes.ask(req)
        self._send(req)

    def _send(self, req: Request) -> None:
        """Ask ``req`` of its lane's worker (again after a failure, or after a resume: the same rollout)."""
        import ray
        if req.refs is None:
            req.refs = (ray.put(req.weights), [(sid, ray.put(w)) for sid, w in req.pool])
        weights_ref, pool_refs = req.refs
        req.ref = self.actors[req.lane].rollout.remote(weights_ref, req.version, pool_refs,
                                                       request_seed(self.cfg.seed, req.lane, req.id),
                                                       {"state": self.lanes.states[req.lane]})

    def _ask(self, w: int) -> None:
        """Ask worker ``w`` again if the queue has room (rollouts in flight and waiting) or the learner
        still lacks a batch, else let it wait."""
        s = self.session
        if len(self.pending) + len(s.queue) < s.capacity or s.queue.decisions() < self.cfg.ppo.batch_decisions:
            self._submit(w)
        else:
            s.waiting.append(w)

    def _ask_waiting(self) -> None:
        """The queue has room again: ask the workers that were waiting for it."""
        s = self.session
        waiting, s.waiting = s.waiting, []
        for w in waiting:
            self._ask(w)

    def _between_steps(self) -> None:
        """Run between the update's gradient steps: keep the workers busy (deterministic mode consumes
        nothing here: when a rollout arrives must not change which weights its lane plays next)."""
        self._resubmit_restarted()
        if self.lanes is None:
            self._collect(timeout=0)

    def _take(self) -> list[dict[str, Any]]:
        """The next update's rollouts: every fresh one queued, once they hold ``ppo.batch_decisions``."""
        batches, dropped = self.session.queue.take(self.c.updates, self.cfg.ppo.batch_decisions)
        self.c.dropped_rollouts += dropped
        if batches or dropped:
            self._ask_waiting()
        return batches

    def _worker_failed(self, w: int, req: int, exc: Exception) -> None:
        """A rollout request failed: it is asked again once Ray has restarted the actor."""
        if self.health.failed(w, exc):
            self.c.worker_failures += 1
            again = "asked again as it was" if self.det else "dropped and asked again"
            self.log(f"rollout worker {w} failed ({type(exc).__name__}); Ray restarts it,"
                     f" request {req} is {again}")

    def _after_update(self) -> None:
        """Snapshot, evaluation and checkpoint on their schedules, then the test hook."""
        cfg, s, u = self.cfg, self.session, self.c.updates
        s.rate.add(time.perf_counter(), self.c.decisions_trained, u, self.c.decisions)
        if u % cfg.rollout.snapshot_every == 0:
            self._snapshot()
        if cfg.eval.every_updates and u % cfg.eval.every_updates == 0:
            if s.eval_ref is not None and self.det:  # deterministic: every due evaluation, none skipped
                import ray
                self._record_eval(ray.get(s.eval_ref[0]), s.eval_ref[1])
                s.eval_ref = None
            if s.eval_ref is None:
                s.eval_ref = self._launch_eval(s.eval_fn, cfg.eval.deals)
        if u % cfg.checkpoint.every_updates == 0:
            self.c.wall_s = s.wall()
            self.save()
        if self.on_update is not None:
            self.on_update(self)

    def _poll_eval(self) -> None:
        import ray
        s = self.session
        if s.eval_ref is not None:
            done, _ = ray.wait([s.eval_ref[0]], timeout=0)
            if done:
                self._record_eval(ray.get(done[0]), s.eval_ref[1])
                s.eval_ref = None

    def _log(self) -> None:
        s = self.session
        now = time.perf_counter()
        self.c.wall_s = s.wall()
        if now - s.last_log >= self.cfg.log_every_s:
            self._log_scalars(s.rate)
            s.last_log = now
        s.display.update(s.rate)

    def _stop_reason(self) -> str:
        return stop_reason(self.cfg, self.c.decisions_trained, self.c.wall_s)

    def _submit(self, w: int) -> None:
        req = self.c.next_request
        self.c.next_request += 1
        seed = request_seed(self.cfg.seed, w, req)
        ref = self.actors[w].rollout.remote(self.weights_ref, self.c.updates, self.pool_refs, seed)
        self.pending[ref] = (w, req)

    def _update(self, batches: list[dict[str, Any]]) -> None:
        """One PPO update on these rollouts; new weights go out with the next requests."""
        import ray
        self._anneal()
        lags = [self.c.updates - b["version"] for b in batches]
        lr = self.learner.opt.param_groups[0]["lr"]
        t0 = time.perf_counter()
        self.losses = self.learner.update([b["batch"] for b in batches], lags, self.gen, self._between_steps)
        self.losses["update_s"] = time.perf_counter() - t0
        self.losses["policy_lag"] = float(np.mean(lags))
        self.losses["policy_lag_max"] = float(max(lags))
        self.cur_weights = self.learner.weights()
        self.weights_ref = ray.put(self.cur_weights)
        self.c.updates += 1
        self.c.decisions_trained += sum(len(b["batch"]["act"]) for b in batches)
        self.c.rollouts += len(batches)
        st = self.stats = {}
        for b in batches:
            for k, v in b["stats"].items():
                st[k] = st.get(k, 0) + v
        self.c.games += int(st["games"])
        self.c.decisions += int(st["decisions"])
        self.c.sam_declared += int(st["sam_declared"])
        step = self.c.decisions_trained
        self._write_losses(lr, step)
        if st["vs_heuristic_games"]:
            self.writer.add_scalar("charts/train_vs_heuristic_la", st["vs_heuristic_sum"] / st["vs_heuristic_games"],
                                   step)
        if st["vs_pool_games"]:
            self.writer.add_scalar("charts/train_vs_pool_la", st["vs_pool_sum"] / st["vs_pool_games"], step)
        self.writer.add_scalar("charts/sam_declared_per_game", st["sam_declared"] / max(1, st["games"]), step)

    def _anneal(self) -> None:
        """``ppo.anneal_lr``: the learning rate for the share of ``total_decisions`` still to train."""
        cfg = self.cfg
        if cfg.ppo.anneal_lr:
            self.learner.set_lr(cfg.ppo.lr * max(0.0, 1.0 - self.c.decisions_trained / cfg.total_decisions))

    def _write_losses(self, lr: float, step: int) -> None:
        """The update's losses (``losses/<name>``) and the learning rate it used, in TensorBoard."""
        for k, v in self.losses.items():
            self.writer.add_scalar(f"losses/{k}", v, step)
        self.writer.add_scalar("charts/learning_rate", lr, step)

    def _snapshot(self) -> None:
        import ray
        w = self.learner.weights()
        self.pool.append((self.c.updates, w))
        refs = dict(self.pool_refs)
        refs[self.c.updates] = ray.put(w)
        self.pool_refs = [(sid, refs[sid]) for sid, _ in self.pool]

    def _launch_eval(self, eval_fn: Any, deals: int) -> tuple[Any, dict[str, int]]:
        cfg = self.cfg
        snap = self.pool[0][1] if self.pool else None
        at = {"updates": self.c.updates, "decisions_trained": self.c.decisions_trained, "games": self.c.games,
              "wall_s": round(self.c.wall_s, 1), "snapshot": self.pool[0][0] if self.pool else None}
        ref = eval_fn.remote(self.learner.weights(), self.net.hparams(), list(cfg.eval.opponents), snap,
                             eval_rules(cfg), eval_players(cfg), deals, mix(cfg.seed, 7, self.c.updates))
        return ref, at

    def _record_eval(self, res: dict[str, Any], at: dict[str, Any]) -> None:
        entry = dict(at) | {"results": res}
        self.eval_history.append(entry)
        self.last_eval = entry
        self._eval_scalars(res, at["decisions_trained"])
        with open(self.run_dir / "eval.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def _eval_scalars(self, res: dict[str, Any], step: int, prefix: str = "") -> None:
        """``eval/<opponent>/<prefix>mean_la`` with its 95% CI (``ci95_low``, ``ci95_high``), win rate,
        Sâm declarations."""
        for opp, r in res.items():
            if "mean_score" in r:
                lo, hi = r["ci95"]
                for name, v in (("mean_la", r["mean_score"]), ("ci95_low", lo), ("ci95_high", hi),
                                ("win_rate", r["win_rate"]),
                                ("sam_declared_per_game", r["sam_declared"] / max(1, r["games"])),
                                ("sam_success_rate", r["sam_success_rate"])):
                    self.writer.add_scalar(f"eval/{opp}/{prefix}{name}", v, step)

    def record_final_eval(self, report: dict[str, Any]) -> None:
        """The final evaluation's figures in TensorBoard (``eval/<opponent>/final_mean_la`` ...), at the step
        of the final checkpoint; not again when this sitting trained nothing (same weights, deals, seed)."""
        if self.c.decisions_trained > self.tb_first:
            self._eval_scalars(report["results"], self.c.decisions_trained, prefix="final_")
            self.writer.flush()

    def _log_scalars(self, rate: "_Rate") -> None:
        """The counters and rates, once per step (a step is never written twice: the steps of a tag rise)."""
        step = self.c.decisions_trained
        if step <= self.tb_step:
            return
        self.tb_step = step
        w = self.writer
        w.add_scalar("charts/games", self.c.games, step)
        w.add_scalar("charts/decisions", self.c.decisions, step)
        w.add_scalar("charts/decisions_trained", self.c.decisions_trained, step)
        w.add_scalar("charts/updates", self.c.updates, step)
        w.add_scalar("charts/worker_failures", self.c.worker_failures, step)
        w.add_scalar("charts/dropped_rollouts", self.c.dropped_rollouts, step)
        r = rate.rates()
        if r:
            w.add_scalar("charts/decisions_per_s", r["trained_per_s"], step)
            w.add_scalar("charts/generated_decisions_per_s", r["generated_per_s"], step)
            w.add_scalar("charts/updates_per_s", r["updates_per_s"], step)
        w.flush()

    def display_rows(self) -> list[tuple[str, str]]:
        """(label, text) rows a subclass adds to the live display and the plain log line."""
        return []

    def summary(self, rate: "_Rate", reason: str, final: Path) -> dict[str, Any]:
        r = rate.rates(window=False)
        return {"name": self.cfg.name, "run_dir": str(self.run_dir), "checkpoint": str(final),
                "stop_reason": reason, "updates": self.c.updates, "games": self.c.games,
                "decisions": self.c.decisions,
                "decisions_trained": self.c.decisions_trained, "rollouts": self.c.rollouts,
                "dropped_rollouts": self.c.dropped_rollouts, "device": str(self.learner.device),
                "worker_failures": self.c.worker_failures, "wall_s": round(self.c.wall_s, 1),
                "session_rates": r, "last_eval": self.last_eval,
                "workers": [{"worker": p["worker"], "node_id": p["node_id"]} for p in self.placement]}


@dataclass
class _Session:
    """What one sitting of :meth:`Trainer.run` keeps between the phases of its loop."""

    wall0: float                  # training wall time of the earlier sittings
    eval_fn: Any
    display: "_Display"
    queue: RolloutQueue           # arrived rollouts waiting for the learner
    capacity: int                 # rollouts in flight or waiting, at most
    waiting: list[int] = field(default_factory=list)  # workers waiting for room in the queue
    t0: float = field(default_factory=time.perf_counter)
    last_log: float = field(default_factory=time.perf_counter)
    rate: "_Rate" = field(default_factory=lambda: _Rate())
    eval_ref: Any = None          # (ObjectRef, when) of the periodic evaluation in flight
    stop_reason: str = ""

    def wall(self) -> float:
        return self.wall0 + time.perf_counter() - self.t0


class WorkerHealth:
    """The failures of one group of Ray actors (rollout or search workers): one is counted per actor
    restart, not per request that fails while Ray restarts it, and a worker that failed more than
    ``max_restarts`` + 1 times (-1: no limit) ends the run.  A failed worker is asked again after a
    short wait (:meth:`due`)."""

    RETRY_S = 0.5

    def __init__(self, what: str, workers: int, max_restarts: int):
        self.what, self.max_restarts = what, max_restarts
        self.failures = [0] * workers
        self.recovering = [False] * workers  # a failure seen, no result since
        self.retry_at: dict[int, float] = {}   # worker -> when to ask it again

    def failed(self, w: int, exc: Exception) -> bool:
        """Worker ``w``'s request failed with ``exc``: True when it is a new failure (False: the actor is
        still restarting after the last one); raises :class:`TrainError` past the limit."""
        from ray.exceptions import ActorUnavailableError

        self.retry_at[w] = time.perf_counter() + self.RETRY_S
        if self.recovering[w] and isinstance(exc, ActorUnavailableError):
            return False
        self.recovering[w] = True
        self.failures[w] += 1
        if self.max_restarts >= 0 and self.failures[w] > self.max_restarts + 1:
            raise TrainError(f"{self.what} {w} failed {self.failures[w]} times;"
                             f" last error: {str(exc).splitlines()[0]}") from None
        return True

    def ok(self, w: int) -> None:
        """Worker ``w`` delivered: its actor is up again."""
        self.recovering[w] = False

    def due(self) -> list[int]:
        """The failed workers whose wait is over (each returned once): ask them again."""
        now = time.perf_counter()
        ready = [w for w, t in self.retry_at.items() if now >= t]
        for w in ready:
            del self.retry_at[w]
        return ready


def arrived(pending: dict[Any, Any], timeout: float) -> list[Any]:
    """The results among ``pending``'s refs that are done: waiting up to ``timeout`` for the first, then
    every other one done by then (none pending: a short sleep, so a loop does not spin)."""
    import ray

    if not pending:
        time.sleep(min(timeout, 0.05))
        return []
    ready, rest = ray.wait(list(pending), num_returns=1, timeout=timeout)
    if ready and rest:
        ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
    return ready


class StopSignals:
    """Ctrl-C (SIGINT) or SIGTERM (a scheduler's preemption, a session's end) ends the sitting at the
    next step of the loop, through its usual end: the periodic evaluation in flight, a checkpoint, then
    the final evaluation and export, so ``--resume`` continues from the moment it was asked to stop.
    A second signal interrupts at once (the checkpoints already written stay).  Handlers are installed
    only in the main thread, the one Python delivers signals to."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, log: Callable[[str], None]):
        self.log = log
        self.reason = ""
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.reason:
            raise KeyboardInterrupt(f"{name} again: stopped at once")
        self.reason = f"stopped by {name}"
        self.log(f"{name}: stopping after this step with a checkpoint ({name} again stops at once)")

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: Any) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}


class _Rate:
    """Throughput over a sliding window of updates (and over the whole session)."""

    def __init__(self) -> None:
        self.points: deque[tuple[float, int, int, int]] = deque(maxlen=20)
        self.first: tuple[float, int, int, int] | None = None

    def add(self, t: float, trained: int, updates: int, generated: int) -> None:
        p = (t, trained, updates, generated)
        if self.first is None:
            self.first = p
        self.points.append(p)

    def rates(self, window: bool = True) -> dict[str, float]:
        if len(self.points) < 2:
            return {}
        a = self.points[0] if window else self.first
        b = self.points[-1]
        dt = b[0] - a[0]
        if dt <= 0:
            return {}
        return {"trained_per_s": (b[1] - a[1]) / dt, "updates_per_s": (b[2] - a[2]) / dt,
                "generated_per_s": (b[3] - a[3]) / dt}


class _Display:
    """A rich live panel on a terminal; a plain line per interval otherwise (or nothing)."""

    def __init__(self, cfg: TrainConfig, trainer: Trainer):
        self.cfg, self.tr = cfg, trainer
        mode = cfg.display
        if mode == "auto":
            mode = "rich" if sys.stdout.isatty() else "plain"
        self.mode = mode
        self.live = None
        self.last = 0.0

    def __enter__(self) -> "_Display":
        if self.mode == "rich":
            from rich.live import Live
            self.live = Live(self._render({}), refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def _eta(self, r: dict[str, float]) -> str:
        c, cfg = self.tr.c, self.cfg
        left = []
        if r.get("trained_per_s"):
            left.append((cfg.total_decisions - c.decisions_trained) / r["trained_per_s"])
        if cfg.max_minutes:
            left.append(cfg.max_minutes * 60 - c.wall_s)
        if not left:
            return "?"
        s = max(0, int(min(left)))
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"

    def _eval_text(self) -> str:
        ev = self.tr.last_eval
        if not ev:
            return "none yet"
        parts = [f"{opp} {r['mean_score']:+.2f} lá ({100 * r['win_rate']:.0f}% wins)"
                 for opp, r in ev["results"].items() if "mean_score" in r]
        return f"@update {ev['updates']}: " + ", ".join(parts)

    def _render(self, r: dict[str, float]) -> Any:
        from rich.table import Table
        c = self.tr.c
        t = Table(title=f"samloc train — {self.cfg.name} → {self.tr.run_dir}", show_header=False)
        t.add_column(style="bold")
        t.add_column()
        pct = 100 * c.decisions_trained / self.cfg.total_decisions
        t.add_row("games", f"{c.games:,}")
        t.add_row("decisions trained", f"{c.decisions_trained:,} ({pct:.1f}%)")
        t.add_row("decisions/s", f"{r.get('trained_per_s', 0):,.0f} trained, {r.get('generated_per_s', 0):,.0f} generated")
        t.add_row("updates", f"{c.updates:,} ({r.get('updates_per_s', 0):.2f}/s)")
        t.add_row("ETA", self._eta(r))
        ls = self.tr.losses
        if "policy" in ls:
            t.add_row("losses", f"policy {ls['policy']:+.4f}  value {ls['value']:.4f}  entropy {ls['entropy']:.3f}"
                                f"  kl {ls['approx_kl']:.4f}")
        for label, text in self.tr.display_rows():
            t.add_row(label, text)
        t.add_row("last eval", self._eval_text())
        if c.worker_failures:
            t.add_row("worker failures", str(c.worker_failures))
        return t

    def update(self, rate: _Rate) -> None:
        now = time.perf_counter()
        if self.mode == "none" or now - self.last < (0.5 if self.mode == "rich" else self.cfg.log_every_s):
            return
        self.last = now
        r = rate.rates()
        if self.mode == "rich" and self.live is not None:
            self.live.update(self._render(r))
        elif self.mode == "plain":
            c = self.tr.c
            extra = "".join(f" | {label} {text}" for label, text in self.tr.display_rows())
            print(f"[{self.cfg.name}] update {c.updates} games {c.games:,} trained {c.decisions_trained:,}"
                  f" ({r.get('trained_per_s', 0):,.0f}/s, generated {r.get('generated_per_s', 0):,.0f}/s)"
                  f" ETA {self._eta(r)}{extra} | eval {self._eval_text()}", flush=True)


def new_run_dir(cfg: TrainConfig) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(cfg.out_dir) / f"{cfg.name}__{cfg.seed}__{stamp}"
    p, i = base, 1
    while p.exists():
        i += 1
        p = base.with_name(base.name + f"-{i}")
    return p


def write_hparams(trainer: Trainer, summary: dict[str, Any], report: dict[str, Any] | None = None) -> None:
    """The config as TensorBoard hyperparameters, with the final figures as metrics (the final evaluation's,
    else the last periodic one's), then the writer is closed.

    They go into the run's own event files at the step of the final checkpoint, as TensorFlow's hparams
    API writes them, not into a sub-run per sitting (``SummaryWriter.add_hparams``): each resume then adds
    one point to each metric, at a later step.  A sitting that trained nothing writes none."""
    from torch.utils.tensorboard.summary import hparams

    w, step = trainer.writer, trainer.c.decisions_trained
    if step > trainer.tb_first:
        metrics = {"hparam/decisions_trained": float(summary["decisions_trained"])}
        ev = (report or summary.get("last_eval") or {}).get("results") or {}
        for opp, r in ev.items():
            if "mean_score" in r:
                metrics[f"hparam/eval_{opp}_mean_la"] = float(r["mean_score"])
        for part in hparams(flat(trainer.cfg), metrics):
            w.file_writer.add_summary(part, step)
        for k, v in metrics.items():
            w.add_scalar(k, v, step)
    w.close()
