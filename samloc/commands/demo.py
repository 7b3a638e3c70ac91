"""``samloc demo``: deal and play random games, save their records, replay them.

A quick end-to-end look at the engine: every game is written as a samloc/1
JSON Lines record and replayed, and the replay must agree with the play.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sam_env.roundtrip import roundtrip
from sam_env.rules import DEFAULT_PRESET, RulesError

from .args import Parser, command, fail, table


def parser() -> Parser:
    ap = Parser(prog="samloc demo", description=__doc__)
    ap.add_argument("--rules", default=DEFAULT_PRESET)
    ap.add_argument("--players", type=int, default=4)
    ap.add_argument("--games", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/demo/games.jsonl", help="where the records go")
    return ap


@command(parser)
def main(args: argparse.Namespace) -> int:
    try:
        rules = table(args.rules, args.players)
    except RulesError as exc:
        return fail("samloc demo", exc)
    r = roundtrip(rules, args.players, args.games, args.seed, Path(args.out))
    print(f"played {r.games} random games ({rules.name}, {args.players} players) in {r.play_seconds:.1f} s;"
          f" ends: {r.ends}")
    print(f"wrote {r.records}; replayed them in {r.replay_seconds:.1f} s ({r.games / r.replay_seconds:.0f} records/s),"
          f" {r.mismatches} disagreements")
    print(json.dumps({"games": r.games, "replay_mismatches": r.mismatches, "records": str(r.records)}))
    return 1 if r.mismatches else 0
