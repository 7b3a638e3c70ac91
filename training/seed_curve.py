"""Compute-to-strength curve over seeds (``samloc seeds``): what a run of a config buys per minute, and
how seeds differ.

Reads each run folder's periodic evaluations (``eval.jsonl``) and final one (``eval_report.json``),
lines them up by update (the runs share a config, so their evaluations fall on the same updates),
and prints a Markdown table: per evaluation the mean over seeds of the wall minutes and decisions
trained, and per opponent the mean lá over seeds with the lowest and highest seed.  ``--png``
draws every seed's curve and their mean over wall minutes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sam_env.atomic import write_with


def load_run(run: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None, float]:
    """(periodic evaluations, final report or None, wall seconds of the run) of a run folder."""
    hist = run / "eval.jsonl"
    if not hist.is_file() and (run / "config.yaml").is_file():
        raise ValueError(f"{run}: a run with no evaluation yet: it stopped before its first (eval.every_updates);"
                         " train it longer (samloc train --resume RUN --more-minutes N) or leave it out")
    if not hist.is_file():
        raise ValueError(f"{run}: not a run folder (no config.yaml, no eval.jsonl)")
    evals = [json.loads(line) for line in hist.read_text().splitlines() if line.strip()]
    final = json.loads((run / "eval_report.json").read_text()) if (run / "eval_report.json").is_file() else None
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").is_file() else {}
    return evals, final, float(summary.get("wall_s", evals[-1]["wall_s"] if evals else 0.0))


def _spread(values: list[float]) -> str:
    mean = sum(values) / len(values)
    return f"{mean:+.2f} ({min(values):+.2f} … {max(values):+.2f})"


def table(runs: list[tuple[list[dict[str, Any]], dict[str, Any] | None, float]], opponents: list[str]) -> str:
    """The Markdown table: one row per evaluation update all runs reached, then the final evaluations."""
    by_update = [{e["updates"]: e for e in evals} for evals, _, _ in runs]
    common = sorted(set.intersection(*(set(d) for d in by_update)))
    head = "| updates | wall min | decisions trained | " + " | ".join(
        f"vs {o}: mean (lowest … highest seed)" for o in opponents) + " |"
    lines = [head, "|" + "---|" * (3 + len(opponents))]
    for u in common:
        es = [d[u] for d in by_update]
        cells = [_spread([e["results"][o]["mean_score"] for e in es]) for o in opponents]
        lines.append(f"| {u} | {sum(e['wall_s'] for e in es) / len(es) / 60:.1f} | "
                     f"{sum(e['decisions_trained'] for e in es) / len(es) / 1e6:.2f} M | " + " | ".join(cells) + " |")
    finals = [(f, wall) for _, f, wall in runs if f is not None]
    if len(finals) == len(runs):
        cells = [_spread([f["results"][o]["mean_score"] for f, _ in finals]) for o in opponents]
        deals = finals[0][0].get("deals", "?")
        lines.append(f"| final ({deals} deals) | {sum(w for _, w in finals) / len(finals) / 60:.1f} | "
                     f"{sum(f['decisions_trained'] for f, _ in finals) / len(finals) / 1e6:.2f} M | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs: list[tuple[list[dict[str, Any]], dict[str, Any] | None, float]], names: list[str],
         opponents: list[str], path: Path) -> None:
    """One panel per opponent: every seed's evaluations (and final point) over wall minutes."""
    import matplotlib  # only when a plot is asked for
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(opponents), figsize=(5 * len(opponents), 4), squeeze=False)
    for ax, opp in zip(axes[0], opponents):
        for i, ((evals, final, wall), name) in enumerate(zip(runs, names)):
            ax.plot([e["wall_s"] / 60 for e in evals], [e["results"][opp]["mean_score"] for e in evals],
                    marker="o", ms=3, color=f"C{i}", label=name)
            if final is not None:
                r = final["results"][opp]
                ax.errorbar([wall / 60], [r["mean_score"]], fmt="D", color=f"C{i}", capsize=3,
                            yerr=[[r["mean_score"] - r["ci95"][0]], [r["ci95"][1] - r["mean_score"]]])
        ax.axhline(0, color="black", lw=0.8)
        ax.set_title(f"vs 3 x {opp}", fontsize=10)
        ax.set_xlabel("wall minutes (2 cores)")
        ax.set_ylabel("mean lá per game")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    write_with(path, lambda f: fig.savefig(f, format="png", dpi=100))
    plt.close(fig)


def check_opponents(runs: list[tuple[list[dict[str, Any]], dict[str, Any] | None, float]], names: list[str],
                     opponents: list[str]) -> None:
    """ValueError naming the run whose evaluations lack one of ``opponents``."""
    for (evals, final, _), name in zip(runs, names):
        for o in opponents:
            if any(o not in e["results"] for e in evals) or (final and o not in final["results"]):
                raise ValueError(f"{name}: an evaluation without opponent {o!r}")
