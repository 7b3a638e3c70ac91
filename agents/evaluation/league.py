"""A league (``samloc league``): every ordered pair of agents on duplicate deals, one rating each.

Each ordered pair (A, B) is one :func:`agents.evaluation.evaluate.evaluate` run (A in one seat,
B in the others, A's seat rotated), all pairs on the same deals of ``--seed``; the
ratings, their bootstrap intervals and the model's misfits are :func:`agents.evaluation.ratings.rate`'s.
A run folder among the agents stands for its last checkpoint (the bot it made), or with
``all_checkpoints`` for every checkpoint it kept, oldest first, so that a league of one run shows how its
training went (``ratings.png``: rating against decisions trained).  The plot names each agent by the
shortest end of its path that no other agent's shares, so that long paths fit.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from sam_env.table import Table

from .eval_report import save_png, write_folder
from .evaluate import evaluate
from ..nets.format import META_FILE, CheckpointError, list_checkpoints, read_metadata, resolve, verify
from .ratings import MISFIT_Z, rate
from ..registry import parse_spec


@dataclass(frozen=True)
class Entry:
    """One agent of the league: its ``name`` in the reports, the ``spec`` that builds it, the
    run folder it came from (a run given as an agent) and its checkpoint's decisions trained."""

    name: str
    spec: str
    run: str | None = None
    decisions_trained: int | None = None


def _is_run(path: str) -> bool:
    p = Path(path)
    return p.is_dir() and not (p / META_FILE).exists() and (p / "checkpoints").is_dir()


def _run_entries(run: str, all_checkpoints: bool, warn: Callable[[str], None] | None) -> list[Entry]:
    """A run folder's checkpoints that verify, in training order: every one, or only the newest (a newer
    one that does not verify is skipped, ``warn`` hears of it)."""
    out: list[Entry] = []
    for ck in (list_checkpoints(run) if all_checkpoints else reversed(list_checkpoints(run))):
        try:
            meta = verify(ck)
        except CheckpointError as exc:
            if warn is not None:
                warn(f"skipping bad checkpoint: {exc}")
            continue
        out.append(Entry(str(ck), str(ck), run, meta.decisions_trained))
        if not all_checkpoints:
            break
    if not out:
        raise ValueError(f"{run}: no usable checkpoint in this run folder")
    return out


def expand(specs: Sequence[str], warn: Callable[[str], None] | None = None,
           all_checkpoints: bool = False) -> list[Entry]:
    """The league's agents: each spec checked (:func:`agents.registry.parse_spec`), a run folder
    replaced by its last checkpoint, or by every one it kept in training order with ``all_checkpoints``
    (a checkpoint that does not verify is skipped, ``warn`` hears of it).  ValueError (one line) for a
    bad spec, a run without a usable checkpoint, or an agent listed twice."""
    out: list[Entry] = []
    for raw in specs:
        s = raw.strip()
        if _is_run(s):
            out += _run_entries(os.path.normpath(s), all_checkpoints, warn)
            continue
        p = parse_spec(s)
        name, decisions = s, None
        if p.kind in ("checkpoint", "search"):
            folder = os.path.normpath(p.target)
            name = folder + ("+search" + p.option if p.kind == "search" else "")
            decisions = read_metadata(resolve(folder)).decisions_trained
        elif p.kind == "onnx":
            name = os.path.normpath(p.target)
        out.append(Entry(name, s, None, decisions))
    seen: set[str] = set()
    for e in out:
        if e.name in seen:
            raise ValueError(f"{e.name} is in the league twice (each agent once)")
        seen.add(e.name)
    if len(out) < 2:
        raise ValueError(f"a league needs at least two agents, not {len(out)}")
    return out


def play(entries: Sequence[Entry], table: Table, deals: int, seed: int,
         progress: Callable[[int, str], None] | None = None) -> tuple[list[tuple[int, int]], list[dict]]:
    """Every ordered pair's :func:`evaluate` result (with its ``deal_scores``), on the same deals;
    ``progress(deals done in all, pair)``."""
    pairs = [(i, j) for i in range(len(entries)) for j in range(len(entries)) if i != j]
    results = []
    for k, (i, j) in enumerate(pairs):
        what = f"{entries[i].name} vs {entries[j].name}"
        step = None if progress is None else (lambda d, _t, k=k, what=what: progress(k * deals + d, what))
        results.append(evaluate(entries[i].spec, entries[j].spec, table, deals, seed, progress=step,
                                deal_scores=True))
        if progress is not None:
            progress((k + 1) * deals, what)
    return pairs, results


def rate_league(entries: Sequence[Entry], table: Table, deals: int, seed: int, *, pin: str,
                reps: int = 1000, progress: Callable[[int, str], None] | None = None
                ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Every pair played at ``table`` (:func:`play`) and one rating per agent fitted
    (:func:`agents.evaluation.ratings.rate`, ``pin`` rated 0, ``reps`` bootstrap resamples): the fit, and
    each pair's result by ``A vs B`` (without its score histogram)."""
    names = [e.name for e in entries]
    pairs, results = play(entries, table, deals, seed, progress)
    deal_scores = np.array([r.pop("deal_scores") for r in results])
    fitted = rate(names, pairs, deal_scores, pin=names.index(pin), reps=reps, seed=seed)
    return fitted, {f"{names[i]} vs {names[j]}": {k: v for k, v in r.items() if k != "score_hist"}
                    for (i, j), r in zip(pairs, results)}


# ---- reports -----------------------------------------------------------------------------------
def _fmt(x: float) -> str:
    return f"{x:+.2f}"


def _markdown(res: dict[str, Any]) -> str:
    names = [a["name"] for a in res["agents"]]
    rt = res["ratings"]
    order = sorted(names, key=lambda n: -rt[n]["rating"])
    dec = {a["name"]: a["decisions_trained"] for a in res["agents"]}
    p = res["players"]
    lines = [f"# League: {res['table']}, {res['deals']} deals, seed {res['seed']}", "",
             f"Command: `{res['command']}`", "",
             f"Every ordered pair (A, B) played the same {res['deals']} duplicate deals, A in one seat and B "
             f"in the other {p - 1} (A's seat rotated); score(A vs B) is A's mean lá per game.  Model: "
             "score(A vs B) ≈ r_A − r_B for both directions, "
             "so r_A − r_B is the mean of what one A wins "
             f"at a table of {p - 1} × B and what one B loses at a table of {p - 1} × A; fitted to those "
             f"means by least squares weighted by their variances, `{res['pin']}` pinned at 0; 95% intervals "
             f"from {res['bootstrap']['reps']} bootstrap resamples of the deals.", "",
             "| rank | agent | rating (lá per game) | 95% CI | decisions trained |", "|---|---|---|---|---|"]
    for k, n in enumerate(order, 1):
        d = dec[n]
        lines.append(f"| {k} | {n} | {_fmt(rt[n]['rating'])} | [{_fmt(rt[n]['ci95'][0])}, "
                     f"{_fmt(rt[n]['ci95'][1])}] | {'' if d is None else f'{d:,}'} |")
    cell = {(q["agent"], q["opponents"]): q for q in res["pairs"]}
    lines += ["", f"## Pairs: score(row alone vs {p - 1} × column), lá per game "
              "(r_row − r_column in brackets)", "",
              "| alone \\ table | " + " | ".join(order) + " |", "|---" * (len(order) + 1) + "|"]
    for a in order:
        row = [f"{_fmt(cell[a, b]['score'])} ({_fmt(cell[a, b]['predicted'])})" if (a, b) in cell else "—"
               for b in order]
        lines.append(f"| {a} | " + " | ".join(row) + " |")
    f = res["fit"]
    lines += ["", "## Where the model does not fit", "",
              "The matchup score of A and B is (score(A vs B) − score(B vs A)) / 2, what the model fits; "
              f"χ² {f['chi2']} on {f['dof']} degrees of freedom ({f['chi2_per_dof']} per degree: "
              "about 1 when the ratings explain every matchup to within its noise).", ""]
    if res["misfits"]:
        lines += [f"Matchups more than {MISFIT_Z:g} standard errors from r_A − r_B:", "",
                  "| A | B | matchup score | r_A − r_B | residual | z |", "|---|---|---|---|---|---|"]
        lines += [f"| {q['a']} | {q['b']} | {_fmt(q['score'])} | {_fmt(q['predicted'])} "
                  f"| {_fmt(q['residual'])} | {q['z']:+.1f} |" for q in res["misfits"]]
    else:
        lines.append(f"No matchup is more than {MISFIT_Z:g} standard errors from r_A − r_B.")
    cycles = "; ".join(" > ".join(c + c[:1]) for c in res["cycles"]) or "none"
    lines += ["", f"Cycles (A beats B beats C beats A, each matchup significantly): {cycles}.", "",
              "## One seat against the table, both ways", "",
              "The model makes score(B vs A) = −score(A vs B); the sum is what it leaves out.  "
              "k = −score(B vs A) / score(A vs B) (A the higher rated): what one B loses at a table of A's "
              f"for each lá one A wins at a table of B's.  Pooled: k = {res['lone_seat_k']}.", "",
              "| A | B | A alone | B alone | sum (se) | k |", "|---|---|---|---|---|---|"]
    for q in res["matchups"]:
        if q["sum"] is None:
            continue
        k = "" if q["k"] is None else f"{q['k']:.2f}"
        lines.append(f"| {q['a']} | {q['b']} | {_fmt(q['a_alone'])} | {_fmt(q['b_alone'])} "
                     f"| {_fmt(q['sum'])} ({q['sum_se']:.2f}) | {k} |")
    off = [a["name"] for a in res["agents"] if a["out_of_distribution"]]
    if off:
        lines += ["", "Out of training distribution at this table: " + ", ".join(off) + "."]
    lines += ["", "![ratings](ratings.png)", ""]
    return "\n".join(lines) + "\n"


def short_names(names: Sequence[str]) -> dict[str, str]:
    """Each name as the shortest end of its path (``runs/a/checkpoints/ckpt_9`` → ``ckpt_9``) that is no
    other name's end of as many parts; every name whole when that still leaves two the same."""
    parts = {n: n.replace(os.sep, "/").rstrip("/").split("/") for n in names}

    def end(n: str, k: int) -> str:
        return "/".join(parts[n][-k:])

    out = {}
    for n in names:
        k = 1
        while k < len(parts[n]) and any(end(m, k) == end(n, k) for m in names if m != n):
            k += 1
        out[n] = end(n, k)
    return out if len(set(out.values())) == len(out) else {n: n for n in names}


def _plot(res: dict[str, Any], path: Path) -> None:
    save_png(_figure(res), path)


def _figure(res: dict[str, Any]) -> Any:
    """``ratings.png``'s figure: rating against decisions trained for networks (one line per run), a band
    per agent that is not one; agents named by :func:`short_names`."""
    import matplotlib  # optional (the train extra), and slow to import: only when a report is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rt = res["ratings"]
    short = short_names([a["name"] for a in res["agents"]]
                        + sorted({a["run"] for a in res["agents"] if a["run"]}))
    nets = [a for a in res["agents"] if a["decisions_trained"] is not None]
    fig, ax = plt.subplots(figsize=(8, 4.8))
    if nets:
        series: dict[str, list[dict]] = {}
        for a in nets:
            series.setdefault(a["run"] or a["name"], []).append(a)
        for label, items in series.items():
            xs = np.array([a["decisions_trained"] for a in items]) / 1e6
            ys = np.array([rt[a["name"]]["rating"] for a in items])
            err = np.array([[y - rt[a["name"]]["ci95"][0], rt[a["name"]]["ci95"][1] - y]
                            for a, y in zip(items, ys)]).T
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=short[label])
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for k, a in enumerate(x for x in res["agents"] if x["decisions_trained"] is None):
            c = colors[(len(series) + k) % len(colors)]
            r = rt[a["name"]]
            ax.axhline(r["rating"], color=c, ls="--", lw=1, label=f"{short[a['name']]} {r['rating']:+.2f}")
            ax.axhspan(r["ci95"][0], r["ci95"][1], color=c, alpha=0.12)
        ax.set_xlim(left=0)
        ax.set_xlabel("decisions trained (millions)")
        ax.set_ylabel("rating (lá per game)")
    else:
        order = sorted(rt, key=lambda n: rt[n]["rating"])
        ys = np.arange(len(order))
        xs = np.array([rt[n]["rating"] for n in order])
        err = np.array([[x - rt[n]["ci95"][0], rt[n]["ci95"][1] - x] for n, x in zip(order, xs)]).T
        ax.errorbar(xs, ys, xerr=err, fmt="o", capsize=3)
        ax.set_yticks(ys, [short[n] for n in order])
        ax.set_xlabel("rating (lá per game)")
    pin = short.get(res["pin"], res["pin"])
    ax.set_title(textwrap.fill(f"League ratings, {res['table']} ({res['deals']} deals, {pin} = 0,"
                               " 95% intervals)", 70), fontsize=10)
    if nets:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def write_report(res: dict[str, Any], out_dir: str | Path) -> Path:
    """``league.json``, ``league.md`` and ``ratings.png`` in ``out_dir``."""
    return write_folder(out_dir, res, "league.json", ("league.md", _markdown), ("ratings.png", _plot))
