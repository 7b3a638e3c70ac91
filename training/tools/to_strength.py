"""Time to strength (``samloc bench --to-strength``): how strong a config gets per minute of wall time.

Each seed trains from scratch through :func:`training.tools.pipeline.run_pipeline` (what ``samloc train``
runs), ``max_minutes`` of training wall time with Ray's start counted, a checkpoint every ``every_minutes``
and at minute 0 (``checkpoint.every_minutes``), none pruned.  Only after every seed has trained is each
checkpoint scored against the heuristic, on one set of duplicate deals for all
(``agents.evaluation.evaluate``, its 95% CI), so the scoring takes no time from the training it measures.  The
machine's load average is sampled before, during and after training, and the report says whether the machine
was quiet and how fast its learner is (:func:`machine_speed`): minutes on one host are not minutes on another.

``--score RUN ...`` scores runs trained before instead (``samloc train``, in any number of sittings, or a
benchmark's seed folders) the same way, one line per run labelled by its config and algorithm: how runs
too long for one sitting, and two algorithms, are put on one plot and one set of deals.

``--combine REPORT ...`` draws reports already scored on the same deals (the same table, deals and seed) as
one report and plot, scoring nothing again: a new run beside the curves of runs whose folders are gone.
A staged run's plot marks where each stage began (a dashed line, the stage's name).
"""

from __future__ import annotations

import os
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Callable

import torch

from agents.evaluation.evaluate import evaluate
from agents.nets.format import CheckpointError, list_checkpoints, read_json_file, read_metadata
from sam_env.atomic import UnsafeTarget, check_dir_target, write_json_atomic, write_with
from sam_env.table import Table

from ..config import ConfigError, ModelConfig, TrainConfig, eval_table, to_dict
from ..launch import new_run_folder, read_run_config, resolve_launch
from ..run.precision import REPEATS, ROWS, learner_rates
from .curve import stage_marks
from .pipeline import FINAL_EVAL_SEED, run_pipeline

OPPONENT = "heuristic"
MIN_DEALS = 500  # the bar: fewer only when the caller says so (tests)
#: keys the benchmark sets itself, and the option that sets each
OWN_KEYS = {"seed": "--seeds", "max_minutes": "--minutes", "out_dir": "--out",
            "checkpoint.every_minutes": "--every-minutes", "checkpoint.keep": "(every snapshot is kept)"}
#: what a run skips after training by default: the benchmark scores the snapshots itself (key=value undoes it)
AFTER_TRAINING = ["eval.final_deals=0", "belief.deals=0"]
QUIET_LOAD = 0.5  # 1-minute load average before training, below which the machine counts as quiet


@dataclass
class Plan:
    """One benchmark: the config and overrides, the budget per seed, the snapshots' interval, the scoring."""

    config: str
    overrides: list[str]
    minutes: float
    seeds: int
    out: Path
    every_minutes: float = 0.0  # 0: minutes / 10
    deals: int = MIN_DEALS
    eval_seed: int = FINAL_EVAL_SEED
    workers: int = 1
    command: str = ""

    @property
    def interval(self) -> float:
        return self.every_minutes or self.minutes / 10


def check_plan(plan: Plan, few_deals_ok: bool = False) -> TrainConfig:
    """The first seed's config, after every check that needs no training; ConfigError names the problem."""
    for o in plan.overrides:
        key = o.split("=", 1)[0].strip()
        if key in OWN_KEYS:
            raise ConfigError(f"{key}= is the benchmark's own: give {OWN_KEYS[key]}")
    check_scoring(plan.deals, few_deals_ok)
    if plan.every_minutes > plan.minutes:
        raise ConfigError(f"--every-minutes {plan.every_minutes:g} is more than --minutes {plan.minutes:g}")
    check_out(plan.out)
    return seed_config(plan, 0)


def check_scoring(deals: int, few_deals_ok: bool) -> None:
    if deals < MIN_DEALS and not few_deals_ok:
        raise ConfigError(f"--deals {deals} is under {MIN_DEALS} (add --allow-few-deals to mean it)")


def check_out(out: Path) -> None:
    """The benchmark's folder: new or empty (UnsafeTarget as a ConfigError)."""
    try:
        check_dir_target(out)
    except UnsafeTarget as exc:
        raise ConfigError(f"--out: {exc}") from None


def seed_config(plan: Plan, seed: int) -> TrainConfig:
    """The config one seed trains: ``samloc train``'s resolution of the config and overrides, plus the
    benchmark's own keys."""
    own = [f"seed={seed}", f"max_minutes={plan.minutes}", f"checkpoint.every_minutes={plan.interval}",
           "checkpoint.keep=0", f"out_dir={plan.out}"]
    return resolve_launch(plan.config, None, [*AFTER_TRAINING, *plan.overrides, *own], None, None).cfg


class LoadSampler:
    """``os.getloadavg()`` every ``every_s`` seconds on a thread while a block runs, and before and after."""

    def __init__(self, every_s: float = 5.0):
        self.every_s, self._stop = every_s, threading.Event()
        self.samples: list[float] = []
        self.before: list[float] = []
        self.after: list[float] = []

    def __enter__(self) -> "LoadSampler":
        self.before = list(os.getloadavg())
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            self.samples.append(os.getloadavg()[0])

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.after = list(os.getloadavg())

    def record(self) -> dict[str, Any]:
        """The 1-, 5- and 15-minute averages before and after; the 1-minute ones during."""
        during = self.samples or [self.after[0]]
        return {"before": [round(x, 2) for x in self.before], "after": [round(x, 2) for x in self.after],
                "during": {"samples": len(self.samples), "every_s": self.every_s,
                           "mean": round(sum(during) / len(during), 2), "max": round(max(during), 2)}}


@dataclass
class SeedRun:
    """One seed's training: its run folder, why it stopped, the load while it trained."""

    seed: int
    run_dir: Path
    stop_reason: str
    load: dict[str, Any]
    seconds: float
    points: list[dict[str, Any]] = field(default_factory=list)
    label: str = ""  # its line in the plot and the table (default: "seed S")
    group: str = ""  # runs of one group share a colour (default: the label)
    stages: list[dict[str, Any]] = field(default_factory=list)  # a staged run's starts (run_stages)

    def __post_init__(self) -> None:
        self.label = self.label or f"seed {self.seed}"
        self.group = self.group or self.label


def train_seeds(plan: Plan, say: Callable[[str], None]) -> list[SeedRun]:
    """Every seed trained in turn, each in ``<out>/seed_<S>``; TrainError and the others as run_pipeline."""
    runs = []
    for seed in range(plan.seeds):
        cfg = seed_config(plan, seed)
        run_dir = new_run_folder(cfg, str(plan.out / f"seed_{seed}"))
        say(f"seed {seed}: training {plan.minutes:g} minutes, a snapshot every {plan.interval:g},"
            f" in {run_dir}")
        with LoadSampler() as load:
            t0 = time.perf_counter()
            res = run_pipeline(cfg, run_dir, False, f"{plan.command} (seed {seed})", say)
        runs.append(SeedRun(seed, run_dir, res.summary["stop_reason"], load.record(),
                            round(time.perf_counter() - t0, 1)))
        if res.summary["stop_reason"].startswith("stopped by"):  # Ctrl-C, SIGTERM: no more seeds
            say(f"seed {seed}: {res.summary['stop_reason']}; the seeds trained so far are scored")
            break
    return runs


def _score(ckpt: str, table: Table, deals: int, seed: int) -> dict[str, Any]:
    """One snapshot's duplicate evaluation against the heuristic (a worker process's task)."""
    torch.set_num_threads(1)  # one thread a process, as the trainer's
    r = evaluate(ckpt, OPPONENT, table, deals, seed)
    return {"la": round(r["mean_score"], 4), "ci_low": round(r["ci95"][0], 4),
            "ci_high": round(r["ci95"][1], 4), "win_rate": round(r["win_rate"], 4), "deals": deals,
            "eval_seed": seed}


def snapshot_point(ckpt: Path) -> dict[str, Any]:
    """What a snapshot's metadata says of when it was saved (and, in a staged run, in which stage)."""
    m = read_metadata(ckpt)
    point = {"minutes": round(m.wall_time_s / 60, 3), "games": m.games, "decisions": m.decisions,
             "decisions_trained": m.decisions_trained, "updates": m.updates, "checkpoint": str(ckpt)}
    stage = m.raw.get("stage")
    if isinstance(stage, dict) and stage.get("name"):
        point["stage"] = str(stage["name"])
    return point


def run_stages(ckpts: list[Path]) -> list[dict[str, Any]]:
    """Where each stage of a staged run began (name, minutes of wall time, update, why), as its last
    checkpoint's metadata records them; [] for a run of one stage."""
    if not ckpts:
        return []
    stage = read_metadata(ckpts[-1]).raw.get("stage")
    starts = stage.get("starts") if isinstance(stage, dict) else None
    if not isinstance(starts, list) or len(starts) < 2:
        return []
    return [{"stage": i, "name": str(s.get("name", "")),
             "minutes": round(float(s.get("wall_s", 0.0)) / 60, 3),
             "updates": int(s.get("updates", 0)), "why": str(s.get("why", ""))} for i, s in enumerate(starts)]


def score_runs(plan: Plan, runs: list[SeedRun], table: Table, say: Callable[[str], None]) -> None:
    """Every snapshot of every run scored at ``table`` (the runs' evaluation table) on the same deals
    (``plan.eval_seed``), ``plan.workers`` side by side; the points go into each run, in order of minutes."""
    for run in runs:
        ckpts = list_checkpoints(run.run_dir)
        run.stages = run_stages(ckpts)
        run.points = sorted((snapshot_point(p) for p in ckpts), key=lambda p: p["minutes"])
        if run.points and run.points[0]["updates"] == 0 and run.points[0]["minutes"] > 0:
            # no update before the end (a busy machine): the final checkpoint replaced minute 0's, whose
            # weights it holds
            run.points.insert(0, run.points[0] | {"minutes": 0.0})
    todo = [p for run in runs for p in run.points]
    say(f"scoring {len(todo)} snapshots against the {OPPONENT}, {plan.deals} duplicate deals each"
        f" (seed {plan.eval_seed}), {plan.workers} at a time")
    scores = score_snapshots([p["checkpoint"] for p in todo], table, plan.deals, plan.eval_seed, plan.workers)
    for p, s in zip(todo, scores):
        p.update(s)


def score_snapshots(ckpts: list[str], table: Table, deals: int, seed: int,
                    workers: int) -> list[dict[str, Any]]:
    """Each snapshot against the heuristic at ``table`` on the same duplicate deals (``seed``), ``workers``
    side by side: lá per game, its 95% CI, the win rate."""
    args = [(c, table, deals, seed) for c in ckpts]
    if workers > 1 and len(args) > 1:
        with ProcessPoolExecutor(min(workers, len(args)), mp_context=get_context("spawn")) as ex:
            return list(ex.map(_score, *zip(*args)))
    return [_score(*a) for a in args]


def quiet(load_before: list[float]) -> bool:
    """Whether the machine was quiet: its 1-minute load average before any training below QUIET_LOAD."""
    return load_before[0] < QUIET_LOAD


def machine_speed(model: ModelConfig) -> dict[str, Any]:
    """How fast this machine's CPU learner is, measured before training: what a run's minutes buy moves
    with the host (the same command made 70% of the updates on one 2-core VM that it made on another), so
    a report of minutes says how fast its minutes were.  ``model``'s network, fresh, on the CPU: the rows a
    second of a forward+backward pass in fp32 and bf16 (:func:`training.run.precision.learner_rates`, what
    ``learner.precision: auto`` measures at a run's start)."""
    net = model.build()
    rates = learner_rates(net, net.takes_sparse_rows)
    return {"learner_rows_per_s": {k: round(v) for k, v in rates.items()},
            "speed_probe": f"forward+backward of the config's network on {ROWS:,} synthetic rows on the CPU,"
                           f" the best of {REPEATS}, before training"}


def report(plan: Plan, runs: list[SeedRun], table: Table, resolved: dict[str, Any] | None,
           before: list[float], speed: dict[str, Any] | None = None) -> dict[str, Any]:
    """``to_strength.json``'s document: the runs scored at ``table``, trained with the config ``resolved``
    (None: each run's own); ``speed``: :func:`machine_speed`, where the runs trained here."""
    return {
        "command": plan.command, "config": plan.config, "overrides": plan.overrides,
        "resolved_config": resolved,
        "minutes": plan.minutes, "every_minutes": plan.interval, "opponent": OPPONENT,
        **table.to_record(),
        "deals": plan.deals, "eval_seed": plan.eval_seed,
        "machine": {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in before],
                    "quiet": quiet(before),
                    "quiet_rule": f"1-minute load average before training < {QUIET_LOAD}",
                    **(speed or {"learner_rows_per_s": None})},
        "seeds": [_run_doc(r) for r in runs],
        "all_beat_heuristic": all_beat([run.points for run in runs], plan.seeds),
    }


def all_beat(points: list[list[dict[str, Any]] | None], expected: int) -> bool:
    """The verdict: each of the ``expected`` runs has points, and its last one beats the heuristic
    (CI low > 0)."""
    lasts = [p[-1] for p in points if p]
    return len(lasts) == expected and all(p["ci_low"] > 0 for p in lasts)


def _run_doc(r: SeedRun) -> dict[str, Any]:
    return {"seed": r.seed, "label": r.label, "group": r.group, "run_dir": str(r.run_dir),
            "stop_reason": r.stop_reason, "load": r.load, "seconds": r.seconds, "stages": r.stages,
            "points": r.points}


def _speed(rates: dict[str, int]) -> str:
    return f"{rates['fp32']:,} rows/s fp32, {rates['bf16']:,} bf16"


def _machine(doc: dict[str, Any]) -> str:
    """The machine's state while the runs trained, in words."""
    m = doc["machine"]
    if m["quiet"] is None:
        why = "each report's own, in sources" if doc["config"] == COMBINED else "runs trained before"
        return f"load while training not recorded here ({why}; {m['cpus']} CPUs)"
    rates = m.get("learner_rows_per_s")  # reports written before it was measured have none
    speed = f"; learner {_speed(rates)}" if rates else ""
    return (f"machine {'quiet' if m['quiet'] else 'busy'} (1-min load {m['load_before'][0]:.2f} before,"
            f" {m['cpus']} CPUs{speed})")


FIGSIZE = (8, 4.5)  # inches: the plot
TITLE_POINTS = 9    # the title's font size
TITLE_WIDTH = 90    # characters a title line holds at that size on that plot (a test draws it)


def plot_title(doc: dict[str, Any]) -> str:
    """The plot's title: what ran (the config and its overrides, wrapped onto at most three lines: a stages
    override alone is ~170 characters), then the deals, then the machine's state, each line short enough
    to stay inside the figure."""
    what = {SCORED: "runs trained before, scored", COMBINED: "reports drawn together"}.get(
        doc["config"], " ".join([doc["config"], *doc["overrides"]]))
    lines = textwrap.wrap(what, TITLE_WIDTH, max_lines=3, placeholder=" …", break_on_hyphens=False)
    lines.append(f"{doc['deals']} duplicate deals per point (seed {doc['eval_seed']})")
    return "\n".join(lines + textwrap.wrap(_machine(doc), TITLE_WIDTH))


def plot(doc: dict[str, Any], path: Path) -> Path:
    """Lá against wall-clock minutes, one line per seed with its 95% CI band."""
    import matplotlib  # optional, and slow to import: only when a plot is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=FIGSIZE)
    groups: dict[str, list[int]] = {}
    for run in doc["seeds"]:
        colour, styles = groups.setdefault(run.get("group", ""), [len(groups), 0])
        groups[run.get("group", "")][1] += 1
        pts = run["points"]
        xs = [p["minutes"] for p in pts]
        ax.plot(xs, [p["la"] for p in pts], marker="o", ms=3, color=f"C{colour}",
                ls=("-", "--", ":", "-.")[styles % 4], label=run.get("label") or f"seed {run['seed']}")
        ax.fill_between(xs, [p["ci_low"] for p in pts], [p["ci_high"] for p in pts], color=f"C{colour}",
                        alpha=0.15, lw=0)
        stage_marks(ax, run.get("stages", [])[1:], True, x_of="minutes", scale=1.0, color=f"C{colour}")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("training wall time (minutes, Ray's start included)")
    ax.set_ylabel(f"mean lá per game vs {OPPONENT} (95% CI)")
    ax.set_title(plot_title(doc), fontsize=TITLE_POINTS)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    write_with(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    return path


def _la(p: dict[str, Any]) -> str:
    return f"{p['la']:+.3f} [{p['ci_low']:+.3f}, {p['ci_high']:+.3f}]"


def table_lines(doc: dict[str, Any]) -> list[str]:
    """The short table (every seed's points) and the verdict line, last."""
    width = max([len(r.get("label") or "") for r in doc["seeds"]] + [4])
    lines = [f"{'run':<{width}}  minutes      games    decisions  lá/game [95% CI]          win rate"]
    for run in doc["seeds"]:
        for p in run["points"]:
            lines.append(f"{run.get('label') or run['seed']:<{width}}  {p['minutes']:7.2f}  {p['games']:>9,}"
                         f"  {p['decisions']:>11,}  {_la(p):<24}  {100 * p['win_rate']:6.1f}%")
    lasts = ", ".join(f"{r.get('label') or 'seed ' + str(r['seed'])} {_la(r['points'][-1])}"
                      f" at {r['points'][-1]['minutes']:.1f} min" for r in doc["seeds"] if r["points"])
    what = "run" if doc["config"] in (SCORED, COMBINED) else "seed"
    verdict = f"every {what} beats" if doc["all_beat_heuristic"] else f"NOT every {what} beats"
    lines.append(f"verdict: {verdict} the {OPPONENT} at its last point (CI low > 0): {lasts};"
                 f" {_machine(doc)}")
    return lines


def run_benchmark(plan: Plan, say: Callable[[str], None], few_deals_ok: bool = False) -> dict[str, Any]:
    """Train every seed, then score every snapshot; write ``to_strength.json`` and ``to_strength.png`` in
    ``plan.out`` and return the document.  ConfigError before anything starts; TrainError, CheckpointError,
    OSError from training."""
    cfg = check_plan(plan, few_deals_ok)
    before = list(os.getloadavg())  # before the probe, which is load of its own
    speed = machine_speed(cfg.model)
    say(f"this machine's learner: {_speed(speed['learner_rows_per_s'])} ({speed['speed_probe']})")
    runs = train_seeds(plan, say)
    table = eval_table(cfg.env, cfg.eval)
    score_runs(plan, runs, table, say)
    doc = report(plan, runs, table, to_dict(cfg) | {"seed": "per seed"}, before, speed)
    write_json_atomic(plan.out / "to_strength.json", doc)
    plot(doc, plan.out / "to_strength.png")
    return doc


SCORED = "(runs trained before)"
COMBINED = "(reports drawn together)"
#: what reports drawn together must share: the same deals against the same opponent at the same table
SAME_DEALS = ("opponent", "rules", "players", "deals", "eval_seed")


def run_config(run_dir: Path) -> TrainConfig:
    """A run folder's own config; ConfigError when it is not a run folder with snapshots."""
    cfg = read_run_config(run_dir)
    if not list_checkpoints(run_dir):
        raise ConfigError(f"{run_dir}: no checkpoints in this run folder")
    return cfg


def score_trained(dirs: list[Path], out: Path, deals: int, eval_seed: int, workers: int, command: str,
                  say: Callable[[str], None], few_deals_ok: bool = False) -> dict[str, Any]:
    """Every snapshot of runs trained before, scored as the benchmark scores its own (one set of duplicate
    deals for all); ``to_strength.json`` and ``to_strength.png`` in ``out``, one line per run labelled
    ``<config> <algorithm> seed <S>``.  The runs must evaluate on one table.  ConfigError before scoring."""
    check_scoring(deals, few_deals_ok)
    check_out(out)
    cfgs = [run_config(d) for d in dirs]
    tables = [eval_table(c.env, c.eval) for c in cfgs]
    for d, t in zip(dirs, tables):
        if t.key != tables[0].key:
            raise ConfigError(f"{d} is evaluated on {t.name}, {dirs[0]} on {tables[0].name}:"
                              " the runs scored together must share a table")
    runs = []
    for d, c in zip(dirs, cfgs):
        last = read_metadata(list_checkpoints(d)[-1])
        runs.append(SeedRun(c.seed, d, "trained before", {}, round(last.wall_time_s, 1),
                            label=f"{c.name} {c.algorithm} seed {c.seed}", group=f"{c.name} {c.algorithm}"))
    plan = Plan(SCORED, [], max(r.seconds for r in runs) / 60, len(runs), out, 0.0, deals, eval_seed, workers,
                command)
    score_runs(plan, runs, tables[0], say)
    doc = report(plan, runs, tables[0], None, [0.0, 0.0, 0.0])  # each run's own config is in its folder
    doc["machine"] |= {"load_before": None, "quiet": None,
                       "quiet_rule": "not recorded: the runs were trained before (see each run's notes)"}
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "to_strength.json", doc)
    plot(doc, out / "to_strength.png")
    return doc


def _read_report(path: Path) -> dict[str, Any]:
    """A ``to_strength.json`` (or the folder holding one); ConfigError, one line naming it, otherwise."""
    file = path / "to_strength.json" if path.is_dir() else path
    try:
        doc = read_json_file(file)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such report (a to_strength.json, or the folder holding one)") from None
    except CheckpointError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("seeds"), list) or "config" not in doc \
            or any(k not in doc for k in SAME_DEALS):
        raise ConfigError(f"{file}: not a time-to-strength report (no seeds, config or scoring table)")
    return doc


def combine_reports(paths: list[Path], out: Path, command: str) -> dict[str, Any]:
    """Reports scored before on the same deals, drawn as one (``to_strength.json`` and ``to_strength.png``
    in ``out``), nothing scored again.  Each line keeps its label, prefixed with its report's config when it
    came from a benchmark (whose labels are "seed S"); each report keeps its colour.  ConfigError, before
    anything is written, for a report that is unreadable or was scored on other deals than the first."""
    check_out(out)
    docs = [_read_report(p) for p in paths]
    first = {k: docs[0][k] for k in SAME_DEALS}
    for p, doc in zip(paths, docs):
        other = {k: doc[k] for k in SAME_DEALS}
        if other != first:
            key = next(k for k in SAME_DEALS if other[k] != first[k])
            raise ConfigError(f"{p} was scored with {key} {other[key]}, {paths[0]} with {first[key]}:"
                              " reports drawn together must share their deals")
    seeds = []
    for i, doc in enumerate(docs):
        own = doc["config"] not in (SCORED, COMBINED)
        for run in doc["seeds"]:
            label = run.get("label") or f"seed {run['seed']}"
            group = run.get("group") or label
            seeds.append(run | {"label": f"{doc['config']} {label}" if own else label,
                                "group": f"{i}: {doc['config'] if own else group}"})
    doc = {"command": command, "config": COMBINED, "overrides": [], "resolved_config": None,
           "minutes": max(float(d["minutes"]) for d in docs), "every_minutes": None, **first,
           "machine": {"cpus": os.cpu_count(), "load_before": None, "quiet": None,
                       "quiet_rule": "not recorded here: each report's own (sources) says"},
           "sources": [{"report": str(p), "command": d.get("command"), "machine": d.get("machine")}
                       for p, d in zip(paths, docs)],
           "seeds": seeds,
           "all_beat_heuristic": all_beat([run.get("points") for run in seeds], len(seeds))}
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "to_strength.json", doc)
    plot(doc, out / "to_strength.png")
    return doc
