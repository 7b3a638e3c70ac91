"""A sweep (``samloc sweep``): a grid and random draws of config values, over seeds, each trial a
``samloc train`` run, compared on one set of duplicate deals.

Every trial is the training pipeline ``samloc train`` runs (:func:`training.tools.pipeline.run_pipeline`) on
the config with the trial's ``key=value`` settings, its seed and the sweep's budget (``--minutes`` or
``--decisions``), in ``<out>/trials/tNN``.  Ray Tune runs the trials as actors of the one Ray the sweep
starts (or joins): each trial's run places its rollout workers on that Ray.  A trial asks Tune for one CPU
(its learner: ``samloc train``'s runs outside Ray, so an embedded Ray is given one more per trial at a
time), and as many trials run at once as fit the CPUs with their rollout workers (one on a small machine,
so that minutes budgets are not shared).

The comparison is made after training, as ``samloc bench --to-strength`` makes it: each trial's last
checkpoint against the heuristic on the same duplicate deals (``--deals``, seed ``--eval-seed``), with the
95% CI.  With ``--asha`` (a minutes budget), Tune's ASHA scheduler stops the trials that trail at each
rung: every ``--every-minutes`` a trial evaluates against the heuristic on the sweep's deals
(``eval.deals`` of them) and reports it through ``tune.report``; a stopped trial is scored from its last
checkpoint (one is written at each evaluation).

Random values (``--random KEY=LO:HI`` uniform, ``KEY=LO:HI:log`` log-uniform, integers when both bounds
are) are drawn before anything starts, from ``--sample-seed``, so a sweep is the same list of trials each
time: ``--samples`` draws, each crossed with the grid and the seeds.

``<out>/sweep.json`` holds every trial's settings, seed, budget used and score with its CI, and the
settings ranked by their mean over the seeds with a CI across them (training/tools/sweep_report.py: a
best only when separated from the rest; a setting with a seed ASHA stopped is not ranked beside full
ones); ``sweep.md`` the tables, ``sweep.png`` the settings with their CIs.  A trial is labelled by its
setting (``ppo.lr=3e-4 seed=1``), and its run is named so in the letters a run name takes
(``ppo.lr-3e-4_seed-1``).

Ctrl-C ends Tune's run with its state saved (exit 130): the unfinished trials are marked, nothing is
ranked, and ``samloc sweep --resume <out>`` continues it through Ray Tune's ``Tuner.restore``.  Equal grid
values, more than 100 trials and ``checkpoint.export_to`` (every trial would replace that one folder) are
refused before anything starts.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from agents.nets.format import list_checkpoints, read_json_file
from sam_env.atomic import write_atomic, write_json_atomic

from ..algorithms import resolve
from ..config import AUTO, ConfigError, TrainConfig, eval_table
from ..errors import TrainError
from ..run.evaluation import OpponentsEval
from ..launch import new_run_folder, resolve_launch
from ..run.loop import RunLoop
from .pipeline import FINAL_EVAL_SEED, run_pipeline
from ..run.sizing import size_workers
from .sweep_report import UNFINISHED, markdown, plot, rank_settings
from .to_strength import (AFTER_TRAINING, OPPONENT, check_out, check_scoring, score_snapshots,
                          snapshot_point)
from ..run.workers import WorkerPool, embedded_cpus

#: keys the sweep sets itself, and the option that sets each
OWN_KEYS = {"seed": "--seeds", "max_minutes": "--minutes", "total_decisions": "--decisions",
            "out_dir": "--out"}
ASHA_KEYS = {"eval.every_minutes": "--every-minutes", "checkpoint.every_minutes": "--every-minutes",
             "eval.every_updates": "(ASHA evaluates by minutes)",
             "eval.opponents": "(ASHA ranks by the heuristic)"}
REDUCTION = 2  # ASHA keeps the better half at each rung
MAX_TRIALS = 100  # trials in one sweep at most: each is a training run, and resolving each one takes time
PLAN_FILE = "sweep_plan.json"  # what --resume reads back


def parse_grid(text: str) -> tuple[str, list[str]]:
    """``KEY=V1,V2,…`` as (key, values); ConfigError when it is not one."""
    key, eq, values = text.partition("=")
    items = [v.strip() for v in values.split(",")]
    if not eq or not key.strip() or not all(items):
        raise ConfigError(f"--grid {text!r}: give KEY=V1,V2,... (values separated by commas)")
    seen: dict[Any, str] = {}
    for v in items:
        same = seen.setdefault(_as_value(v), v)
        if same is not v:  # 0.01 and 0.010 are one setting, trained twice under two names
            raise ConfigError(f"--grid {key.strip()}: {same} and {v} are the same value")
    return key.strip(), items


def _as_value(text: str) -> Any:
    """A grid value as what it sets: a number when it reads as one (``0.01`` = ``0.010`` = ``1e-2``)."""
    try:
        return float(text)
    except ValueError:
        return text.lower() if text.lower() in ("true", "false", "null") else text


def parse_random(text: str) -> tuple[str, str, str, bool]:
    """``KEY=LO:HI`` (uniform) or ``KEY=LO:HI:log`` as (key, low, high, log); ConfigError when it is not
    one."""
    key, eq, spec = text.partition("=")
    parts = spec.split(":")
    log = len(parts) == 3 and parts[2] == "log"
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except (ValueError, IndexError):
        lo = hi = math.nan
    if not eq or not key.strip() or len(parts) != 2 + log or not lo < hi or (log and lo <= 0):
        raise ConfigError(f"--random {text!r}: give KEY=LO:HI or KEY=LO:HI:log"
                          " (numbers, LO < HI, positive for log)")
    return key.strip(), parts[0].strip(), parts[1].strip(), log


@dataclass
class SweepPlan:
    """One sweep: the config and its overrides, what varies, the seeds, the budget, the scoring."""

    config: str
    overrides: list[str]
    grid: list[tuple[str, list[str]]]
    random: list[tuple[str, str, str, bool]]
    samples: int
    seeds: list[int]
    out: Path
    minutes: float = 0.0    # one budget of the two, per trial
    decisions: int = 0
    deals: int = 500
    eval_seed: int = FINAL_EVAL_SEED
    asha: bool = False
    every_minutes: float = 0.0  # ASHA's evaluations (0: minutes / 4)
    sample_seed: int = 0
    workers: int = 1         # checkpoints scored side by side
    ray_address: str | None = None
    command: str = ""

    @property
    def interval(self) -> float:
        return self.every_minutes or self.minutes / 4


@dataclass
class Trial:
    """One trial: its settings (key=value), seed, folder and resolved config."""

    name: str
    settings: list[str]
    seed: int
    run_dir: Path
    cfg: TrainConfig = field(repr=False)
    label: str = ""
    """Its setting and seed (``ppo.lr=3e-4 seed=1``); its run's name (``cfg.name``) is the same in the
    letters a run name takes (``ppo.lr-3e-4_seed-1``): what its reports and checkpoints carry."""


def _draw(rng: np.random.Generator, lo: str, hi: str, log: bool) -> str:
    """One random value as a key=value's text: an integer when both bounds are."""
    if not log and lo.lstrip("-").isdigit() and hi.lstrip("-").isdigit():
        return str(int(rng.integers(int(lo), int(hi) + 1)))
    a, b = float(lo), float(hi)
    v = math.exp(rng.uniform(math.log(a), math.log(b))) if log else rng.uniform(a, b)
    return f"{v:.4g}"


def trial_settings(plan: SweepPlan) -> list[list[str]]:
    """Every trial's settings before the seeds: the grid's product, ``samples`` times with fresh draws of
    the random keys (from ``sample_seed``)."""
    rng = np.random.default_rng(plan.sample_seed)
    combos = list(itertools.product(*[[f"{k}={v}" for v in vs] for k, vs in plan.grid]))
    out = []
    for _ in range(plan.samples if plan.random else 1):
        for combo in combos:
            out.append([*combo, *(f"{k}={_draw(rng, lo, hi, log)}" for k, lo, hi, log in plan.random)])
    return out


def trial_run_name(settings: list[str], seed: int, trial: str) -> str:
    """A trial's run name from its settings and seed, in the letters a run name takes (``ppo.lr=3e-4``,
    seed 1: ``ppo.lr-3e-4_seed-1``); a long one is cut and ends with the trial's own name."""
    text = "_".join([*(s.replace("=", "-", 1) for s in settings), f"seed-{seed}"])
    text = "".join(c if c.isalnum() or c in "-_." else "." for c in text)
    return text if len(text) <= 80 else f"{text[:70]}_{trial}"


def _budget(plan: SweepPlan) -> list[str]:
    if plan.minutes:
        return [f"max_minutes={plan.minutes}"]
    return [f"total_decisions={plan.decisions}", "max_minutes=0"]


def trial_overrides(plan: SweepPlan, settings: list[str], seed: int, run_dir: Path) -> list[str]:
    """What a trial's ``samloc train`` is given: the config's overrides, the trial's settings, the sweep's
    own."""
    own = [f"seed={seed}", *_budget(plan), f"out_dir={run_dir.parent}"]
    if plan.asha:
        own += [f"eval.every_minutes={plan.interval}", f"checkpoint.every_minutes={plan.interval}",
                "eval.every_updates=0"]
    return [*AFTER_TRAINING, *plan.overrides, *settings, *own]


def _check_keys(plan: SweepPlan) -> None:
    own = OWN_KEYS | (ASHA_KEYS if plan.asha else {})
    given = [(o.split("=", 1)[0].strip(), "key=value") for o in plan.overrides]
    given += [(k, "--grid") for k, _ in plan.grid] + [(k, "--random") for k, *_ in plan.random]
    seen: set[str] = set()
    for key, where in given:
        if key in own:
            raise ConfigError(f"{where} {key}: the sweep sets {key} itself: give {own[key]}")
        if key in seen and where != "key=value":
            raise ConfigError(f"{where} {key}: {key} is given twice")
        seen.add(key)


def tune_path(out: Path) -> Path:
    """Where Ray Tune keeps the sweep's experiment state (what ``Tuner.restore`` reads)."""
    return out.resolve() / "tune" / "trials"


def _check_count(plan: SweepPlan) -> None:
    """At most :data:`MAX_TRIALS`, counted before any is resolved (a product runs to hours)."""
    parts = [len(vs) for _, vs in plan.grid] + ([plan.samples] if plan.random else []) + [len(plan.seeds)]
    if math.prod(parts) > MAX_TRIALS:
        raise ConfigError(f"the sweep has {math.prod(parts):,} trials ({' x '.join(map(str, parts))}: grid"
                          f" values, samples, seeds); at most {MAX_TRIALS}: give fewer values, --samples or"
                          " --seeds")


def _check_out(plan: SweepPlan, resuming: bool) -> None:
    """A new sweep's folder is new or empty, and says so when it holds one to resume; a resumed one holds
    Tune's state."""
    if resuming:
        if not tune.Tuner.can_restore(str(tune_path(plan.out))):
            raise ConfigError(f"--resume {plan.out}: Ray Tune has no state of this sweep there to restore"
                              f" (stopped before its trials started: run its command again; it is in"
                              f" {PLAN_FILE})")
    elif tune_path(plan.out).exists() and tune.Tuner.can_restore(str(tune_path(plan.out))):
        raise ConfigError(f"--out {plan.out} holds a sweep that did not finish: continue it with"
                          f" samloc sweep --resume {plan.out}")
    elif not (plan.out.is_dir() and not plan.out.is_symlink()
              and [p.name for p in plan.out.iterdir()] == [PLAN_FILE]):  # stopped before Tune: again
        check_out(plan.out)


def check_plan(plan: SweepPlan, few_deals_ok: bool = False, resuming: bool = False) -> list[Trial]:
    """Every trial, its config resolved as ``samloc train`` resolves it, after every check that needs no
    training; ConfigError names the first problem (an unknown key, a value its field refuses, ...).
    ``resuming``: the sweep's folder holds its Tune state (``--resume``), not nothing."""
    if bool(plan.minutes) == bool(plan.decisions):
        raise ConfigError("give one budget per trial: --minutes M or --decisions N")
    if plan.asha and not plan.minutes:
        raise ConfigError("--asha ranks trials as their minutes pass: give --minutes, not --decisions")
    if plan.asha and plan.interval > plan.minutes:
        raise ConfigError(f"--every-minutes {plan.interval:g} is more than --minutes {plan.minutes:g}")
    if plan.samples > 1 and not plan.random:
        raise ConfigError("--samples draws the --random keys: give --random KEY=LO:HI")
    if len(set(plan.seeds)) != len(plan.seeds):
        raise ConfigError(f"--seeds {','.join(map(str, plan.seeds))}: a seed is given twice")
    _check_keys(plan)
    _check_count(plan)
    check_scoring(plan.deals, few_deals_ok)
    _check_out(plan, resuming)
    # the config's own problems
    resolve_launch(plan.config, None, [*plan.overrides, *_budget(plan)], None, None)
    every = trial_settings(plan)
    twice = next((s for i, s in enumerate(every) if s in every[:i]), None)
    if twice is not None:
        raise ConfigError(f"--random draws {' '.join(twice)} twice: give fewer --samples or a wider range")
    trials = []
    for settings, seed in itertools.product(every, plan.seeds):
        name = f"t{len(trials):02d}"
        run_dir = plan.out.resolve() / "trials" / name
        try:
            cfg = resolve_launch(plan.config, None, trial_overrides(plan, settings, seed, run_dir),
                                 None, None).cfg
        except ConfigError as exc:  # the trial's settings: say which
            raise ConfigError(f"{' '.join(settings)}: {exc}") from None
        if cfg.checkpoint.export_to:
            raise ConfigError(f"checkpoint.export_to={cfg.checkpoint.export_to}: every trial would replace"
                              " that one folder; a trial's bot stays in its run folder (give"
                              " checkpoint.export_to= to turn the copy off)")
        label = f"{' '.join(settings) or cfg.name} seed={seed}"
        cfg.name = trial_run_name(settings or [cfg.name], seed, name)  # its reports name it by its setting
        trials.append(Trial(name, settings, seed, run_dir, cfg, label))
    if any(t.cfg.learner.device.startswith("cuda") for t in trials):
        raise ConfigError("learner.device=cuda: a sweep's trials train their learners on the CPU"
                          " (their Tune actors hold no GPU); use learner.device=cpu")
    tables = {eval_table(t.cfg.env, t.cfg.eval).name for t in trials}
    if len(tables) > 1:
        raise ConfigError(f"the trials are evaluated at {len(tables)} tables ({', '.join(sorted(tables))}):"
                          " the trials compared must share env's evaluation table")
    return trials


# ---- a trial, in its Ray Tune actor ----------------------------------------------------------------------
def _metrics(point: dict[str, Any]) -> dict[str, Any]:
    """A periodic evaluation as Tune hears it."""
    r = point["results"][OPPONENT]
    return {"la": r["mean_score"], "ci_low": r["ci95"][0], "ci_high": r["ci95"][1],
            "minutes": point["wall_s"] / 60, "decisions_trained": point["decisions_trained"],
            "updates": point["updates"]}


class _Reporter:
    """A trial's periodic evaluations, each told to ``tune.report`` once as it is recorded (ASHA ranks by
    them)."""

    def __init__(self) -> None:
        self.loop: RunLoop | None = None
        self.done = 0

    def __call__(self, loop: RunLoop) -> None:  # the run loop's on_update
        self.loop = loop
        self.flush()

    def flush(self) -> None:
        history = self.loop.state.eval_history if self.loop is not None else []
        for point in history[self.done:]:
            tune.report(_metrics(point))
        self.done = len(history)


def _trial_start(spec: dict[str, Any]) -> tuple[TrainConfig, Path, bool]:
    """(config, run folder, whether it resumes): a trial of a resumed sweep that an interruption cut short
    continues its run from its last checkpoint (``samloc train --resume``); one that wrote none starts anew,
    its first try's folder kept beside it as ``tNN.interrupted-K``."""
    run_dir = Path(spec["run_dir"])
    if list_checkpoints(run_dir):
        return resolve_launch(None, str(run_dir), [], None, None).cfg, run_dir, True
    if run_dir.exists():
        k = 1
        while run_dir.with_name(f"{run_dir.name}.interrupted-{k}").exists():
            k += 1
        run_dir.rename(run_dir.with_name(f"{run_dir.name}.interrupted-{k}"))
    cfg = resolve_launch(spec["config"], None, spec["overrides"], None, None).cfg
    cfg.name = spec["run_name"]  # its reports name the trial by its setting
    return cfg, new_run_folder(cfg, spec["run_dir"]), False


def run_trial(config: dict[str, Any]) -> None:
    """Tune's function for one trial: the pipeline on the trial's config; with ASHA, each periodic
    evaluation (the heuristic on the sweep's deals) reported as it is recorded."""
    spec = config["trial"]
    cfg, run_dir, resume = _trial_start(spec)
    asha = spec["asha_deals_seed"] is not None
    reporter = _Reporter() if asha else None
    target = OpponentsEval(cfg, [OPPONENT], spec["asha_deals_seed"]) if asha else None
    res = run_pipeline(cfg, run_dir, resume, spec["command"], lambda line: None, on_update=reporter,
                       evaluation=target)
    if reporter is not None:
        reporter.flush()  # the evaluation recorded after the last update
    else:
        s = res.summary
        tune.report({"minutes": s["wall_s"] / 60, "decisions_trained": s["decisions_trained"],
                     "updates": s["updates"]})


def concurrency(cfg: TrainConfig, cpus: float) -> int:
    """Trials at once: as many as ``cpus`` hold with each one's learner and rollout workers (at least one)."""
    need = 0.0
    for g in resolve(cfg.algorithm).worker_groups(cfg):
        workers = g.num_workers
        if workers == AUTO:  # a trial sizes itself to every CPU: one at a time
            workers = size_workers(cfg, cpus, "cpu", resolve(cfg.algorithm)).rollout_workers
        need += workers * g.cpus_per_worker
    return max(1, int(cpus // (need + 1)))


class _Progress(tune.Callback):
    """A line as each trial starts and ends."""

    def __init__(self, say: Callable[[str], None]):
        self.say = say

    def _line(self, trial: Any, what: str) -> None:
        spec = trial.config["trial"]
        self.say(f"{spec['name']} ({spec['label']}): {what}")

    def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._line(trial, "training")

    def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._line(trial, "ended")

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        self._line(trial, "failed")


def _tune(plan: SweepPlan, trials: list[Trial], at_once: int, say: Callable[[str], None],
          resuming: bool = False) -> tuple[dict[str, Any], dict[str, str], bool]:
    """Tune's run of every trial on the Ray already started, or the rest of an interrupted one
    (``Tuner.restore``: the trials it finished stay as they were, the others run): ({trial name: its Tune
    result}, {trial name: its Tune status}, whether a Ctrl-C cut it short: Tune's state is saved then, for
    ``Tuner.restore``)."""
    trainable = tune.with_resources(run_trial, {"cpu": 1})
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # Tune's own display off (the sweep says what happens)
    if resuming:
        tuner = tune.Tuner.restore(str(tune_path(plan.out)), trainable, resume_unfinished=True)
    else:
        specs = [trial_spec(plan, t) for t in trials]
        scheduler = (ASHAScheduler(time_attr="minutes", metric="la", mode="max", max_t=plan.minutes,
                                   grace_period=plan.interval, reduction_factor=REDUCTION)
                     if plan.asha else None)
        tuner = tune.Tuner(
            trainable, param_space={"trial": tune.grid_search(specs)},
            tune_config=tune.TuneConfig(scheduler=scheduler, max_concurrent_trials=at_once,
                                        trial_name_creator=lambda t: t.config["trial"]["name"],
                                        trial_dirname_creator=lambda t: t.config["trial"]["name"]),
            run_config=tune.RunConfig(storage_path=str(tune_path(plan.out).parent),
                                      name=tune_path(plan.out).name, verbose=0, callbacks=[_Progress(say)]))
    grid, interrupted = _fit(tuner)
    statuses = {t.config["trial"]["name"]: t.status for t in grid._experiment_analysis.trials}  # Tune's own
    interrupted = interrupted or any(s not in ("TERMINATED", "ERROR") for s in statuses.values())
    return {r.config["trial"]["name"]: r for r in grid}, statuses, interrupted


def trial_spec(plan: SweepPlan, t: Trial) -> dict[str, Any]:
    """What Tune hands :func:`run_trial` (and keeps in its state for ``Tuner.restore``)."""
    return {"name": t.name, "config": plan.config, "run_dir": str(t.run_dir),
            "overrides": trial_overrides(plan, t.settings, t.seed, t.run_dir),
            "command": f"{plan.command} (trial {t.name})", "label": t.label, "run_name": t.cfg.name,
            "asha_deals_seed": plan.eval_seed if plan.asha else None}


def _fit(tuner: Any) -> tuple[Any, bool]:
    """``tuner.fit()``, and whether a Ctrl-C ended it.  Tune takes SIGINT for the fit (saving its state,
    stopping the trials: their statuses then read TERMINATED) and, on the signal, puts back the handler it
    found: finding ours again afterwards means it took one.  Ours, a second Ctrl-C, interrupts at once."""
    def ours(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt
    watch = (threading.current_thread() is threading.main_thread()
             and os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") == "0")
    previous = signal.signal(signal.SIGINT, ours) if watch else None
    try:
        grid = tuner.fit()
        return grid, watch and signal.getsignal(signal.SIGINT) is ours
    finally:
        if watch:
            signal.signal(signal.SIGINT, previous)


# ---- what the sweep writes -------------------------------------------------------------------------------
def trial_status(plan: SweepPlan, t: Trial, tune_status: str | None, error: Any,
                 interrupted: bool = False) -> tuple[str, str]:
    """(status, why) of a trial from its run folder and Tune's status: done (its summary), failed, stopped
    by ASHA (Tune ended it early), and for a sweep cut short: interrupted (it had started) or not started."""
    if (t.run_dir / "summary.json").is_file():
        return "done", str(read_json_file(t.run_dir / "summary.json").get("stop_reason", ""))
    if error is not None:
        return "failed", (str(error).strip().splitlines() or [type(error).__name__])[-1]
    if interrupted or tune_status not in ("TERMINATED", "ERROR"):
        if not t.run_dir.exists():
            return "not started", ""
        return "interrupted", "the sweep was interrupted before it finished"
    return ("stopped by ASHA", "trailing at a rung") if plan.asha else ("stopped", "")


def _trial_doc(plan: SweepPlan, t: Trial, result: Any, tune_status: str | None,
               interrupted: bool) -> dict[str, Any]:
    """A trial's entry before scoring: its settings, how it ended, the budget it used, its last checkpoint."""
    ckpts = list_checkpoints(t.run_dir)
    status, why = trial_status(plan, t, tune_status, getattr(result, "error", None), interrupted)
    doc: dict[str, Any] = {"name": t.name, "settings": t.settings, "seed": t.seed, "label": t.label,
                           "run_name": t.cfg.name, "run_dir": str(t.run_dir), "status": status,
                           "stop_reason": why}
    if ckpts:
        last = snapshot_point(ckpts[-1])
        doc["checkpoint"] = last.pop("checkpoint")
        doc["budget_used"] = last
    if plan.asha and (t.run_dir / "eval.jsonl").is_file():
        lines = (t.run_dir / "eval.jsonl").read_text().splitlines()
        doc["evaluations"] = [_metrics(json.loads(x)) for x in lines if x.strip()]
    return doc


def report(plan: SweepPlan, trials: list[Trial], docs: list[dict[str, Any]], at_once: int,
           interrupted: bool = False) -> dict[str, Any]:
    """``sweep.json``'s document: every trial in order, and their settings ranked over the seeds
    (:mod:`training.tools.sweep_report`); an interrupted sweep ranks nothing and names no best."""
    settings, best, note = rank_settings(docs)
    if interrupted:
        best, note = None, "interrupted: nothing ranked (samloc sweep --resume DIR goes on)"
    cfg = trials[0].cfg
    return {"command": plan.command, "config": plan.config, "overrides": plan.overrides,
            "grid": {k: v for k, v in plan.grid}, "random": {k: [lo, hi] + (["log"] if log else [])
                                                            for k, lo, hi, log in plan.random},
            "samples": plan.samples, "sample_seed": plan.sample_seed, "seeds": plan.seeds,
            "budget": {"minutes": plan.minutes} if plan.minutes else {"decisions": plan.decisions},
            "asha": {"every_minutes": plan.interval, "reduction_factor": REDUCTION,
                     "deals": cfg.eval.deals} if plan.asha else None,
            "trials_at_once": at_once, "opponent": OPPONENT, **eval_table(cfg.env, cfg.eval).to_record(),
            "deals": plan.deals, "eval_seed": plan.eval_seed, "out": str(plan.out),
            "interrupted": interrupted,
            "best": best, "best_note": note, "settings": settings, "trials": docs}


def write_plan(plan: SweepPlan, few_deals_ok: bool) -> None:
    """``sweep_plan.json``: the plan as given, which ``--resume`` reads back."""
    doc = {k: str(v) if isinstance(v, Path) else v for k, v in vars(plan).items()}
    plan.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(plan.out / PLAN_FILE, doc | {"few_deals_ok": few_deals_ok})


def read_plan(out: Path, workers: int | None = None) -> tuple[SweepPlan, bool]:
    """The plan a sweep in ``out`` was started with, and whether it allowed few deals; ConfigError when
    ``out`` holds no sweep (``workers``: a new count of checkpoints scored side by side)."""
    try:
        raw = dict(read_json_file(out / PLAN_FILE))
        few = bool(raw.pop("few_deals_ok"))
        raw["grid"] = [(k, list(vs)) for k, vs in raw["grid"]]
        raw["random"] = [tuple(r) for r in raw["random"]]
        plan = SweepPlan(**{**raw, "out": out, **({"workers": workers} if workers else {})})
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"--resume {out}: not a sweep's folder ({out / PLAN_FILE}: {exc})") from None
    return plan, few


def run_sweep(plan: SweepPlan, say: Callable[[str], None], few_deals_ok: bool = False,
              resuming: bool = False) -> dict[str, Any]:
    """Check every trial, train them under Ray Tune (``resuming``: the rest of an interrupted sweep, by
    ``Tuner.restore``), score each one's last checkpoint; write ``sweep.json``, ``sweep.md`` and
    ``sweep.png`` in ``plan.out`` and return the document.  Interrupted (Ctrl-C): the trials are marked,
    nothing is scored, and the document says ``interrupted``.  ConfigError before anything starts;
    TrainError when no trial left a checkpoint; OSError."""
    trials = check_plan(plan, few_deals_ok, resuming)
    if not resuming:
        write_plan(plan, few_deals_ok)
    pool = WorkerPool(trials[0].cfg, plan.ray_address, False, say)
    at_once = concurrency(trials[0].cfg, embedded_cpus())
    say(f"{len(trials)} trials, {at_once} at a time, in {plan.out}" + (" (resumed)" if resuming else ""))
    pool.start(extra_cpus=0 if plan.ray_address else at_once)
    try:
        if plan.ray_address:  # joined: the cluster's CPUs decide
            at_once = concurrency(trials[0].cfg, ray.cluster_resources().get("CPU", 0))
        results, statuses, cut = _tune(plan, trials, at_once, say, resuming)
    finally:
        pool.stop()
    docs = [_trial_doc(plan, t, results.get(t.name), statuses.get(t.name), cut) for t in trials]
    interrupted = any(d["status"] in UNFINISHED for d in docs)
    todo = [d for d in docs if "checkpoint" in d] if not interrupted else []
    if not todo and not interrupted:
        raise TrainError(f"no trial left a checkpoint; {docs[0]['name']}: {docs[0]['status']}"
                         f" {docs[0]['stop_reason']}")
    table = eval_table(trials[0].cfg.env, trials[0].cfg.eval)
    if todo:
        say(f"scoring {len(todo)} trials against the {OPPONENT}, {plan.deals} duplicate deals each"
            f" (seed {plan.eval_seed})")
        scores = score_snapshots([d["checkpoint"] for d in todo], table, plan.deals, plan.eval_seed,
                                 plan.workers)
        for d, s in zip(todo, scores):
            d["score"] = s
    doc = report(plan, trials, docs, at_once, interrupted)
    write_json_atomic(plan.out / "sweep.json", doc)
    write_atomic(plan.out / "sweep.md", markdown(doc))
    if not interrupted:
        plot(doc, plan.out / "sweep.png")
    return doc
