"""``samloc demo``: deal and play random games, save their records, replay them.

A quick end-to-end look at the engine: every game is written as a samloc/1
JSON Lines record and replayed, and the replay must agree with the play.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sam_env.atomic import UnsafeTarget, check_target
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.roundtrip import roundtrip
from sam_env.rules import DEFAULT_PRESET, RulesError

from .args import Parser, command, fail, non_negative, nonempty, path, players, positive, table

#: What each way a game ends (a record's ``result.end``, RULES.md) means, as the summary explains it.
ENDS = {"won": "a seat played out its hand",
        "instant_win": "a dealt hand won at once",
        "sam_success": "a Sâm was declared and played out",
        "sam_failed": "a Sâm was declared and blocked",
        "draw": "no seat could lead"}


def parser() -> Parser:
    ap = Parser(prog="samloc demo", description=__doc__.replace("``", ""))
    ap.add_argument("--rules", type=nonempty, default=DEFAULT_PRESET,
                    help=f"the rule preset (default {DEFAULT_PRESET})")
    ap.add_argument("--players", type=players, default=DEFAULT_PLAYERS,
                    help=f"players at the table (default {DEFAULT_PLAYERS})")
    ap.add_argument("--games", type=positive, default=1000, help="games to play (default 1000)")
    ap.add_argument("--seed", type=non_negative, default=0,
                    help="seed of the deals and the moves (default 0)")
    ap.add_argument("--out", type=path, default="runs/demo/games.jsonl",
                    help="where the records go (JSON Lines;"
                         " default runs/demo/games.jsonl)")
    return ap


def ends_text(ends: dict[str, int]) -> str:
    """How the games ended, most often first, each end named and explained."""
    return "; ".join(f"{n} {end} ({ENDS.get(end, 'see RULES.md')})"
                     for end, n in sorted(ends.items(), key=lambda kv: (-kv[1], kv[0])))


@command(parser)
def main(args: argparse.Namespace) -> int:
    try:
        t = table(args.rules, args.players)
        check_target(args.out)  # before the games are played
    except (RulesError, UnsafeTarget) as exc:
        return fail("samloc demo", exc)
    r = roundtrip(t.rules, t.players, args.games, args.seed, Path(args.out))
    print(f"played {r.games} random games ({t.rules.name}, {t.players} players) in {r.play_seconds:.1f} s")
    blocked = max(r.ends, key=r.ends.__getitem__) == "sam_failed"
    print(f"how they ended: {ends_text(r.ends)}" + ("; random players declare Sâm at half their chances,"
                                                   " so most games end in a blocked Sâm" if blocked else ""))
    print(f"wrote {r.records}; replayed them in {r.replay_seconds:.1f} s"
          f" ({r.games / max(r.replay_seconds, 1e-9):.0f} records/s), {r.mismatches} disagreements")
    print(json.dumps({"games": r.games, "ends": r.ends, "replay_mismatches": r.mismatches,
                      "records": str(r.records)}))
    return 1 if r.mismatches else 0
