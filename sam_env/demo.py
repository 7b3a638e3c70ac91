"""``samloc demo``: deal and play random games, save their records, replay them.

A quick end-to-end look at the engine: every game is written as a samloc/1
JSON Lines record and replayed, and the replay must agree with the play.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

from .game import Game
from .record import replay_report, write_jsonl
from .rules import RuleSet, RulesError


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="samloc demo", description=__doc__)
    ap.add_argument("--rules", default="hoi_quan_bai")
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/demo/games.jsonl", help="where the records go")
    try:
        args = ap.parse_args(argv)
        rules = RuleSet.parse(args.rules)
        rules.check_players(args.players)
    except SystemExit as exc:
        return int(exc.code or 0)
    except RulesError as exc:
        print(f"samloc demo: {exc}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    records, ends = [], Counter()
    for i in range(args.games):
        g = Game.new(rules, args.players, seed=args.seed * 1_000_003 + i)
        while not g.finished:
            g.apply(rng.choice(g.legal_actions()))
        records.append(g.to_record())
        ends[g.result.end] += 1
    t_play = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(str(out), records)
    t0 = time.perf_counter()
    mismatches = sum(not replay_report(r)["ok"] for r in records)
    t_replay = time.perf_counter() - t0
    print(f"played {args.games} random games ({rules.name}, {args.players} players) in {t_play:.1f} s;"
          f" ends: {dict(ends)}")
    print(f"wrote {out}; replayed them in {t_replay:.1f} s ({args.games / t_replay:.0f} records/s),"
          f" {mismatches} disagreements")
    print(json.dumps({"games": args.games, "replay_mismatches": mismatches, "records": str(out)}))
    return 1 if mismatches else 0
