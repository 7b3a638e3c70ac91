"""The run state: what a run has done and descends from, and its checkpoints.

It holds the counters (exact over resumes), the snapshot pool, the learner's sampling generator, the
evaluations so far, the commands and the lineage; :meth:`RunState.save` writes a checkpoint (atomically,
weights in safetensors, see :mod:`agents.nets.checkpoint`) of the network, the optimizer, this state and
what the parts add (the schedule's lanes, the algorithm's own), and :meth:`RunState.restore` reads the
newest good one back, verified.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from agents.nets import checkpoint as ckpt
from agents.nets.format import TRAINER_JSON, CheckpointMeta, latest_good, list_checkpoints, read_json_file
from sam_env.actions import ACTION_TABLE_VERSION
from sam_env.atomic import check_folder, check_target, write_atomic, write_json_atomic
from sam_env.machine import git_commit
from sam_env.obs import OBS_VERSION
from sam_env.seeding import mix

from ..config import TrainConfig, to_dict, to_yaml, training_tables
from ..errors import TrainError
from .learner import Learner

Weights = dict[str, np.ndarray]


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


def counters_problem(counters: dict[str, Any]) -> str:
    """What is wrong with a checkpoint's counters ('' when nothing): each of :class:`Counters`' fields of
    its declared type, a count never negative (``updates`` -4 would name a checkpoint ``ckpt_-0000004``)."""
    for f in fields(Counters):  # the types Counters declares: "int", "float", "list[int]"
        v = counters.get(f.name, 0 if f.name != "snapshot_ids" else [])
        items = v if isinstance(v, list) and f.type == "list[int]" else [v]
        kinds = (int, float) if f.type == "float" else int
        shape_ok = isinstance(v, list) == (f.type == "list[int]")
        if not shape_ok or not all(isinstance(i, kinds) and not isinstance(i, bool) for i in items):
            return (f"counters.{f.name} is {json.dumps(v)[:40]}, not"
                    f" {'a list of integers' if f.type == 'list[int]' else 'a number'}")
        if not all(math.isfinite(i) and i >= 0 for i in items):
            return f"counters.{f.name} is {json.dumps(v)[:40]}: a count is never negative"
    return ""


def eval_entry_problem(entry: Any) -> str:
    """What is wrong with one evaluation of ``eval.jsonl`` ('' when nothing): what the resume, the curve
    and ``samloc seeds`` read of it (the point's counts, each opponent's mean and interval)."""
    if not isinstance(entry, dict):
        return f"it is {json.dumps(entry)[:40]}, not an evaluation (an object)"
    for key in ("updates", "decisions_trained"):
        v = entry.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return f"{key} is {json.dumps(v)[:40]}, not a count"
    if "wall_s" in entry and not _number(entry["wall_s"], low=0.0):
        return f"wall_s is {json.dumps(entry['wall_s'])[:40]}, not a number of seconds"
    results = entry.get("results")
    if not isinstance(results, dict):
        return f"results is {json.dumps(results)[:40]}, not an object of opponents"
    for opp, r in results.items():
        if not isinstance(r, dict):
            return f"results.{opp} is {json.dumps(r)[:40]}, not an object"
        if "mean_score" in r and not _number(r["mean_score"], finite=False):
            return f"results.{opp}.mean_score is {json.dumps(r['mean_score'])[:40]}, not a number"
        ci = r.get("ci95", [0.0, 0.0])  # (NaN, as JSON writes it, where a few deals leave no spread)
        if not (isinstance(ci, list) and len(ci) == 2 and all(_number(x, finite=False) for x in ci)):
            return f"results.{opp}.ci95 is {json.dumps(ci)[:40]}, not two numbers"
    return ""


def _number(v: Any, low: float = -math.inf, finite: bool = True) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool) and (math.isfinite(v) or not finite)
            and (v >= low or not finite))


def read_eval_log(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The evaluations ``eval.jsonl`` holds, and how many of its lines were cut short (its last, by a kill:
    dropped); TrainError naming the first damaged line otherwise (a resume never runs on with it)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainError(f"{path}: cannot be read ({exc})") from None
    numbered = [(i, ln) for i, ln in enumerate(lines, 1) if ln.strip()]
    out, cut = [], 0
    for k, (i, ln) in enumerate(numbered):
        try:
            entry = json.loads(ln)
        except json.JSONDecodeError as exc:
            if k == len(numbered) - 1:  # the last line, cut short by a kill
                cut += 1
                continue
            raise TrainError(f"{path} line {i}: not JSON ({exc.msg}); fix or remove the line") from None
        why = eval_entry_problem(entry)
        if why:
            raise TrainError(f"{path} line {i}: {why}; fix or remove the line")
        out.append(entry)
    return out, cut


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


def new_run_dir(out_dir: str, name: str, seed: int) -> Path:
    """A fresh folder under ``out_dir`` for a new run of config ``name`` and ``seed``; UnsafeTarget (one
    line) when none can be made there."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = check_folder(Path(out_dir) / f"{name}__{seed}__{stamp}")
    p, i = base, 1
    while p.exists():
        i += 1
        p = base.with_name(base.name + f"-{i}")
    return p


@dataclass
class Restored:
    """A checkpoint read back: where, its extra tensors and JSON state (for the parts that wrote them)."""

    path: Path
    tensors: dict[str, torch.Tensor]
    state: dict[str, Any]


class RunState:
    """What one run in ``run_dir`` has done (see the module docstring)."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, command: str, log: Callable[[str], None]):
        self.cfg, self.run_dir, self.command, self.log = cfg, Path(run_dir), command, log
        self.counters = Counters()
        self.gen = torch.Generator().manual_seed(mix(cfg.seed, 1))
        self.pool: deque[tuple[int, Weights]] = deque(maxlen=cfg.rollout.pool_size)
        self.eval_history: list[dict[str, Any]] = []
        self.last_eval: dict[str, Any] | None = None
        self.resumed_from: Path | None = None
        # The command that started the run, and every --resume since: a resumed bot's
        # metadata still says how it was trained, not only how it was finished.
        self.first_command, self.resumes = command, []
        #: the runs these weights descend from by init_from, oldest first (:func:`lineage_of`)
        self.lineage: list[dict[str, Any]] = []
        self.code_commit = ""
        #: the stage the run is in (``stages``; 0 without) and where each began (training/run/stages.py)
        self.stage = 0
        self.stage_starts: list[dict[str, Any]] = []

    def write_run_files(self, resume: bool) -> None:
        """The resolved config, and for a new run ``run.json`` (the code and command it started from)."""
        #: the code this sitting runs, read once: the tree may move on while it trains
        self.code_commit = git_commit()
        try:
            check_folder(self.run_dir).mkdir(parents=True, exist_ok=True)
            self.write_config()
            if not resume:
                write_json_atomic(self.run_dir / "run.json", {
                    "git_commit": self.code_commit, "command": self.command,
                    "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "obs_version": OBS_VERSION, "action_table_version": ACTION_TABLE_VERSION})
        except OSError as exc:
            raise TrainError(f"cannot write the run folder {self.run_dir}: {exc.strerror or exc}") from None

    def write_config(self) -> None:
        """The run's config as it runs (``auto`` figures once resolved): what a resume reads."""
        write_atomic(self.run_dir / "config.yaml", to_yaml(self.cfg))

    def metadata(self) -> dict[str, Any]:
        cfg, c = self.cfg, self.counters
        tables = training_tables(cfg.env)
        return {
            "name": cfg.name, "config": to_dict(cfg), "rules": sorted({t.rules.name for t in tables}),
            "players": sorted({t.players for t in tables}), "tables": [t.to_record() for t in tables],
            "reward_scale": cfg.env.reward_scale,
            "heuristic_share": cfg.rollout.opponent_fraction * cfg.rollout.heuristic_share,
            "obs_version": OBS_VERSION, "action_table_version": ACTION_TABLE_VERSION,
            "updates": c.updates, "games": c.games, "decisions": c.decisions,
            "decisions_trained": c.decisions_trained, "git_commit": self.code_commit,
            "command": self.first_command, "resumes": self.resumes,
            "wall_time_s": round(c.wall_s, 1), "saved": time.strftime("%Y-%m-%d %H:%M:%S"),
            "lineage": self.lineage,
            "last_eval": self.last_eval,
            **({"stage": {"index": self.stage, "name": self.stage_starts[-1]["name"],
                          "starts": self.stage_starts}}
               if self.stage_starts else {}),
        }

    def save(self, learner: Learner, meta: dict[str, Any], extra_tensors: dict[str, torch.Tensor],
             extra_state: dict[str, Any]) -> Path:
        """A checkpoint of everything --resume needs, as CPU tensors; on a full disk the last good one
        stays.  ``extra_*``: what the schedule and the algorithm keep besides."""
        tensors: dict[str, torch.Tensor] = {}
        opt_state = learner.state()
        for idx, st in opt_state["state"].items():
            for k, v in st.items():
                tensors[f"opt.{idx}.{k}"] = v if torch.is_tensor(v) else torch.tensor(v)
        for sid, w in self.pool:
            for k, v in w.items():
                tensors[f"pool.{sid}.{k}"] = torch.from_numpy(v)
        tensors["rng.torch"] = torch.get_rng_state()
        tensors["rng.gen"] = self.gen.get_state()
        state = {"counters": vars(self.counters) | {"snapshot_ids": [sid for sid, _ in self.pool]},
                 "param_groups": opt_state["param_groups"], "eval_history": self.eval_history,
                 "stage": {"index": self.stage, "starts": self.stage_starts}}
        tensors |= extra_tensors
        state |= extra_state
        why = counters_problem(vars(self.counters))
        if why:  # never a checkpoint named for a negative count (ckpt_-0000004)
            raise TrainError(f"checkpoint not written: {why}")
        name = f"ckpt_{self.counters.updates:08d}"
        if not all(bool(torch.isfinite(p).all()) for p in learner.net.parameters()):
            good = list_checkpoints(self.run_dir)
            raise TrainError(f"update {self.counters.updates:,}: the network's weights are no longer finite"
                             f" (training diverged); checkpoint {name} not written, the last good one stays:"
                             f" {good[-1] if good else 'none yet'}"
                             " (resume from it with a lower learning rate)")
        try:
            path = ckpt.save_checkpoint(self.run_dir / "checkpoints" / name, learner.net, meta,
                                        tensors, state)
        except OSError as exc:
            good = list_checkpoints(self.run_dir)
            raise TrainError(f"checkpoint {name} not written ({exc.strerror or exc});"
                             f" the last good one stays: {good[-1] if good else 'none yet'}") from None
        ckpt.prune(self.run_dir, self.cfg.checkpoint.keep)
        return path

    def init_from(self, learner: Learner, path: Path) -> None:
        """Start a new run from another checkpoint's network (its optimizer and counters are not taken)."""
        net, meta = ckpt.load_checkpoint(path)  # versions checked there
        if net.hparams() != learner.net.hparams():
            raise TrainError(f"init_from {path}: the model shape {net.hparams()} differs from the config's "
                             f"{learner.net.hparams()}")
        learner.net.load_state_dict(net.state_dict())
        self.lineage = lineage_of(meta, path)
        self.log(f"starting from the network of {path} ({meta.decisions_trained:,} decisions trained)")

    def checkpointed_stage(self) -> int:
        """The stage of the run's newest good checkpoint (read before the algorithm is built: the stage
        decides which one); 0 for a run without stages."""
        state = read_json_file(latest_good(self.run_dir, trainer=True) / TRAINER_JSON)
        stage = state.get("stage") if isinstance(state, dict) else None
        return int(stage.get("index", 0)) if isinstance(stage, dict) else 0

    def restore(self, learner: Learner) -> Restored:
        """The newest good checkpoint of the run: the network and optimizer into ``learner``, the counters,
        pool, generators and evaluations here; the rest returned for the other parts."""
        path = latest_good(self.run_dir, trainer=True, warn=self.log)
        tensors, state = ckpt.load_trainer_state(path)
        net, meta = ckpt.load_checkpoint(path)  # versions checked there
        self.first_command = meta.command or self.command
        self.resumes = [*meta.resumes, self.command]
        self.lineage = recorded_lineage(meta, str(path))
        if net.hparams() != learner.net.hparams():
            raise TrainError(f"{path}: the model shape {net.hparams()} differs from the config's")
        learner.net.load_state_dict(net.state_dict())
        c = state["counters"]
        why = counters_problem(c) if isinstance(c, dict) else "no counters"
        if why:
            raise TrainError(f"{path / TRAINER_JSON}: {why}")
        self.counters = Counters(**{k: c[k] for k in vars(Counters()) if k in c})
        opt_state: dict[str, Any] = {"state": {}, "param_groups": state["param_groups"]}
        for key, v in tensors.items():
            if key.startswith("opt."):
                _, idx, k = key.split(".", 2)
                opt_state["state"].setdefault(int(idx), {})[k] = v
        learner.opt.load_state_dict(opt_state)  # on the CPU; the loop's start moves it to learner.device
        for sid in c.get("snapshot_ids", []):
            prefix = f"pool.{sid}."
            self.pool.append((sid, {k[len(prefix):]: v.numpy() for k, v in tensors.items()
                                    if k.startswith(prefix)}))
        torch.set_rng_state(tensors["rng.torch"])
        self.gen.set_state(tensors["rng.gen"])
        self.eval_history = self._evals_on_record(list(state.get("eval_history", [])))
        self.last_eval = self.eval_history[-1] if self.eval_history else None
        stage = state.get("stage") or {}
        self.stage, self.stage_starts = int(stage.get("index", 0)), list(stage.get("starts", []))
        self.resumed_from = path
        return Restored(path, tensors, state)

    def _evals_on_record(self, saved: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The evaluations of this run up to the resumed checkpoint.  ``eval.jsonl`` may hold more than the
        checkpoint's history: an evaluation launched at a checkpoint ends after it was written.  Those up to
        the checkpoint's update are kept (the weights are the resumed ones); later ones were made by work
        that is lost and will be redone, so they leave ``eval.jsonl``, as TensorBoard purges its points."""
        f = self.run_dir / "eval.jsonl"
        if not f.is_file():
            return saved
        entries, lost = read_eval_log(f)  # a damaged line: TrainError naming it (the dry run says it first)
        kept = [e for e in entries if e["updates"] <= self.counters.updates]
        lost += len(entries) - len(kept)
        if lost:
            write_atomic(f, "".join(json.dumps(e) + "\n" for e in kept))
            self.log(f"eval.jsonl: {lost} evaluation(s) after update {self.counters.updates} dropped"
                     " (their work is redone)")
        return kept if len(kept) >= len(saved) else saved

    def record_eval(self, entry: dict[str, Any]) -> None:
        """A finished evaluation: into the history and ``eval.jsonl``."""
        self.eval_history.append(entry)
        self.last_eval = entry
        with open(check_target(self.run_dir / "eval.jsonl"), "a", encoding="utf-8") as f:  # appended: a file
            f.write(json.dumps(entry) + "\n")
