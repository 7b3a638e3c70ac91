"""What a run shows: TensorBoard scalars and hyperparameters, the live display, the rates, the signals.

TensorBoard's tags (``charts/…``, ``losses/…``, ``eval/<opponent>/…``, ``hparam/…``) and the plain log
line are those of every run before: dashboards and scripts read them.  CleanRL's tags are written next to
them (:data:`CLEANRL`), so a dashboard made for CleanRL works unchanged; every tag is written here.
"""

from __future__ import annotations

import shlex
import shutil
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams

from ..config import TrainConfig, flat, to_yaml
from ..errors import TrainError
from .runstate import RunState


class Rate:
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


def eval_scalars(writer: SummaryWriter, res: dict[str, Any], step: int, prefix: str = "") -> None:
    """``eval/<opponent>/<prefix>mean_la`` with its 95% CI (``ci95_low``, ``ci95_high``), win rate,
    Sâm declarations."""
    for opp, r in res.items():
        if "mean_score" in r:
            lo, hi = r["ci95"]
            for name, v in (("mean_la", r["mean_score"]), ("ci95_low", lo), ("ci95_high", hi),
                            ("win_rate", r["win_rate"]),
                            ("sam_declared_per_game", r["sam_declared"] / max(1, r["games"])),
                            ("sam_success_rate", r["sam_success_rate"])):
                writer.add_scalar(f"eval/{opp}/{prefix}{name}", v, step)


#: CleanRL's names for the trainer's own tags, written beside them (``losses/entropy``, ``approx_kl``,
#: ``clipfrac`` and ``explained_variance`` are CleanRL's names already).  ``charts/SPS`` is the rate of the
#: x axis, decisions trained per second, as CleanRL's is of its global step.
CLEANRL = {"losses/policy": "losses/policy_loss", "losses/value": "losses/value_loss",
           "charts/decisions_per_s": "charts/SPS"}


class Board:
    """The run's TensorBoard event files: the counters and rates once per step (a step is never written
    twice: the steps of a tag rise), evaluations, and the hyperparameters at the end."""

    def __init__(self, cfg: TrainConfig, state: RunState, first_step: int):
        self.cfg, self.state = cfg, state
        # the last step of the charts/ scalars, and the step this sitting starts after
        self.step = self.first = first_step
        try:
            # A resume purges the points after its checkpoint (work lost with a killed sitting, redone now),
            # not those at its step: the final ones of the sitting it continues.
            purge = first_step + 1 if state.resumed_from else None
            self.writer = SummaryWriter(str(state.run_dir), purge_step=purge)
        except OSError as exc:
            raise TrainError(f"cannot write the run folder {state.run_dir}: {exc.strerror or exc}") from None
        if state.counters.updates == 0:
            self.writer.add_text("config", "```\n" + to_yaml(cfg) + "\n```", 0)

    def scalar(self, tag: str, value: float, step: int) -> None:
        """One point of ``tag`` (and of its CleanRL name, when it has one)."""
        self.writer.add_scalar(tag, value, step)
        if tag in CLEANRL:
            self.writer.add_scalar(CLEANRL[tag], value, step)

    def episodes(self, stats: dict[str, float], step: int) -> None:
        """CleanRL's episode figures from an update's rollouts: ``charts/episodic_return``, the learning
        seat's lá per game finished, and ``charts/episodic_length``, decisions (every seat's) per game."""
        if stats.get("games"):
            self.scalar("charts/episodic_return", stats["return_sum"] / stats["games"], step)
            self.scalar("charts/episodic_length", stats["decisions"] / stats["games"], step)

    def due(self) -> bool:
        """Whether the counters' step is not written yet."""
        return self.state.counters.decisions_trained > self.step

    def counters(self, rate: Rate) -> bool:
        """The counters and rates at this step; False when the step was written already."""
        c, step = self.state.counters, self.state.counters.decisions_trained
        if step <= self.step:
            return False
        self.step = step
        for name in ("games", "decisions", "decisions_trained", "updates", "worker_failures",
                     "dropped_rollouts"):
            self.scalar(f"charts/{name}", getattr(c, name), step)
        r = rate.rates()
        if r:
            self.scalar("charts/decisions_per_s", r["trained_per_s"], step)
            self.scalar("charts/generated_decisions_per_s", r["generated_per_s"], step)
            self.scalar("charts/updates_per_s", r["updates_per_s"], step)
        self.writer.flush()
        return True

    def stage(self, start: dict[str, Any]) -> None:
        """Where a stage begins: ``charts/stage`` (its index) and a line of text under ``stages``, at the
        step of its first update's decisions."""
        step = start["decisions_trained"]
        self.writer.add_scalar("charts/stage", start["stage"], step)
        self.writer.add_text("stages", f"stage {start['stage']} ({start['name']}) begins at update"
                             f" {start['updates']:,}, {start['wall_s'] / 60:.1f} minutes:"
                             f" {start['why']}", step)
        self.writer.flush()

    def evaluation(self, res: dict[str, Any], step: int, prefix: str = "") -> None:
        eval_scalars(self.writer, res, step, prefix)

    def final_eval(self, report: dict[str, Any]) -> None:
        """The final evaluation's figures (``eval/<opponent>/final_mean_la`` ...), at the step of the final
        checkpoint; not again when this sitting trained nothing (same weights, deals, seed)."""
        if self.state.counters.decisions_trained > self.first:
            self.evaluation(report["results"], self.state.counters.decisions_trained, prefix="final_")
            self.writer.flush()

    def close(self, summary: dict[str, Any], report: dict[str, Any] | None = None) -> None:
        """The config as hyperparameters, with the final figures as metrics (the final evaluation's, else
        the last periodic one's), then the writer is closed.

        They go into the run's own event files at the step of the final checkpoint, as TensorFlow's hparams
        API writes them, not into a sub-run per sitting (``SummaryWriter.add_hparams``): each resume then
        adds one point to each metric, at a later step.  A sitting that trained nothing writes none."""
        w, step = self.writer, self.state.counters.decisions_trained
        if step > self.first:
            metrics = {"hparam/decisions_trained": float(summary["decisions_trained"])}
            ev = (report or summary.get("last_eval") or {}).get("results") or {}
            for opp, r in ev.items():
                if "mean_score" in r:
                    metrics[f"hparam/eval_{opp}_mean_la"] = float(r["mean_score"])
            for part in hparams(flat(self.cfg), metrics):
                w.file_writer.add_summary(part, step)
            for k, v in metrics.items():
                w.add_scalar(k, v, step)
        w.close()


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


class Display:
    """A rich live panel on a terminal; a plain line per interval otherwise (or nothing).  ``rows`` gives
    the algorithm's (label, text) rows: ``(panel rows, plain line rows)``."""

    def __init__(self, cfg: TrainConfig, state: RunState,
                 rows: Callable[[], tuple[list[tuple[str, str]], list[tuple[str, str]]]]):
        self.cfg, self.state, self.rows = cfg, state, rows
        mode = cfg.display
        if mode == "auto":
            mode = "rich" if sys.stdout.isatty() else "plain"
        self.mode = mode
        self.live = None
        self.last = 0.0
        self.rates: dict[str, float] = {}  # the last update's, for the panel left on the screen at the end

    def __enter__(self) -> "Display":
        if self.mode == "rich":
            from rich.live import Live  # only on a terminal
            self.live = Live(self._render({}), refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            if exc[0] is None:  # the panel left on the screen is the run's end, not its last half-second
                self.live.update(self._render(self.rates))
            self.live.__exit__(*exc)

    def _eta(self, r: dict[str, float]) -> str:
        c, cfg = self.state.counters, self.cfg
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
        ev = self.state.last_eval
        if not ev:
            return "none yet"
        parts = [f"{opp} {r['mean_score']:+.2f} lá ({100 * r['win_rate']:.0f}% wins)"
                 for opp, r in ev["results"].items() if "mean_score" in r]
        return f"@update {ev['updates']}: " + ", ".join(parts)

    def _render(self, r: dict[str, float]) -> Any:
        from rich.table import Table  # only on a terminal
        c = self.state.counters
        t = Table(title=f"samloc train — {self.cfg.name} → {self.state.run_dir}", show_header=False)
        t.add_column(style="bold")
        t.add_column()
        pct = 100 * c.decisions_trained / self.cfg.total_decisions
        t.add_row("games", f"{c.games:,}")
        t.add_row("decisions trained", f"{c.decisions_trained:,} ({pct:.1f}%)")
        t.add_row("decisions/s", f"{r.get('trained_per_s', 0):,.0f} trained,"
                  f" {r.get('generated_per_s', 0):,.0f} generated")
        t.add_row("updates", f"{c.updates:,} ({r.get('updates_per_s', 0):.2f}/s)")
        t.add_row("ETA", self._eta(r))
        for label, text in self.rows()[0]:
            t.add_row(label, text)
        t.add_row("last eval", self._eval_text())
        if c.worker_failures:
            t.add_row("worker failures", str(c.worker_failures))
        return t

    def update(self, rate: Rate) -> None:
        now = time.perf_counter()
        if self.mode == "none" or now - self.last < (0.5 if self.mode == "rich" else self.cfg.log_every_s):
            return
        self.last = now
        r = self.rates = rate.rates()
        if self.mode == "rich" and self.live is not None:
            self.live.update(self._render(r))
        elif self.mode == "plain":
            c = self.state.counters
            extra = "".join(f" | {label} {text}" for label, text in self.rows()[1])
            print(f"[{self.cfg.name}] update {c.updates} games {c.games:,} trained {c.decisions_trained:,}"
                  f" ({r.get('trained_per_s', 0):,.0f}/s, generated {r.get('generated_per_s', 0):,.0f}/s)"
                  f" ETA {self._eta(r)}{extra} | eval {self._eval_text()}", flush=True)


def program(name: str) -> str:
    """How to run the program ``name`` installed beside this Python (``.venv/bin/tensorboard`` after
    scripts/setup.sh, which puts nothing on PATH): its path, relative to the working directory when inside
    it; the bare name when PATH finds that same program, or when there is none beside this Python."""
    exe = Path(sys.executable).parent / name
    found = shutil.which(name)
    if not exe.exists() or (found and Path(found).resolve() == exe.resolve()):
        return name
    try:
        exe = exe.absolute().relative_to(Path.cwd())
    except ValueError:
        pass  # outside the working directory: the absolute path
    return shlex.quote(str(exe))


def tensorboard_command(logdir: Path) -> str:
    """The command that shows ``logdir`` in TensorBoard (:func:`program`)."""
    return f"{program('tensorboard')} --logdir {shlex.quote(str(logdir))}"


def run_dir_note(run_dir: Path) -> str:
    """The line that says where a run writes."""
    return f"samloc train: run folder {run_dir}  ({tensorboard_command(run_dir.parent)})"
