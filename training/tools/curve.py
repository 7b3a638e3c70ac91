"""``curve.png`` in the run folder: the training curve a researcher looks at first.

Mean lá per game of the greedy policy against each evaluation opponent, one
panel (and y axis) each, over the decisions trained, with the 95% confidence
interval of every evaluation as a band: the periodic evaluations of every sitting (``eval.jsonl``, the
trainer's history) and the final one as a point with its interval.  A run in stages has a dashed vertical
line where each stage begins, labelled with its name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sam_env.atomic import write_with


Series = tuple[list[int], list[float], list[float], list[float]]


def _points(history: list[dict[str, Any]], opp: str) -> Series:
    """(decisions trained, mean, CI low, CI high) of every evaluation against ``opp``, in order."""
    rows = [(e["decisions_trained"], e["results"][opp]) for e in history
            if "mean_score" in e.get("results", {}).get(opp, {})]
    rows.sort(key=lambda row: row[0])
    return ([x for x, _ in rows], [r["mean_score"] for _, r in rows], [r["ci95"][0] for _, r in rows],
            [r["ci95"][1] for _, r in rows])


def plot_curve(history: list[dict[str, Any]], final: dict[str, Any] | None, path: str | Path,
               title: str, stages: list[dict[str, Any]] | None = None) -> Path:
    """Write the curve of ``history`` (evaluation entries: ``decisions_trained`` and ``results``) and the
    ``final`` report (``decisions_trained``, ``results``; None without one) to ``path``, atomically.  Each
    opponent has its own panel and y axis: against random the policy makes +15 lá, against the heuristic
    about 0, and on one axis the line the verdict is about would be drawn flat.  ``stages``: where each stage
    began (``decisions_trained``, ``name``), marked on every panel."""
    import matplotlib  # optional, and slow to import: only when a curve is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    opponents = list(dict.fromkeys([o for e in history for o in e.get("results", {})]
                                   + list((final or {}).get("results", {}))))
    fig, axes = plt.subplots(max(1, len(opponents)), 1, figsize=(8, 1.5 + 2.5 * max(1, len(opponents))),
                             sharex=True, squeeze=False)
    for i, opp in enumerate(opponents):
        _panel(axes[i][0], history, final, opp, f"C{i}")
    for i, row in enumerate(axes):
        stage_marks(row[0], stages or [], label=i == 0)
    if not opponents:
        axes[0][0].text(0.5, 0.5, "no evaluation in this run (eval.every_updates=0, eval.final_deals=0)",
                        ha="center", va="center", transform=axes[0][0].transAxes)
    axes[-1][0].set_xlabel("decisions trained (millions)")
    axes[0][0].set_title(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    write_with(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    return path


def stage_marks(ax: Any, stages: list[dict[str, Any]], label: bool, x_of: str = "decisions_trained",
                scale: float = 1e-6, color: str = "0.35") -> list[float]:
    """A dashed vertical line where each stage begins (``label``: with its name at the top); their x, the
    start's ``x_of`` × ``scale`` (millions of decisions trained in curve.png, minutes in the time-to-strength
    plot)."""
    xs = []
    for st in stages:
        x = st[x_of] * scale
        ax.axvline(x, color=color, ls="--", lw=0.9)
        if label:
            ax.text(x, 0.97, f" {st['stage']}: {st['name']}", transform=ax.get_xaxis_transform(), fontsize=8,
                    va="top", ha="left", color=color)
        xs.append(x)
    return xs


def _panel(ax: Any, history: list[dict[str, Any]], final: dict[str, Any] | None, opp: str,
           color: str) -> None:
    """One opponent's evaluations on its own axis: the periodic ones as a line with its band, the final one as
    a point with its interval, and break-even (0 lá)."""
    xs, mean, lo, hi = _points(history, opp)
    if xs:
        m = [x / 1e6 for x in xs]
        ax.plot(m, mean, marker="o", ms=3, color=color, label=f"vs {opp}")
        ax.fill_between(m, lo, hi, color=color, alpha=0.2, lw=0)
    r = (final or {}).get("results", {}).get(opp, {})
    if "mean_score" in r:
        x, y, (low, high) = final["decisions_trained"] / 1e6, r["mean_score"], r["ci95"]
        ax.errorbar([x], [y], yerr=[[y - low], [high - y]], fmt="D", color=color, capsize=4,
                    label=f"vs {opp}, final ({final.get('deals', '?')} deals)")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_ylabel(f"lá/game vs {opp}\n(95% CI)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
