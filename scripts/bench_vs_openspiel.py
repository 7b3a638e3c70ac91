"""The batched environment against OpenSpiel's C++ Dou Dizhu, decisions per second on one core.

    python scripts/bench_vs_openspiel.py [--rounds 3] [--seconds 5] [--samloc .venv/bin/samloc]

Run by ``scripts/bench_vs_openspiel.sh`` with the Python of OpenSpiel's own venv.  Each round runs,
one after the other and each pinned to core 0 (``taskset -c 0``):

* OpenSpiel: whole games of ``dou_dizhu`` between C++ uniform random bots
  (``pyspiel.make_uniform_random_bot``) through ``pyspiel.evaluate_bots``, for ``--seconds``;
  decisions/s = games/s × the mean decisions per game, counted (chance nodes excluded) on
  ``--sample`` games of uniform random play from Python, outside the timed part;
* ``samloc bench --env --num-envs 1024 --json``: its ``steps_per_s`` (one decision per step).

Prints each round's pair and ratio (samloc / OpenSpiel); the last line is JSON with the median ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIN = ["taskset", "-c", "0"]


def openspiel_rate(seconds: float, sample: int, seed: int) -> dict:
    """OpenSpiel's C++ Dou Dizhu with uniform random bots: games/s, decisions per game, decisions/s."""
    import pyspiel  # only in OpenSpiel's venv: this function runs there

    game = pyspiel.load_game("dou_dizhu")
    bots = [pyspiel.make_uniform_random_bot(p, seed + p) for p in range(game.num_players())]
    pyspiel.evaluate_bots(game.new_initial_state(), bots, seed)  # warm up
    games, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pyspiel.evaluate_bots(game.new_initial_state(), bots, seed + games)
        games += 1
    dt = time.perf_counter() - t0
    rng, decisions = random.Random(seed), 0
    for _ in range(sample):
        state = game.new_initial_state()
        while not state.is_terminal():
            if state.is_chance_node():
                actions, probs = zip(*state.chance_outcomes())
                state.apply_action(rng.choices(actions, probs)[0])
            else:
                decisions += 1
                state.apply_action(rng.choice(state.legal_actions()))
    per_game = decisions / sample
    return {"games": games, "seconds": round(dt, 3), "decisions_per_game": round(per_game, 2),
            "decisions_per_s": round(games / dt * per_game)}


def last_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="OpenSpiel / samloc pairs, alternated")
    ap.add_argument("--seconds", type=float, default=5.0, help="OpenSpiel's timed play per round")
    ap.add_argument("--sample", type=int, default=1000,
                    help="games played from Python to count decisions per game")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samloc", default=str(ROOT / ".venv/bin/samloc"), help="the samloc command to measure")
    ap.add_argument("--openspiel-only", action="store_true",
                    help="measure OpenSpiel once here; print its JSON")
    args = ap.parse_args()
    if args.openspiel_only:
        print(json.dumps(openspiel_rate(args.seconds, args.sample, args.seed)))
        return 0
    if args.rounds < 1 or args.seconds <= 0 or args.sample < 1:
        ap.error("--rounds, --seconds and --sample must be positive")
    load_before = Path("/proc/loadavg").read_text().split()[0]
    own = [sys.executable, str(Path(__file__).resolve()), "--openspiel-only", "--seconds", str(args.seconds),
           "--sample", str(args.sample)]
    rounds = []
    for i in range(args.rounds):
        ospiel = last_json(PIN + own + ["--seed", str(args.seed + i)])
        sam = last_json(PIN + [args.samloc, "bench", "--env", "--num-envs", "1024", "--json"])
        ratio = sam["steps_per_s"] / ospiel["decisions_per_s"]
        rounds.append({"openspiel": ospiel, "samloc": sam, "ratio": round(ratio, 3)})
        print(f"round {i + 1}: OpenSpiel {ospiel['decisions_per_s']:,} decisions/s"
              f" ({ospiel['decisions_per_game']} per game), samloc {sam['steps_per_s']:,} decisions/s,"
              f" ratio {ratio:.3f}", flush=True)
    median = statistics.median(r["ratio"] for r in rounds)
    load_after = Path("/proc/loadavg").read_text().split()[0]
    print(f"median ratio samloc / OpenSpiel: {median:.3f}"
          f" (1-minute load {load_before} before, {load_after} after)")
    print(json.dumps({"ratio_median": median, "load_before": float(load_before),
                      "load_after": float(load_after), "rounds": rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
