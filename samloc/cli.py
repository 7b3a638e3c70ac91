"""The ``samloc`` command: sets the process's thread environment, then runs one subcommand.

Each subcommand is a module of :mod:`samloc.commands` with a ``main(argv) -> int``,
imported only when asked for, so ``samloc replay`` never imports torch or ray.
Usage errors exit 2; a bad record exits 1.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

# name → one-line help; the module is samloc.commands.<name>.
SUBCOMMANDS: dict[str, str] = {
    "replay": "replay samloc/1 records and report results or legal moves",
    "rules": "list the rule presets, or show one as YAML",
    "bench": "throughput: engine, environments; --agent matches; --learner, --rollout, --search training",
    "demo": "simulate random games, write their records and replay them",
    "eval": "duplicate-deal evaluation of an agent against opponents",
    "league": "every pair of agents on duplicate deals: ratings on the lá scale",
    "train": "self-play training on Ray",
    "exploit": "train a best response to a frozen agent: how exploitable it is",
    "belief": "learn where the unseen cards are, for a checkpoint's play-time search",
    "export": "export a checkpoint's policy to ONNX",
    "serve": "serve a bot over HTTP (PROTOCOL §4) with a page to play it",
    "seeds": "a config's runs over several seeds: mean and spread of their evaluations",
    "sweep": "a grid or random search of config values over seeds, on Ray Tune, scored on the same deals",
}

#: The name this project installs under (pyproject.toml's; PyPI's `samloc` is another author's package).
DISTRIBUTION = "samloc-engine"
#: The extra of pyproject.toml that installs each optional module a command imports (safetensors, in both
#: train and serve, is :func:`missing_extra`'s to choose).
EXTRA_OF = {"torch": "train", "ray": "train", "omegaconf": "train", "tensorboard": "train",
            "matplotlib": "train", "fastapi": "serve", "uvicorn": "serve", "pydantic": "serve",
            "h11": "serve", "onnx": "serve", "onnxruntime": "serve", "httpx": "serve", "gymnasium": "rl",
            "pettingzoo": "rl", "stable_baselines3": "sb3", "sb3_contrib": "sb3"}
#: One thread per process unless the user says otherwise: several torch/numba processes on few cores
#: starve each other otherwise.  Set here, once, before any command imports torch or numba; child
#: processes (Ray workers, evaluation pools) inherit it.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _usage() -> str:
    lines = ["usage: samloc COMMAND [options]   (samloc COMMAND --help for its options)", "", "commands:"]
    lines += [f"  {name:<8} {text}" for name, text in SUBCOMMANDS.items()]
    return "\n".join(lines)


def missing_extra(command: str, exc: ModuleNotFoundError) -> str:
    """The one line for a command whose optional dependency is not installed: the module, and the pip
    command that installs the extra holding it."""
    module = (exc.name or "").split(".")[0]
    if module == "safetensors":
        extra = "serve" if command == "serve" else "train"
    else:
        extra = EXTRA_OF.get(module, "")
    if not extra:
        return f"samloc {command}: not available ({exc})"
    return f"samloc {command}: needs {module}, which is not installed: pip install '{DISTRIBUTION}[{extra}]'"


def unavailable(command: str, module: str, why: str) -> str | None:
    """:func:`missing_extra`'s line, with ``why`` the command needs it, when ``module`` is not installed
    (checked before any work, so that nothing is played and then lost); None when it is."""
    if importlib.util.find_spec(module) is not None:
        return None
    return missing_extra(command, ModuleNotFoundError(module, name=module)) + f" ({why})"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if args else 2
    name = args[0]
    if name not in SUBCOMMANDS:
        print(f"samloc: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    for key, value in THREAD_ENV.items():
        os.environ.setdefault(key, value)
    try:
        module = importlib.import_module(f"samloc.commands.{name}")
    except ModuleNotFoundError as exc:   # an optional extra that is not installed (torch, ray, fastapi …)
        print(missing_extra(name, exc), file=sys.stderr)
        return 2
    try:
        return int(module.main(args[1:]) or 0)
    except KeyboardInterrupt:
        print(f"samloc {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
