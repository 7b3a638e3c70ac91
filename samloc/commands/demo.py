"""``samloc demo``: deal and play random games, save their records, replay them.

A quick end-to-end look at the engine: every game is written as a samloc/1
JSON Lines record and replayed, and the replay must agree with the play.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sam_env.roundtrip import roundtrip
from sam_env.rules import DEFAULT_PRESET, RuleSet, RulesError

from .args import Parser, parse


def parser() -> Parser:
    ap = Parser(prog="samloc demo", description=__doc__)
    ap.add_argument("--rules", default=DEFAULT_PRESET)
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/demo/games.jsonl", help="where the records go")
    return ap


def main(argv: list[str]) -> int:
    args = parse(parser(), argv)
    if isinstance(args, int):
        return args
    try:
        rules = RuleSet.parse(args.rules)
        rules.check_players(args.players)
    except RulesError as exc:
        print(f"samloc demo: {exc}", file=sys.stderr)
        return 2
    r = roundtrip(rules, args.players, args.games, args.seed, Path(args.out))
    print(f"played {r.games} random games ({rules.name}, {args.players} players) in {r.play_seconds:.1f} s;"
          f" ends: {r.ends}")
    print(f"wrote {r.records}; replayed them in {r.replay_seconds:.1f} s ({r.games / r.replay_seconds:.0f} records/s),"
          f" {r.mismatches} disagreements")
    print(json.dumps({"games": r.games, "replay_mismatches": r.mismatches, "records": str(r.records)}))
    return 1 if r.mismatches else 0
