"""What a ``samloc train`` command line asks for, before anything starts: a new run or a resume, its
resolved config and budgets, whether a resume has anything left to do, and the dry run's checks; and the
run loop of a config (:func:`new_loop`), its stages' algorithms resolved here, above the loop, from the
registry (:mod:`training.algorithms`), so ``training.run`` never imports an algorithm."""

from __future__ import annotations

import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agents.nets.checkpoint import check_bot_folder, load_checkpoint
from agents.nets.factory import NetworkError, network_shapes, recorded_hparams
from agents.nets.guards import check_blind_policy
from agents.nets.format import (TRAINER_JSON, CheckpointError, latest_good, read_json_file, read_metadata,
                                resolve, verify, warn)
from sam_env.atomic import UnsafeTarget, check_folder
from sam_env.machine import available_memory

from . import algorithms
from .algorithms import warm_start
from .config import (AUTO, ConfigError, EnvConfig, EvalConfig, ModelConfig, StageConfig, TrainConfig,
                     eval_table, stop_reason, training_tables)
from .config_load import from_dict, load_config, stage_config, unread_note
from .errors import TrainError
from .run.algorithm import Algorithm
from .run.evaluation import EvalTarget
from .run.learner import DeviceError, resolve_device
from .run.loop import RunLoop
from .run.precision import planned
from .run.runstate import counters_problem, new_run_dir, read_eval_log
from .run.sizing import PROCESS_BYTES, apply_sizing, size_workers, worker_bytes
from .run.stages import StagePlan
from .run.workers import cpu_shortfall, embedded_cpus


def stage_plan(cfg: TrainConfig, algorithm: type[Algorithm] | None = None) -> StagePlan:
    """The stages of ``cfg`` with each one's config and algorithm class, resolved once (``algorithm``: that
    class for every stage, as a test's outside algorithm)."""
    configs = [stage_config(cfg, i) for i in range(len(cfg.stages))]
    classes = [algorithm or algorithms.resolve(c.algorithm) for c in (configs or [cfg])]
    return StagePlan(cfg.stages, classes, configs)


def new_loop(cfg: TrainConfig, run_dir: Path, *, algorithm: type[Algorithm] | None = None,
             evaluation: EvalTarget | None = None, **kwargs: Any) -> RunLoop:
    """The run loop of ``cfg`` in ``run_dir`` (new, or ``resume=True``), with its stage plan and the warm
    start as the hook before a new run's first update; ``kwargs`` are :class:`RunLoop`'s."""
    return RunLoop(cfg, run_dir, stage_plan(cfg, algorithm), start_hooks={"warm_start": warm_start.hook},
                   evaluation=evaluation, **kwargs)


#: env keys that choose the tables; a new run whose key=value sets one is named for its tables.
TABLE_KEYS = ("env", "env.rules", "env.players", "env.tables")


def run_name(name: str, env: EnvConfig, overrides: list[str]) -> str:
    """The name of a new run of config ``name`` playing ``env``'s tables: ``name=`` when given, else the
    config's name, followed by its tables when key=value changed them (``quick`` with ``env.rules=mien_bac
    env.players=3``: ``quick-mien_bac-3``)."""
    keys = [o.split("=", 1)[0].strip() for o in overrides]
    if "name" in keys or not any(k in TABLE_KEYS or k.startswith("env.tables") for k in keys):
        return name
    by_rules: dict[str, list[int]] = {}
    for t in training_tables(env):
        by_rules.setdefault(t.rules.name, []).append(t.players)
    counts = {tuple(ps) for ps in by_rules.values()}
    if len(counts) == 1:  # rules x players
        parts = [".".join(by_rules), ".".join(map(str, counts.pop()))]
    else:
        parts = [f"{r}-{'.'.join(map(str, ps))}" for r, ps in by_rules.items()]
    tail = re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(parts))
    if len(tail) > 60:
        tail = f"{sum(len(ps) for ps in by_rules.values())}tables"
    return f"{name}-{tail}"


@dataclass
class Launch:
    """A run to start or continue: its config; for a resume its folder, the checkpoint it continues,
    that checkpoint's counters and, for a run in stages, its stage record (``{"index", "starts"}``)."""

    cfg: TrainConfig
    run_dir: Path | None = None
    ckpt: Path | None = None
    counters: dict[str, Any] | None = None
    stage: Any = None  # as trainer.json holds it: stage_lines checks it


def _progress(run_dir: Path) -> tuple[Path, dict[str, Any], Any]:
    """The checkpoint a resume starts from, its counters and its stage record (read without torch; the
    loop verifies it again and says so when it skips a damaged one)."""
    ckpt = latest_good(run_dir, trainer=True)
    state = read_json_file(ckpt / TRAINER_JSON)
    stage = state.get("stage") if isinstance(state, dict) else None
    counters = state.get("counters") if isinstance(state, dict) else None
    if not isinstance(counters, dict):
        raise ConfigError(f"{ckpt}: trainer.json holds no counters")
    why = counters_problem(counters)
    if why:
        raise ConfigError(f"{ckpt / TRAINER_JSON}: {why}")
    if (run_dir / "eval.jsonl").is_file():
        try:
            read_eval_log(run_dir / "eval.jsonl")  # what the resume reads back, checked before it starts
        except TrainError as exc:
            raise ConfigError(str(exc)) from None
    return ckpt, counters, stage


def resolve_launch(config: str | None, resume: str | None, overrides: list[str], more_minutes: float | None,
                   more_decisions: int | None) -> Launch:
    """The run a command asks for: ``config`` + ``overrides`` for a new one; ``resume`` (a run folder)
    with its own config, ``overrides`` and ``more_*`` budgets for a resume.  ConfigError when the
    combination cannot be run; CheckpointError when the run has no good checkpoint."""
    keys = {o.split("=", 1)[0].strip() for o in overrides}
    more = {"more_minutes": more_minutes, "more_decisions": more_decisions}
    if not resume:
        if more_minutes is not None or more_decisions is not None:
            raise ConfigError("--more-minutes and --more-decisions continue a run: give them with --resume"
                              " RUN_DIR (a new run: max_minutes=N, total_decisions=N)")
        if not config:
            raise ConfigError("give --config FILE (e.g. configs/quick.yaml) or --resume RUN_DIR")
        cfg = load_config(config, overrides)
        cfg.name = run_name(cfg.name, cfg.env, overrides)
        return Launch(cfg)
    if config:
        raise ConfigError("--resume takes the run's own config; give changes as key=value")
    for flag, key in (("more_minutes", "max_minutes"), ("more_decisions", "total_decisions")):
        if more[flag] is not None and key in keys:
            raise ConfigError(f"give --{flag.replace('_', '-')} (more than so far) or {key}= (in all),"
                              " not both")
    run_dir = Path(resume)
    cfg = read_run_config(run_dir, overrides)
    ckpt, counters, stage = _progress(run_dir)
    if more_minutes is not None:
        cfg.max_minutes = round(float(counters.get("wall_s", 0.0)) / 60 + more_minutes, 3)
    if more_decisions is not None:
        cfg.total_decisions = int(counters.get("decisions_trained", 0)) + more_decisions
    return Launch(cfg, run_dir, ckpt, counters, stage)


def read_run_config(run_dir: Path, overrides: list[str] | None = None) -> TrainConfig:
    """A run folder's own config (its ``config.yaml``) with ``overrides``; ConfigError when it is not one.

    A ``config.yaml`` emptied or cut short would load as the defaults (every key it lacks), and the run
    would then write those over it: such a file is judged against the config the newest good checkpoint's
    metadata holds, which is taken instead (one warning line; the run writes it back), or refused when
    the run has no checkpoint to take it from."""
    cfg_file = run_dir / "config.yaml"
    if not cfg_file.is_file():
        raise ConfigError(f"{run_dir} is not a run folder (no config.yaml)")
    stored, ckpt = _checkpoint_config(run_dir)
    damage = _config_damage(cfg_file, stored)
    if not damage:
        return load_config(cfg_file, overrides)
    if stored is None:
        raise ConfigError(f"{cfg_file}: {damage}, and the run has no good checkpoint whose metadata holds its"
                          " config; restore the file to resume")
    warn(f"{cfg_file}: {damage}; resuming with the config in {ckpt}'s metadata")
    return from_dict(stored, overrides)


def _checkpoint_config(run_dir: Path) -> tuple[dict[str, Any] | None, Path | None]:
    """The config the run's newest good checkpoint recorded in its metadata, and that checkpoint (None,
    None when it has none)."""
    try:
        ckpt = latest_good(run_dir, trainer=True)
        stored = read_metadata(ckpt).raw.get("config")
    except CheckpointError:
        return None, None
    return (stored, ckpt) if isinstance(stored, dict) and stored else (None, None)


def _flat_keys(d: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in d.items():
        out |= _flat_keys(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}"}
    return out


def _config_damage(cfg_file: Path, stored: dict[str, Any] | None) -> str:
    """What is wrong with a run's ``config.yaml`` ('' when nothing): empty, not YAML, not a mapping, or
    lacking settings its checkpoint's config holds (a file cut short)."""
    try:
        loaded = yaml.safe_load(cfg_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return f"it cannot be read ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    if loaded is None or loaded == {}:
        return "it is empty"
    if not isinstance(loaded, dict):
        return f"it holds a {type(loaded).__name__}, not the run's settings"
    missing = sorted(_flat_keys(stored) - _flat_keys(loaded)) if stored else []
    if missing:
        return (f"it lacks {len(missing)} of the settings its checkpoint recorded ({', '.join(missing[:3])}"
                f"{', …' if len(missing) > 3 else ''}): cut short")
    return ""


def nothing_left(launch: Launch) -> str:
    """The one line a resume with nothing left to do prints ('' when there is work left, or a new run)."""
    cfg, run_dir, counters = launch.cfg, launch.run_dir, launch.counters
    if run_dir is None or counters is None:
        return ""
    trained, wall = int(counters.get("decisions_trained", 0)), float(counters.get("wall_s", 0.0))
    why = stop_reason(cfg.total_decisions, cfg.max_minutes, trained, wall)
    if why.startswith("total_decisions"):
        return (f"{run_dir}: nothing left to do: {trained:,} decisions trained, total_decisions is"
                f" {cfg.total_decisions:,} (give --more-decisions N, or total_decisions=D)")
    if why:
        return (f"{run_dir}: nothing left to do: {wall / 60:.1f} minutes trained over its sittings,"
                f" max_minutes is {cfg.max_minutes:g} (give --more-minutes N, or max_minutes=M)")
    return ""


def new_run_folder(cfg: TrainConfig, run_dir: str | None) -> Path:
    """Where a new run writes: ``run_dir`` (that must not hold a run yet), else a fresh folder; TrainError
    (one line) when it cannot be."""
    try:
        path = check_folder(run_dir) if run_dir else new_run_dir(cfg.out_dir, cfg.name, cfg.seed)
    except UnsafeTarget as exc:
        raise TrainError(f"the run folder: {exc}") from None
    if run_dir and (path / "checkpoints").exists():
        raise TrainError(f"{path} already holds a run; use --resume {path}")
    return path


def _writable(path: Path) -> bool:
    """Whether ``path`` can be created and written: a folder made and removed in its nearest existing
    folder (permission bits alone pass /proc, and anything for root)."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".samloc-check-", dir=p))
    except OSError:
        return False
    return True


def check_memory(cfg: TrainConfig, embedded: bool) -> None:
    """Refuse in one line a network that cannot fit in this machine's memory: the learner holds it four
    times (weights, gradients, Adam's two moments), and each worker of an embedded Ray once more.  The
    network is built on the meta device, so nothing is allocated to count it."""
    shapes = network_shapes(cfg.model.hparams(), "model")
    nbytes = 4 * sum(math.prod(s) for s in shapes.values())
    workers = cfg.rollout.num_workers if cfg.rollout.num_workers != AUTO else embedded_cpus()  # auto's most
    copies = 4 + (workers if embedded else 0)
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if nbytes * copies > have:
        raise TrainError(f"model: the network has {nbytes // 4:,} parameters"
                         f" ({nbytes / 2**30:,.1f} GiB in fp32); {copies} copies of it"
                         f" (learner and workers) need {nbytes * copies / 2**30:,.1f} GiB,"
                         f" this machine has {have / 2**30:,.1f} GiB"
                         " (make model.hidden or model.layers smaller)")
    if embedded:
        _check_worker_memory(cfg, nbytes)


def _check_worker_memory(cfg: TrainConfig, nbytes: int) -> None:
    """Refuse in one line worker processes an embedded Ray could not hold in the memory available now:
    each a Python process with its libraries, its games and its weights (:func:`sizing.worker_bytes`),
    beside the learner's process.  (``cpus_per_worker`` can fit hundreds of workers into two CPUs;
    memory cannot.)"""
    have, algo, ro = available_memory(), algorithms.resolve(cfg.algorithm), cfg.rollout
    if have is None or (ro.num_workers != AUTO
                        and cpu_shortfall(algo.worker_groups(cfg), embedded_cpus(), embedded=True)):
        return  # (workers that do not fit the CPUs are refused for that, in their own line)
    rollout = (ro.num_workers if ro.num_workers != AUTO
               else size_workers(cfg, embedded_cpus(), "cpu", algo).rollout_workers)  # what auto will choose
    own = sum(int(g.num_workers) for g in algo.own_workers(cfg))
    procs = rollout * algo.learns_from_rollouts(cfg) + own
    each = worker_bytes(cfg.rollout, nbytes)
    learner = PROCESS_BYTES + 4 * nbytes
    if learner + procs * each <= have:
        return
    fit = max(0, (have - learner) // each - own)
    others = f" and {own} of the algorithm's own" if own else ""
    raise TrainError(f"rollout.num_workers={rollout}{others}: {procs:,} worker processes need about"
                     f" {procs * each / 2**30:,.1f} GiB (about {each / 2**30:.2f} GiB each: the libraries,"
                     f" {ro.envs_per_worker:,} games, the weights) beside the learner's"
                     f" {learner / 2**30:.1f} GiB; this machine has {have / 2**30:,.1f} GiB available"
                     f" (at most {fit:,} rollout workers here; or fewer rollout.envs_per_worker)")


def check_write_targets(run_dir: Path, export_to: str, name: str) -> None:
    """The run folder is a folder (or new); ``export_to`` (``checkpoint.export_to``) is a new or empty
    folder or a bot a run of config ``name`` made (never ``.``, ``..``, a link, a file or a folder holding
    anything else: it is replaced whole).  TrainError (one line) otherwise."""
    try:
        check_folder(run_dir)
    except UnsafeTarget as exc:
        raise TrainError(f"the run folder: {exc}") from None
    try:
        if export_to:
            check_bot_folder(export_to, name)
    except UnsafeTarget as exc:
        raise TrainError(f"checkpoint.export_to: {exc}") from None


def probe_weights(model: ModelConfig, starts: list[Path]) -> None:
    """The blind-policy guard (agents/nets/guards.py) on what the run would train: the fresh network of
    ``model``, and the checkpoints it starts from (loading probes them: CheckpointError naming one).
    TrainError (one line) when the fresh network's policy reads the hidden hands."""
    try:
        check_blind_policy(model.build())
    except NetworkError as exc:
        raise TrainError(str(exc)) from None
    for path in starts:
        load_checkpoint(path)


def _check(launch: Launch, run_dir: Path, ray_address: str | None) -> tuple[Any, str]:
    """Every check that needs no Ray: (the learner's device, the line saying what ``auto`` sized on the
    embedded Ray, '' when nothing).  Raises the first problem found."""
    cfg, ckpt = launch.cfg, launch.ckpt
    check_write_targets(run_dir, cfg.checkpoint.export_to, cfg.name)
    for what, path in (("the run folder", run_dir), ("checkpoint.export_to", Path(cfg.checkpoint.export_to))):
        if (cfg.checkpoint.export_to or what == "the run folder") and not _writable(path):
            raise TrainError(f"{what} {path} cannot be written here")
    check_memory(cfg, embedded=not ray_address)
    shape = recorded_hparams(cfg.model.hparams())  # as a checkpoint records it: the kind's defaults too
    starts = [("--resume", ckpt)] if ckpt else []  # verified by _progress
    if cfg.init_from and not ckpt:  # a resume takes its own weights, not init_from's
        starts.append(("init_from", resolve(cfg.init_from)))
        verify(starts[-1][1])
    for what, path in starts:
        model = read_metadata(path).model
        if model != shape:
            raise CheckpointError(f"{what} {path}: the model shape {model} differs from the config's {shape}")
    probe_weights(cfg.model, [path for _, path in starts])
    try:
        device = resolve_device(cfg.learner.device)
    except DeviceError as exc:
        raise TrainError(str(exc)) from None
    if ray_address:
        return device, ""
    algo = algorithms.resolve(cfg.algorithm)
    sized = apply_sizing(cfg, embedded_cpus(), device.type, algo)
    short = cpu_shortfall(algo.worker_groups(cfg), embedded_cpus(), embedded=True) or \
        stage_plan(cfg).shortfall(embedded_cpus(), device.type, embedded=True)
    if short:
        raise TrainError(short)
    return device, sized


def stage_lines(stages: list[StageConfig], max_minutes: float, resumed: Any = None) -> list[str]:
    """A line per stage of a run in stages: what ends it and what it changes (none without stages).  For a
    resume (``resumed``: the checkpoint's stage record) the stages before the one it continues in are done,
    with the minutes they ran, and that one says so: the shares of a new max_minutes never send a run back."""
    out, mark = [], 0.0
    index, starts = _resumed_stage(resumed, len(stages))
    for i, s in enumerate(stages):
        mark += s.share
        if i < index:
            began, ended = (starts[j].get("wall_s", 0.0) / 60 for j in (i, i + 1))
            out.append(f"  stage {i}:     {s.name}, done (minute {began:.1f} to {ended:.1f})")
            continue
        ends = []
        if s.share:
            ends.append(f"minute {mark * max_minutes:g}")
        if s.updates:
            ends.append(f"{s.updates:,} updates")
        if s.plateau_evals:
            ends.append(f"a plateau (its last {s.plateau_evals} evaluations within {s.plateau_gain:g} lá"
                        f" vs {s.plateau_opponent})")
        until = "until the run stops" if i == len(stages) - 1 else "until " + " or ".join(ends)
        if starts and i == index:
            until = f"resumed in it (begun at minute {starts[i].get('wall_s', 0.0) / 60:.1f}), {until}"
        changes = ", ".join(f"{k}={v}" for k, v in flat_settings(s.settings).items()) or "the run's config"
        out.append(f"  stage {i}:     {s.name}, {until}; {changes}")
    return out


def _resumed_stage(resumed: Any, count: int) -> tuple[int, list[dict[str, Any]]]:
    """The stage a resume continues in and the records of when each stage so far began (0 and none for a
    new run, or a record this config's stages do not match: the loop says what it makes of those)."""
    if not isinstance(resumed, dict):
        return 0, []
    index, starts = resumed.get("index"), resumed.get("starts")
    fits = (isinstance(index, int) and 0 <= index < count and isinstance(starts, list)
            and len(starts) == index + 1
            and all(isinstance(r, dict) and isinstance(r.get("wall_s", 0.0), (int, float)) for r in starts))
    return (index, starts) if fits else (0, [])


def flat_settings(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A stage's settings as ``key.sub: value``."""
    out: dict[str, Any] = {}
    for k, v in settings.items():
        if isinstance(v, dict):
            out |= flat_settings(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


#: Games a second of the final evaluation's greedy policy against its opponents, in one process (the
#: standard network at hoi_quan_bai/4 on 2 cores: 1,600 games in 1.2 s), and its start (pool, compile).
FINAL_EVAL_GAMES_PER_S, FINAL_EVAL_START_S = 1_300, 10


def final_eval_s(ev: EvalConfig, players: int) -> float:
    """About how long the final evaluation at a table of ``players`` takes (``eval.final_deals`` per
    opponent, each deal in every seat), by :data:`FINAL_EVAL_GAMES_PER_S`."""
    games = ev.final_deals * len(ev.opponents) * players
    workers = ev.num_workers if isinstance(ev.num_workers, int) else 1
    return FINAL_EVAL_START_S + games / FINAL_EVAL_GAMES_PER_S / workers


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} minutes"


def dry_run(launch: Launch, run_dir: str | None, ray_address: str | None) -> list[str]:
    """Every check that needs no Ray, then the lines that say what the run would do; raises the first
    problem found (TrainError, CheckpointError, ConfigError)."""
    cfg, ckpt, counters = launch.cfg, launch.ckpt, launch.counters
    folder = launch.run_dir or new_run_folder(cfg, run_dir)
    device, sized = _check(launch, folder, ray_address)
    short = warm_start.budget_problem(cfg.section("warm_start"), cfg.max_minutes) if not ckpt else ""
    if short:
        raise TrainError(short)
    tables = ", ".join(t.name for t in training_tables(cfg.env))
    ro, ev, algo = cfg.rollout, cfg.eval, algorithms.resolve(cfg.algorithm)
    where = (f"the Ray cluster at {ray_address} (not contacted)" if ray_address
             else f"the embedded Ray ({embedded_cpus()} CPUs)")
    minutes = f"max_minutes {cfg.max_minutes:g}" if cfg.max_minutes else "no max_minutes"
    count = (ro.num_workers if ro.num_workers != AUTO
             else "auto (sized to the cluster's CPUs when it is joined)")
    rollout = (f"{count} x {ro.cpus_per_worker:g} CPU" if algo.learns_from_rollouts(cfg)
               else "no rollout workers")
    lines = ["samloc train --dry-run: everything checks out; nothing was started",
             f"  run folder:  {folder}" + (f" (resume from {ckpt.name}: update {counters['updates']},"
                                           f" {counters['decisions_trained']:,} decisions,"
                                           f" {counters['wall_s'] / 60:.1f} minutes)" if ckpt else " (new)"),
             f"  name:        {cfg.name}; tables {tables}",
             f"  budget:      total_decisions {cfg.total_decisions:,}, {minutes} (every sitting together)",
             f"  workers:     {rollout} on {where}; learner on {device}"
             f" ({planned(cfg.learner, device.type, cfg.rollout.deterministic)})"
             + ("; deterministic (reproducible)" if ro.deterministic else "")]
    lines += [f"  sizing:      {line}" for line in sized.splitlines()]
    lines += warm_start.dry_run_lines(cfg.section("warm_start"), cfg.max_minutes) if not ckpt else []
    lines += algo.dry_run_lines(cfg)
    unread = unread_note(cfg)  # a tuned section of another algorithm changes nothing: say so
    lines += [f"  unread:      {unread}"] if unread else []
    lines += stage_lines(cfg.stages, cfg.max_minutes, launch.stage)
    final = (f"evaluation {ev.final_deals:,} deals vs {', '.join(ev.opponents)}"
             f" (about {_duration(final_eval_s(ev, eval_table(cfg.env, ev).players))})"
             if ev.final_deals else "no final evaluation")
    lines.append(f"  at the end:  {final}, ONNX export, curve.png"
                 + (f", belief {cfg.belief.deals:,} deals" if cfg.belief.deals else "")
                 + (f", copy to {cfg.checkpoint.export_to}" if cfg.checkpoint.export_to else ""))
    return lines
