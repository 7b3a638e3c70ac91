"""The ``samloc`` command.

Each subcommand lives in its own module, in the layer it belongs to, with a
``main(argv) -> int``; this file only dispatches, so ``samloc replay`` never
imports torch or ray.
Usage errors exit 2; a bad record exits 1.
"""

from __future__ import annotations

import importlib
import sys

# name → (module, one-line help).  Modules import lazily.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("sam_env.replay_cli", "replay samloc/1 records and report results or legal moves"),
    "rules": ("sam_env.rules_cli", "list the rule presets, or show one as YAML"),
    "bench": ("sam_env.bench", "throughput: engine, environments; --agent matches; --learner, --rollout, --search training"),
    "demo": ("sam_env.demo", "simulate random games, write their records and replay them"),
    "eval": ("agents.evaluate", "duplicate-deal evaluation of an agent against opponents"),
    "league": ("agents.league", "every pair of agents on duplicate deals: ratings on the lá scale"),
    "train": ("training.cli", "self-play training on Ray"),
    "exploit": ("training.exploit", "train a best response to a frozen agent: how exploitable it is"),
    "belief": ("training.belief", "learn where the unseen cards are, for a checkpoint's play-time search"),
    "export": ("agents.export", "export a checkpoint's policy to ONNX"),
    "serve": ("agents.server", "serve a bot over HTTP (PROTOCOL §4) with a page to play it"),
}


#: ``samloc bench`` options measured by the layer above the engine's (``sam_env.bench`` takes the rest).
BENCH_BY_OPTION = {"--learner": "training.bench", "--rollout": "training.bench", "--search": "training.bench",
                   "--agent": "agents.bench"}


def _module(name: str, args: list[str]) -> str:
    if name == "bench":
        for a in args:
            opt = a.split("=", 1)[0]
            if opt in BENCH_BY_OPTION:
                return BENCH_BY_OPTION[opt]
    return SUBCOMMANDS[name][0]


def _usage() -> str:
    lines = ["usage: samloc COMMAND [options]   (samloc COMMAND --help for its options)", "", "commands:"]
    for name, (_, text) in SUBCOMMANDS.items():
        lines.append(f"  {name:<8} {text}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    name = args[0]
    if name not in SUBCOMMANDS:
        print(f"samloc: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name = _module(name, args[1:])
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        print(f"samloc {name}: not available ({exc})", file=sys.stderr)
        return 2
    try:
        return int(module.main(args[1:]) or 0)
    except KeyboardInterrupt:
        print(f"samloc {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
