"""Every round of an expert-iteration run, measured as docs/training.md asks: is the new policy better, and
not only against the heuristic it mostly trained on?

    python -m scripts.expert_rounds runs/expert__0__20261202-004247 [--reference checkpoints/standard] \
        [--rules hoi_quan_bai --players 4 --deals 10000 --seed 12345] [--search-deals 0 [--workers 1]] \
        [--json OUT]

The rounds are the run's metadata (``distill.rounds``: the update at which each began); round 0 is the
network the run started from (``init_from``), round k the checkpoint written as it began, and the run's
newest checkpoint is a last row when it is not a round's first.  Each row is that network's lá per game
on the same duplicate deals against ``heuristic``, ``heuristic:greedy``, ``random``, the previous row's
network and ``--reference`` (each with its 95% CI); ``--search-deals N`` adds the network with play-time
search against ``heuristic`` (N deals: the search is about a thousand times dearer; ``--workers``
plays them in that many processes, with the same result).  Prints a Markdown
table; ``--json`` also writes every result.  Exit 2 on a folder that is not such a run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agents.evaluation.evaluate import evaluate
from agents.nets.format import latest_good, list_checkpoints, read_json_file
from sam_env.atomic import write_with
from sam_env.rules import DEFAULT_PRESET, RuleSet
from sam_env.table import Table

FIXED = ("heuristic", "heuristic:greedy", "random")


def round_networks(run: Path) -> list[tuple[str, str]]:
    """``(label, checkpoint)`` of every round's first network and of the run's newest checkpoint."""
    ckpts = list_checkpoints(run)
    if not ckpts:
        raise ValueError(f"{run}: no checkpoints (not a run folder, or nothing saved yet)")
    latest = latest_good(run, trainer=False)  # verified before its metadata is believed
    newest = read_json_file(latest / "metadata.json")
    stage = newest.get("distill")
    if not isinstance(stage, dict) or not stage.get("rounds"):
        raise ValueError(f"{run}: not an expert-iteration run (its metadata has no distill rounds)")
    start = (newest.get("config") or {}).get("init_from")
    if not start:
        raise ValueError(f"{run}: the run has no init_from, so round 0 has no network to measure")
    by_update = {int(p.name.removeprefix("ckpt_")): p for p in ckpts}
    out = [("round 0 (init_from)", str(start))]
    for r in stage["rounds"][1:]:
        path = by_update.get(int(r["updates"]))
        if path is None:
            raise ValueError(f"{run}: round {r['round']}'s checkpoint (update {r['updates']}) is gone"
                             " (checkpoint.keep too small?)")
        out.append((f"round {r['round']} (update {r['updates']})", str(path)))
    if int(newest["updates"]) != int(stage["rounds"][-1]["updates"]):
        out.append((f"update {newest['updates']} (newest)", str(latest)))
    return out


def measure(nets: list[tuple[str, str]], reference: str, rules: RuleSet, players: int, deals: int, seed: int,
            search_deals: int, log: Any = print, workers: int = 1) -> list[dict[str, Any]]:
    """Each network's results by column (``previous``, ``reference``; none against itself)."""
    rows = []
    for i, (label, net) in enumerate(nets):
        opps = [(o, o) for o in FIXED] + ([("previous", nets[i - 1][1])] if i else [])
        opps.append(("reference", reference))
        res: dict[str, Any] = {}
        played: dict[str, Any] = {}  # the previous round may be the reference: one evaluation
        for key, opp in opps:
            if Path(opp).resolve() == Path(net).resolve():
                continue
            if opp not in played:
                played[opp] = evaluate(net, opp, Table(rules, players), deals, seed)
            res[key] = played[opp]
            log(f"{label} vs {key}: {res[key]['mean_score']:+.3f}")
        if search_deals:
            res["search"] = evaluate(f"{net}+search", "heuristic", Table(rules, players), search_deals, seed,
                                     workers=workers)
            log(f"{label}+search vs heuristic: {res['search']['mean_score']:+.3f}")
        rows.append({"label": label, "network": net, "results": res})
    return rows


def _cell(res: dict[str, Any] | None) -> str:
    if res is None:
        return "—"
    lo, hi = res["ci95"]
    return f"{res['mean_score']:+.2f} ({lo:+.2f} … {hi:+.2f})"


def table(rows: list[dict[str, Any]], reference: str, search: bool) -> str:
    cols = [*FIXED, "previous", "reference"] + (["search"] if search else [])
    head = ["network", *(f"vs {c}" for c in [*FIXED, "previous", reference])] + (
        ["+search vs heuristic"] if search else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        lines.append("| " + " | ".join([r["label"], *(_cell(r["results"].get(c)) for c in cols)]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--reference", default="checkpoints/standard", help="a fixed bot every round meets")
    ap.add_argument("--rules", default=DEFAULT_PRESET)
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--deals", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--search-deals", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1, help="processes for the search's deals (one per core)")
    ap.add_argument("--json", type=Path, help="write every result here")
    a = ap.parse_args(argv)
    try:
        nets = round_networks(a.run)
        rows = measure(nets, a.reference, RuleSet.parse(a.rules), a.players, a.deals, a.seed, a.search_deals,
                       log=lambda m: print(m, file=sys.stderr), workers=a.workers)
    except (OSError, ValueError) as exc:
        print(f"expert_rounds: {exc}", file=sys.stderr)
        return 2
    print(table(rows, a.reference, bool(a.search_deals)))
    if a.json:
        write_with(a.json, lambda f: f.write(json.dumps(rows, indent=1).encode()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
