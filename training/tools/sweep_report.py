"""What ``samloc sweep`` writes: each trial as it ended, and its settings ranked over their seeds.

A sweep compares settings, not single runs: a setting's score is the mean over its seeds of each seed's
lá against the heuristic (every trial on the same duplicate deals), with a 95% CI across the seeds
(Student's t; with one seed, the trial's own CI over the deals, and the report says so).  A setting is
ranked only when every one of its seeds trained its whole budget: a seed that ASHA stopped, that failed,
or that an interruption left unfinished puts its setting in the list below the ranking, with the reason.
The best setting is named only when its CI lies wholly above every other ranked setting's; otherwise
the report says that none is separated from the rest.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sam_env.atomic import write_with

#: 97.5% quantiles of Student's t for 1 .. 30 degrees of freedom (then the normal's 1.96)
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]
UNFINISHED = ("interrupted", "not started")  # what an interrupted sweep leaves for --resume


def across_seeds(values: list[float]) -> tuple[float, float, float]:
    """(mean, CI low, CI high): the 95% t-interval of ``values`` (two or more)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = (T975[n - 2] if n - 1 <= len(T975) else 1.96) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def _why_unranked(trials: list[dict[str, Any]]) -> str:
    """Why a setting is not ranked ('' when it is)."""
    for status, why in (("stopped by ASHA", "a seed stopped by ASHA (trailing at a rung)"),
                        ("failed", "a seed failed"), ("interrupted", "a seed interrupted"),
                        ("not started", "a seed not started"), ("stopped", "a seed stopped")):
        if any(t["status"] == status for t in trials):
            return why
    if any("score" not in t for t in trials):
        return "a seed not scored"
    return ""


def rank_settings(trials: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None, str]:
    """The settings (ranked ones first, best first), the best one's label (None unless it is separated
    from the rest) and a line saying why."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for t in trials:
        groups.setdefault(" ".join(t["settings"]) or "(the config)", []).append(t)
    out = []
    for label, ts in groups.items():
        s: dict[str, Any] = {"setting": label, "trials": [t["name"] for t in ts],
                             "seeds": [t["seed"] for t in ts], "rank": None, "unranked": _why_unranked(ts)}
        scored = [t["score"] for t in ts if "score" in t]
        if len(scored) == len(ts) and len(ts) > 1:
            s["la"], s["ci_low"], s["ci_high"] = across_seeds([x["la"] for x in scored])
            s["ci"] = f"across {len(ts)} seeds"
        elif len(scored) == len(ts):
            s["la"], s["ci_low"], s["ci_high"] = (scored[0][k] for k in ("la", "ci_low", "ci_high"))
            s["ci"] = "over the deals (one seed: no CI across seeds)"
        out.append(s)
    ranked = sorted((s for s in out if not s["unranked"]), key=lambda s: -s["la"])
    for i, s in enumerate(ranked):
        s["rank"] = i + 1
    rest = [s for s in out if s["unranked"]]
    if len(ranked) < 2:
        return ranked + rest, None, f"{len(ranked)} setting(s) ranked: no best among fewer than two"
    top, others = ranked[0], ranked[1:]
    if top["ci_low"] > max(s["ci_high"] for s in others):
        return ranked + rest, top["setting"], f"{top['setting']}: its 95% CI lies above every other setting's"
    return ranked + rest, None, ("no setting is separated from the rest: the top one's 95% CI overlaps"
                                 " another's")


def _la(s: dict[str, Any]) -> str:
    return f"{s['la']:+.3f} [{s['ci_low']:+.3f}, {s['ci_high']:+.3f}]" if "la" in s else "-"


SETTINGS_HEAD = ["rank", "setting", "seeds", "lá/game [95% CI]", "CI", "trials"]
TRIALS_HEAD = ["trial", "setting and seed", "minutes", "decisions trained", "lá/game [95% CI]", "win rate",
               "end"]


def settings_rows(doc: dict[str, Any]) -> list[list[str]]:
    """The settings table (:data:`SETTINGS_HEAD`), ranked ones first."""
    return [[str(s["rank"] or "-"), s["setting"], ",".join(map(str, s["seeds"])), _la(s),
             s.get("ci", "-") if s["rank"] else f"not ranked: {s['unranked']}", " ".join(s["trials"])]
            for s in doc["settings"]]


def trial_rows(doc: dict[str, Any]) -> list[list[str]]:
    """The trials table (:data:`TRIALS_HEAD`), in trial order."""
    rows = []
    for t in doc["trials"]:
        used, s = t.get("budget_used"), t.get("score")
        end = t["status"] + (f": {t['stop_reason']}" if t["stop_reason"] else "")
        rows.append([t["name"], t["label"], f"{used['minutes']:.2f}" if used else "-",
                     f"{used['decisions_trained']:,}" if used else "-", _la(s) if s else "-",
                     f"{100 * s['win_rate']:.1f}%" if s else "-", end])
    return rows


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def markdown(doc: dict[str, Any]) -> str:
    """``sweep.md``: what was compared, the settings ranked, the verdict, then every trial."""
    budget = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v:g}" for k, v in doc["budget"].items())
    head = (f"# {doc['command'] or 'samloc sweep'}\n\n{len(doc['trials'])} trials ({budget} each),"
            f" scored against the {doc['opponent']} on the same {doc['deals']} duplicate deals"
            f" (seed {doc['eval_seed']}), {doc['players']} players.\n\n")
    if doc.get("interrupted"):
        head += ("**Interrupted**: the unfinished trials are marked; nothing was scored or ranked"
                 f" (continue: `samloc sweep --resume {doc['out']}`).\n\n")
    lines = ["## Settings", "", *_table(SETTINGS_HEAD, settings_rows(doc)), "",
             f"Best: {doc['best'] or 'none named'} ({doc['best_note']})", "", "## Trials", "",
             *_table(TRIALS_HEAD, trial_rows(doc))]
    return head + "\n".join(lines) + "\n"


def plot(doc: dict[str, Any], path: Path) -> Path:
    """Each setting's mean over its seeds with its 95% CI (ranked ones, best at the top), each seed's lá a
    dot beside it."""
    import matplotlib  # optional, and slow to import: only when a plot is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [s for s in doc["settings"] if "la" in s][::-1]
    scores = {t["name"]: t["score"]["la"] for t in doc["trials"] if "score" in t}
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.35 * max(1, len(shown))))
    for y, s in enumerate(shown):
        colour = "C0" if s["rank"] else "0.6"
        ax.errorbar([s["la"]], [y], xerr=[[s["la"] - s["ci_low"]], [s["ci_high"] - s["la"]]], fmt="o",
                    capsize=3, color=colour)
        ax.plot([scores[n] for n in s["trials"] if n in scores], [y] * len(s["trials"]), "x", color=colour,
                alpha=0.6)
    ax.set_yticks(range(len(shown)), [f"{s['rank'] or '-'}: {s['setting']}"[:60] for s in shown], fontsize=7)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel(f"mean lá per game vs {doc['opponent']} over seeds (95% CI; x: each seed),"
                  f" {doc['deals']} duplicate deals")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    write_with(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    return path
