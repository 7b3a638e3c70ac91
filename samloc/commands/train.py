"""``samloc train``: self-play training on Ray, from this machine to a cluster.

    samloc train --config configs/quick.yaml [key=value ...]
    samloc train --resume runs/quick__0__20250101-120000 [--more-minutes N] [--more-decisions N] [k=v ...]
    samloc train --config configs/cluster.yaml --ray-address HOST:6379
    samloc train --config configs/quick.yaml env.rules=mien_bac env.players=3 --print-config   (or --dry-run)
    samloc train --config configs/quick.yaml --seeds 0,1,2 [--run-dir DIR]   (then: samloc seeds RUN RUN RUN)

The budgets, total_decisions and max_minutes, count every sitting of a run together: a resume of a run
that stopped on one of them has nothing left to do (it says so and exits) unless it is given more,
--more-minutes N / --more-decisions N (N more than done so far) or max_minutes=M / total_decisions=D (in
all).  At the end the policy is evaluated (eval.final_deals duplicate deals per opponent), the report
is written next to the final checkpoint, the search's hand belief is learned when belief.deals > 0
(training/tools/belief.py), the policy is exported to ONNX in the final checkpoint (policy.onnx, as samloc
export does), curve.png is drawn in the run folder, and the paths are printed.  Ctrl-C or SIGTERM ends a
sitting the same way at the next step, with a checkpoint (a second one stops at once).  key=value may come
before or after the options.  Exit 2 on a bad config or command line, 1 when training fails.
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import sys
from pathlib import Path

from agents.nets.factory import NetworkError
from agents.nets.format import CheckpointError
from training.config import ConfigError
from training.config_docs import config_text, keys_help
from training.config_load import check_agents, load_config, shipped_configs
from training.errors import TrainError
from training.launch import (Launch, check_write_targets, dry_run, new_run_folder, nothing_left,
                                 resolve_launch)
from training.run.runlog import program, tensorboard_command
from training.tools.pipeline import TrainResult, run_pipeline

from .args import Parser, count_arg, minutes_arg, nonempty, parse, path, seed_list


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = Parser(
        prog="samloc train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="keys for key=value or a --config YAML (defined and documented in training/config.py, an"
               " algorithm's or a\nstage's section in its own module; all of them, resolved, each with its"
               " doc: samloc train --print-config\n[--config F | --resume RUN]):\n" + keys_help())
    ap.add_argument("--config", type=path,
                    help="a YAML config file, or a shipped config by name: " + ", ".join(shipped_configs())
                         + " (training/configs/, the checkout's configs/)")
    ap.add_argument("--resume", type=path, metavar="RUN_DIR",
                    help="continue a run from its newest good checkpoint")
    ap.add_argument("--more-minutes", type=minutes_arg, metavar="N",
                    help="with --resume: train N minutes more than the run's sittings so far (max_minutes ="
                         " minutes trained + N)")
    ap.add_argument("--more-decisions", type=count_arg, metavar="N",
                    help="with --resume: train N decisions more (total_decisions = decisions trained + N;"
                         " ppo.anneal_lr anneals over the new total)")
    ap.add_argument("--print-config", action="store_true",
                    help="print the resolved config (the defaults, or after --config or --resume; overrides"
                         " and --more-*), every key with its doc, as YAML that --config reads; start nothing")
    ap.add_argument("--dry-run", action="store_true",
                    help="check all that can be checked without Ray (config, run folder, the checkpoint to"
                         " resume or init_from, the opponents it names, learner device, CPUs), print the run"
                         " folder it would use; start nothing")
    ap.add_argument("--ray-address", type=nonempty, metavar="HOST:PORT",
                    help="join the Ray cluster started there with `ray start --head` (default: start Ray"
                         " embedded here, on 127.0.0.1 only); its token is found as Ray's clients find it:"
                         " RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token (docs/training.md: a Ray"
                         " cluster, step by step)")
    ap.add_argument("--dashboard", action="store_true",
                    help="start Ray's dashboard with the embedded Ray (on 127.0.0.1:8265)")
    ap.add_argument("--run-dir", type=path,
                    help="write the run here instead of runs/<name>__<seed>__<time>/ (with --seeds:"
                         " DIR/s<seed>/ for each seed)")
    ap.add_argument("--seeds", type=seed_list, metavar="S,S,...",
                    help="a new run per seed (seed=S), one after another, each with every core; then"
                         " `samloc seeds` over their folders gives the mean and spread")
    ap.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. ppo.lr=1e-4")
    return ap.parse_intermixed_args(argv)



def _train_seeds(args: argparse.Namespace, launch: Launch, argv: list[str]) -> int:
    """One new run per seed of --seeds, one after another; the worst exit status of them.  Each run records
    the command that makes it alone (``seed=S`` for ``--seeds``)."""
    rest = [a for i, a in enumerate(argv)
            if not a.startswith("--seeds") and (i == 0 or argv[i - 1] != "--seeds")]
    codes, folders = [], []
    for seed in args.seeds:
        command = "samloc train " + " ".join(shlex.quote(a) for a in [*rest, f"seed={seed}"])
        cfg = copy.deepcopy(launch.cfg)
        cfg.seed = seed
        run_dir = str(Path(args.run_dir) / f"s{seed}") if args.run_dir else None
        _say(f"samloc train: seed {seed} ({len(codes) + 1} of {len(args.seeds)})")
        code, folder = _train(args, Launch(cfg), command, run_dir)
        codes.append(code)
        folders.append(folder)
        if code == 130:  # interrupted: the seeds left are not started
            break
    done = [str(f) for f, c in zip(folders, codes) if c == 0 and f is not None]
    if len(done) > 1:
        _say("seeds side by side: samloc seeds " + " ".join(shlex.quote(f) for f in done))
    return max(codes)


def _say(line: str) -> None:
    print(line, flush=True)


def _report(res: TrainResult) -> int:
    """The result's lines, as every run printed them; exit 1 when a step after training failed."""
    summary, paths = res.summary, res.paths
    for e in res.errors:
        print(f"samloc train: {e}", file=sys.stderr)
    r = summary.get("session_rates") or {}
    print(f"done in {res.seconds:.0f} s ({summary['stop_reason']}): {summary['updates']} updates, "
          f"{summary['games']:,} games, {summary['decisions_trained']:,} decisions trained"
          f" ({r.get('trained_per_s', 0):,.0f}/s)")
    print(f"logs (TensorBoard): {res.run_dir}  ({tensorboard_command(res.run_dir.parent)})")
    print(f"training curve:    {paths['curve']}")
    if "eval_report" in paths:
        print(f"final evaluation:  {paths['eval_report']}")
    print(f"checkpoint:        {summary['checkpoint']}")
    if "onnx" in paths:
        print(f"served bot (ONNX): {paths['onnx']}")
    if summary.get("exported_to"):
        print(f"exported bot:      {summary['exported_to']}")
    print(f"serve it:          {program('samloc')} serve --agent {shlex.quote(str(summary['checkpoint']))}"
          "  (plain `samloc serve` serves the shipped bots, not this one)")
    print(json.dumps({"run_dir": str(res.run_dir), "checkpoint": summary["checkpoint"]} | paths))
    return 1 if res.errors else 0


def _train(args: argparse.Namespace, launch: Launch, command: str,
           where: str | None) -> tuple[int, Path | None]:
    """Train (a new run in ``where`` or a fresh folder, or the resume ``launch`` holds): (exit status, the
    run folder)."""
    resume = launch.run_dir is not None
    try:
        run_dir = launch.run_dir or new_run_folder(launch.cfg, where)
        # before anything (exit 2)
        check_write_targets(run_dir, launch.cfg.checkpoint.export_to, launch.cfg.name)
    except TrainError as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 2, None
    return _run(args, launch, command, run_dir, resume), run_dir


def _run(args: argparse.Namespace, launch: Launch, command: str, run_dir: Path, resume: bool) -> int:
    try:
        res = run_pipeline(launch.cfg, run_dir, resume, command, _say, args.ray_address, args.dashboard)
    except (TrainError, CheckpointError, ConfigError, NetworkError) as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a folder that cannot be written, a full disk: the reason, not a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"samloc train: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C, or one during the final evaluation or export
        print(f"samloc train: interrupted; the checkpoints written stay (samloc train --resume {run_dir})",
              file=sys.stderr)
        return 130
    return _report(res)


def main(argv: list[str]) -> int:
    args = parse(_parse, argv)
    if isinstance(args, int):
        return args
    command = "samloc train " + " ".join(shlex.quote(a) for a in argv)
    if args.seeds and args.resume:
        print("samloc train: --seeds starts new runs; resume each seed's run with --resume RUN_DIR",
              file=sys.stderr)
        return 2
    if args.print_config and not (args.config or args.resume):  # the defaults (and any key=value)
        try:
            print(config_text(load_config(None, args.overrides)), end="")
        except ConfigError as exc:
            print(f"samloc train: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        launch = resolve_launch(args.config, args.resume, args.overrides, args.more_minutes,
                                args.more_decisions)
    except ConfigError as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 2
    except CheckpointError as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 1
    if args.print_config:
        print(config_text(launch.cfg,
                          str(launch.run_dir / "config.yaml") if launch.run_dir else args.config), end="")
        return 0
    done = nothing_left(launch)
    if done:
        print(f"samloc train: {done}")
        return 0
    try:
        check_agents(launch.cfg.eval, launch.cfg.rollout)
    except ConfigError as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        try:
            lines = dry_run(launch, args.run_dir, args.ray_address)
        except (TrainError, CheckpointError, ConfigError) as exc:
            print(f"samloc train: {exc}", file=sys.stderr)
            return 1
        print("\n".join(lines))
        return 0
    if args.seeds:
        return _train_seeds(args, launch, argv)
    return _train(args, launch, command, args.run_dir)[0]
