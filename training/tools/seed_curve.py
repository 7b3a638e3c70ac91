"""Compute-to-strength curve over seeds (``samloc seeds``): what a run of a config buys per minute, and
how seeds differ.

Reads each run folder's periodic evaluations (``eval.jsonl``) and final one (``eval_report.json``),
lines them up (:func:`align`) by wall minutes (the default), decisions trained or update, and prints a
Markdown table: per row the mean over seeds of the updates, wall minutes and decisions trained, the
seeds in it, and per opponent the mean lá over seeds with the lowest and highest seed.  ``--png``
draws, per opponent, the mean over seeds as a line in a band from the lowest to the highest seed (the
same rows as the table), every seed's own curve faint behind it (openrlbenchmark's way).  The opponents
are, unless given, those every evaluation of every run has.  A damaged run file (a line of
``eval.jsonl`` that is not an evaluation, a report that is not an object, a figure that is not a
number) is a ValueError naming the file.

Every evaluation of every run is in a row.  Runs evaluated by minutes (``eval.every_minutes``) reach
different updates, and no run evaluates at exactly the same second or decision count as another: by
minutes or decisions, evaluations of different runs within half the runs' typical spacing (the smallest
median gap between a run's evaluations) are one row; by update, equal updates are.  A run's figures in a
row are its own evaluation there; a run with none there (it evaluated at other points) is interpolated
linearly between its evaluations on either side, and a run whose evaluations do not reach the row on
both sides is left out of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sam_env.atomic import write_with

Run = tuple[list[dict[str, Any]], dict[str, Any] | None, float]
#: what each alignment reads from an evaluation, the plot's unit of it, and its label
AXES = {"minutes": ("wall_s", 60.0, "wall minutes"),
        "decisions": ("decisions_trained", 1e6, "decisions trained (millions)"),
        "update": ("updates", 1.0, "update")}


def load_run(run: Path) -> Run:
    """(periodic evaluations, final report or None, wall seconds of the run) of a run folder; ValueError
    (one line, naming the file) for a folder that is not a run or a file that is damaged."""
    hist = run / "eval.jsonl"
    if not hist.is_file() and (run / "config.yaml").is_file():
        raise ValueError(f"{run}: a run with no evaluation yet: it stopped before its first"
                         " (eval.every_updates); train it longer (samloc train --resume RUN --more-minutes N)"
                         " or leave it out")
    if not hist.is_file():
        raise ValueError(f"{run}: not a run folder (no config.yaml, no eval.jsonl)")
    evals = [_evaluation(_json(hist, line, f"line {n}"), hist, f"line {n}: ", COUNTERS)
             for n, line in enumerate(_text(hist).splitlines(), 1) if line.strip()]
    if not evals:
        raise ValueError(f"{hist}: no evaluation in it")
    report, summary_file = run / "eval_report.json", run / "summary.json"
    final = (_evaluation(_json(report, _text(report)), report, "", ("decisions_trained",))
             if report.is_file() else None)
    summary = _json(summary_file, _text(summary_file)) if summary_file.is_file() else {}
    if not isinstance(summary, dict) or not _number(summary.get("wall_s", 0.0)):
        raise ValueError(f"{summary_file}: not a run summary (an object whose wall_s is a number)")
    return evals, final, float(summary.get("wall_s", evals[-1]["wall_s"]))


#: the counters every periodic evaluation carries (the axes of :data:`AXES`)
COUNTERS = ("updates", "wall_s", "decisions_trained")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None


def _json(path: Path, text: str, where: str = "") -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: {where + ': ' if where else ''}not JSON ({exc})"[:300]) from None


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v))


def _evaluation(e: Any, path: Path, where: str, counters: tuple[str, ...]) -> dict[str, Any]:
    """``e`` when it is an evaluation: an object with numeric ``counters`` and ``results`` mapping each
    opponent to an object whose ``mean_score`` (and ``ci95``, when given) are numbers."""
    what = "an evaluation: {" + ", ".join(f'"{c}": N' for c in counters) + ', "results": {OPPONENT: {...}}}'
    if not isinstance(e, dict) or not all(_number(e.get(c)) for c in counters) \
            or not isinstance(e.get("results"), dict):
        raise ValueError(f"{path}: {where}not {what}")
    for opp, r in e["results"].items():
        ci = r.get("ci95", [0, 0]) if isinstance(r, dict) else None
        if not (isinstance(r, dict) and _number(r.get("mean_score", 0.0)) and isinstance(ci, list)
                and len(ci) == 2 and all(map(_number, ci))):
            raise ValueError(f"{path}: {where}results.{opp}: not an opponent's result (mean_score a number,"
                             " ci95 two numbers)")
    return e


def _spread(values: list[float]) -> str:
    mean = sum(values) / len(values)
    return f"{mean:+.2f} ({min(values):+.2f} … {max(values):+.2f})"


def _x(e: dict[str, Any], by: str) -> float:
    return float(e[AXES[by][0]])


def _tolerance(runs: list[Run], by: str) -> float:
    """How far apart two runs' evaluations may be and still share a row (see the module docstring)."""
    if by == "update":
        return 0.0
    gaps = [float(np.median(np.diff([_x(e, by) for e in evals]))) for evals, _, _ in runs if len(evals) > 1]
    return min(gaps) / 2 if gaps else 0.0


def _groups(runs: list[Run], by: str) -> list[dict[int, dict[str, Any]]]:
    """The rows: evaluations of different runs within the tolerance of the row's first, at most one a run."""
    tol = _tolerance(runs, by)
    points = sorted(((_x(e, by), i, e) for i, (evals, _, _) in enumerate(runs) for e in evals),
                    key=lambda p: (p[0], p[1]))
    rows: list[dict[int, dict[str, Any]]] = []
    start = -np.inf
    for x, i, e in points:
        if not rows or x - start > tol or i in rows[-1]:
            rows.append({})
            start = x
        rows[-1][i] = e
    return rows


def _figures(e: dict[str, Any], opponents: list[str]) -> list[float]:
    return [e["updates"], e["wall_s"], e["decisions_trained"],
            *(e["results"][o]["mean_score"] for o in opponents)]


def align(runs: list[Run], opponents: list[str], by: str = "minutes") -> list[tuple[list[list[float]], int]]:
    """Per row (see the module docstring), each run's figures there (updates, wall seconds, decisions
    trained, then lá per opponent) and how many of them were interpolated."""
    out = []
    for group in _groups(runs, by):
        x = float(np.mean([_x(e, by) for e in group.values()]))
        figs, interpolated = [], 0
        for i, (evals, _, _) in enumerate(runs):
            if i in group:
                figs.append(_figures(group[i], opponents))
                continue
            xs = [_x(e, by) for e in evals]
            if not xs or not xs[0] < x < xs[-1]:
                continue  # the run's evaluations do not reach this row on both sides
            table = np.array([_figures(e, opponents) for e in evals])
            figs.append([float(np.interp(x, xs, table[:, k])) for k in range(table.shape[1])])
            interpolated += 1
        out.append((figs, interpolated))
    return out


def table(runs: list[Run], opponents: list[str], by: str = "minutes") -> str:
    """The Markdown table: a row per evaluation point (:func:`align`), then the final evaluations."""
    head = "| updates | wall min | decisions trained | seeds | " + " | ".join(
        f"vs {o}: mean (lowest … highest seed)" for o in opponents) + " |"
    lines = [head, "|" + "---|" * (4 + len(opponents))]
    for figs, interpolated in align(runs, opponents, by):
        mean = np.mean(np.array(figs), axis=0)
        seeds = f"{len(figs)}" + (f" ({interpolated} interpolated)" if interpolated else "")
        cells = [_spread([f[3 + k] for f in figs]) for k in range(len(opponents))]
        lines.append(f"| {mean[0]:.0f} | {mean[1] / 60:.1f} | {mean[2] / 1e6:.2f} M | {seeds} | "
                     + " | ".join(cells) + " |")
    finals = [(f, wall) for _, f, wall in runs if f is not None]
    if len(finals) == len(runs):
        cells = [_spread([f["results"][o]["mean_score"] for f, _ in finals]) for o in opponents]
        deals = finals[0][0].get("deals", "?")
        lines.append(f"| final ({deals} deals) | {sum(w for _, w in finals) / len(finals) / 60:.1f} | "
                     f"{sum(f['decisions_trained'] for f, _ in finals) / len(finals) / 1e6:.2f} M"
                     f" | {len(finals)} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


#: where each axis's figure is in a row of :func:`align` (updates, wall seconds, decisions trained)
COLUMN = {"update": 0, "minutes": 1, "decisions": 2}
SEED_ALPHA = 0.3  # each seed's own curve, faint behind the mean


def figure(runs: list[Run], names: list[str], opponents: list[str], by: str = "minutes") -> Any:
    """The matplotlib figure of :func:`plot`: per opponent, the mean over seeds of the table's rows with a
    band from the lowest to the highest seed, each seed's curve (and final point) faint behind."""
    import matplotlib  # only when a plot is asked for
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key, scale, label = AXES[by]
    rows = align(runs, opponents, by)
    xs = np.array([np.mean([f[COLUMN[by]] for f in figs]) for figs, _ in rows]) / scale
    fig, axes = plt.subplots(1, len(opponents), figsize=(5 * len(opponents), 4), squeeze=False)
    for k, (ax, opp) in enumerate(zip(axes[0], opponents)):
        for i, ((evals, final, wall), name) in enumerate(zip(runs, names)):
            ax.plot([_x(e, by) / scale for e in evals], [e["results"][opp]["mean_score"] for e in evals],
                    lw=1, marker="o", ms=2, color=f"C{i}", alpha=SEED_ALPHA, label=name)
            end = wall if by == "minutes" else (final or {}).get(key)
            if final is not None and end is not None:
                r = final["results"][opp]
                ci = r.get("ci95", [r["mean_score"]] * 2)
                ax.errorbar([end / scale], [r["mean_score"]], fmt="D", color=f"C{i}", capsize=3,
                            alpha=SEED_ALPHA, yerr=[[r["mean_score"] - ci[0]], [ci[1] - r["mean_score"]]])
        scores = [[f[3 + k] for f in figs] for figs, _ in rows]
        ax.fill_between(xs, [min(v) for v in scores], [max(v) for v in scores], color="black", alpha=0.15,
                        lw=0, label="lowest … highest seed")
        ax.plot(xs, [float(np.mean(v)) for v in scores], color="black", lw=2,
                label=f"mean of {len(runs)} seeds")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_title(f"vs 3 x {opp}", fontsize=10)
        ax.set_xlabel(label)
        ax.set_ylabel("mean lá per game")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot(runs: list[Run], names: list[str], opponents: list[str], path: Path, by: str = "minutes") -> None:
    """:func:`figure` written to ``path`` as a PNG."""
    import matplotlib.pyplot as plt  # only when a plot is asked for

    fig = figure(runs, names, opponents, by)
    try:
        write_with(path, lambda f: fig.savefig(f, format="png", dpi=100))
    finally:
        plt.close(fig)


def _scored(e: dict[str, Any]) -> list[str]:
    """The opponents an evaluation has a mean lá against."""
    return [o for o, r in e["results"].items() if "mean_score" in r]


def check_opponents(runs: list[Run], names: list[str], opponents: list[str]) -> None:
    """ValueError naming the run whose evaluations lack one of ``opponents``."""
    for (evals, final, _), name in zip(runs, names):
        for o in opponents:
            if any(o not in _scored(e) for e in evals) or (final and o not in _scored(final)):
                raise ValueError(f"{name}: an evaluation without opponent {o!r}")


def common_opponents(runs: list[Run], names: list[str]) -> list[str]:
    """The opponents every evaluation of every run has (the default columns), in the first evaluation's
    order; ValueError when there is none."""
    every = [e for evals, final, _ in runs for e in [*evals, *([final] if final else [])]]
    out = [o for o in _scored(every[0]) if all(o in _scored(e) for e in every)] if every else []
    if not out:
        raise ValueError(f"{', '.join(names)}: no opponent is in every evaluation of these runs"
                         " (each run's eval.jsonl and eval_report.json)")
    return out
