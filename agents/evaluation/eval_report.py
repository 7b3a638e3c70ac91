"""An evaluation's report: ``result.json``, ``report.md`` and the score distribution ``scores.png``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from sam_env.atomic import check_folder, write_atomic, write_with

def _markdown(res: dict[str, Any]) -> str:
    lines = [f"# Evaluation: {res['agent']} vs {res['opponents']}", "",
             "Duplicate deals: each deal played once per seat, the agent in every seat.",
             f"Seed {res['seed']}, {next(iter(res['by_table'].values()))['deals']} deals per table."
             + ("  Agent settings: " + ", ".join(f"{k}={v}" for k, v in res["agent_settings"].items())
                if res.get("agent_settings") else ""), "",
             *([f"Command: `{res['command']}`", ""] if res.get("command") else []),
             "| table | games | mean lá | 95% CI | win rate (equal play) | Sâm declared (success) "
             "| chops made / suffered (lá) | đền paid | cóng (inflicted) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in res["by_table"].items():
        off = " (out of training distribution)" if r.get("out_of_distribution") else ""
        lines.append(
            f"| {name}{off} | {r['games']} | {r['mean_score']:+.3f} "
            f"| [{r['ci95'][0]:+.3f}, {r['ci95'][1]:+.3f}] "
            f"| {r['win_rate']:.3f} ({r['equal_play_win_rate']:.3f}) "
            f"| {r['sam_declared']} ({r['sam_success_rate']:.0%}) "
            f"| {r['chops_made']} / {r['chops_suffered']} ({r['chops_made_la']} / {r['chops_suffered_la']}) "
            f"| {r['den_paid']} | {r['cong']} ({r['cong_inflicted']}) |")
    lines += ["", "Mean lá: the agent's net score per game (scores of a game sum to 0).",
              "The interval treats each deal (the mean over its rotations) as one sample.", "",
              "![score distribution](scores.png)", ""]
    for name, r in res["by_table"].items():
        ends = ", ".join(f"{k} {v}" for k, v in r["ends"].items())
        lines.append(f"- {name}: game ends: {ends}; opponents declared Sâm {r['opp_sam_declared']} times "
                     f"({r['opp_sam_success_rate']:.0%} success); "
                     f"{r['instant_deals_skipped']} instant-win deals "
                     f"skipped; {r['games_per_s']} games/s.")
    return "\n".join(lines) + "\n"


def _plot(res: dict[str, Any], path: Path) -> None:
    import matplotlib  # optional (the train extra), and slow to import: only when a report is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = list(res["by_table"])
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 3.2 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        r = res["by_table"][name]
        xs = np.array([int(k) for k in r["score_hist"]])
        ys = np.array(list(r["score_hist"].values()))
        ax.bar(xs, ys, width=0.9, color="#3b7dd8")
        ax.axvline(0, color="black", lw=0.8)
        ax.axvline(r["mean_score"], color="#d84b3b", lw=1.5, label=f"mean {r['mean_score']:+.2f} lá")
        ax.set_yscale("log")
        ax.set_xlabel(f"{res['agent']}'s lá per game")
        ax.set_ylabel("games")
        ax.set_title(f"{name}: {res['agent']} vs {res['opponents']} "
                     f"({r['games']} games)")
        ax.legend()
    fig.tight_layout()
    save_png(fig, path)


def write_report(res: dict[str, Any], out_dir: str | Path) -> Path:
    """``result.json``, ``report.md`` and ``scores.png`` in ``out_dir``."""
    return write_folder(out_dir, res, "result.json", ("report.md", _markdown), ("scores.png", _plot))


def write_folder(out_dir: str | Path, res: dict[str, Any], json_name: str,
                 markdown: tuple[str, Callable[[dict[str, Any]], str]],
                 plot: tuple[str, Callable[[dict[str, Any], Path], None]]) -> Path:
    """A report folder: ``res`` as JSON, then its Markdown and its figure, each (file name, maker)."""
    d = check_folder(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    write_atomic(d / json_name, json.dumps(res, indent=2, ensure_ascii=False) + "\n")
    write_atomic(d / markdown[0], markdown[1](res))
    plot[1](res, d / plot[0])
    return d


def save_png(fig: Any, path: Path) -> None:
    """Write a matplotlib figure as PNG (atomically) and free it."""
    import matplotlib.pyplot as plt  # optional (the train extra): only when a report is drawn
    write_with(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
