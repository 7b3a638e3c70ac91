"""``samloc train``: self-play training on Ray, from this machine to a cluster.

    samloc train --config configs/quick.yaml [key=value ...]
    samloc train --resume runs/quick__0__20250101-120000 [--more-minutes N] [--more-decisions N] [k=v ...]
    samloc train --config configs/cluster.yaml --ray-address HOST:6379
    samloc train --config configs/quick.yaml env.rules=mien_bac env.players=3 --print-config   (or --dry-run)

The budgets, total_decisions and max_minutes, count every sitting of a run together: a resume of a run
that stopped on one of them has nothing left to do (it says so and exits) unless it is given more,
--more-minutes N / --more-decisions N (N more than done so far) or max_minutes=M / total_decisions=D (in
all).  At the end the policy is evaluated (eval.final_deals duplicate deals per opponent), the report
is written next to the final checkpoint, the search's hand belief is learned when belief.deals > 0
(training/belief.py), the policy is exported to ONNX in the final checkpoint (policy.onnx, as samloc
export does), curve.png is drawn in the run folder, and the paths are printed.  Ctrl-C or SIGTERM ends a
sitting the same way at the next step, with a checkpoint (a second one stops at once).  key=value may come
before or after the options.  Exit 2 on a bad config or command line, 1 when training fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from sam_env.atomic import write_json_atomic

from .config import (ConfigError, TrainConfig, config_text, eval_players, eval_rules, keys_help, load_config,
                     run_name, stop_reason, training_tables)


def count_arg(text: str) -> int:
    """argparse type: a positive whole number (of decisions, deals): 5000000, 5_000_000 or 5e6."""
    try:
        v = float(text.replace("_", ""))
    except ValueError:
        v = 0.0
    if not (v >= 1 and v.is_integer()):
        raise argparse.ArgumentTypeError(f"must be a positive whole number (5000000 or 5e6), not {text!r}")
    return int(v)


def minutes_arg(text: str) -> float:
    """argparse type: a positive number of minutes."""
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of minutes, not {text!r}")
    return v


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="samloc train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="keys for key=value or a --config YAML (defined and documented in training/config.py;"
               " all of them,\nresolved, each with its doc: samloc train --print-config [--config F |"
               " --resume RUN]):\n" + keys_help())
    ap.add_argument("--config", help="a YAML config (configs/quick.yaml, standard, cluster) or its name")
    ap.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest good checkpoint")
    ap.add_argument("--more-minutes", type=minutes_arg, metavar="N",
                    help="with --resume: train N minutes more than the run's sittings so far (max_minutes ="
                         " minutes trained + N)")
    ap.add_argument("--more-decisions", type=count_arg, metavar="N",
                    help="with --resume: train N decisions more (total_decisions = decisions trained + N;"
                         " ppo.anneal_lr anneals over the new total)")
    ap.add_argument("--print-config", action="store_true",
                    help="print the resolved config (after --config or --resume, overrides and --more-*),"
                         " every key with its doc, as YAML that --config reads; start nothing")
    ap.add_argument("--dry-run", action="store_true",
                    help="check all that can be checked without Ray (config, run folder, the checkpoint to"
                         " resume or init_from, learner device, CPUs), print the run folder it would use;"
                         " start nothing")
    ap.add_argument("--ray-address", help="join this Ray cluster (default: start Ray embedded here, on 127.0.0.1"
                                          " only; docs/training.md says what to secure on a cluster)")
    ap.add_argument("--dashboard", action="store_true",
                    help="start Ray's dashboard with the embedded Ray (on 127.0.0.1:8265)")
    ap.add_argument("--run-dir", help="write the run here instead of runs/<name>__<seed>__<time>/")
    ap.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. ppo.lr=1e-4")
    return ap.parse_intermixed_args(argv)


def _progress(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The checkpoint a resume starts from and its counters (read without torch; the trainer verifies it
    again and says so when it skips a damaged one)."""
    from agents.nets.format import TRAINER_JSON, latest_good, read_json_file

    ckpt = latest_good(run_dir, trainer=True)
    state = read_json_file(ckpt / TRAINER_JSON)
    counters = state.get("counters") if isinstance(state, dict) else None
    if not isinstance(counters, dict):
        raise ConfigError(f"{ckpt}: trainer.json holds no counters")
    return ckpt, counters


def _resolve(args: argparse.Namespace) -> tuple[TrainConfig, Path | None, Path | None, dict[str, Any] | None]:
    """(config, run folder or None for a new run, checkpoint resumed, its counters): what the command asks."""
    keys = {o.split("=", 1)[0].strip() for o in args.overrides}
    more = args.more_minutes is not None or args.more_decisions is not None
    if not args.resume:
        if more:
            raise ConfigError("--more-minutes and --more-decisions continue a run: give them with --resume"
                              " RUN_DIR (a new run: max_minutes=N, total_decisions=N)")
        if not args.config:
            raise ConfigError("give --config FILE (e.g. configs/quick.yaml) or --resume RUN_DIR")
        cfg = load_config(args.config, args.overrides)
        cfg.name = run_name(cfg, args.overrides)
        return cfg, None, None, None
    if args.config:
        raise ConfigError("--resume takes the run's own config; give changes as key=value")
    for flag, key in (("more_minutes", "max_minutes"), ("more_decisions", "total_decisions")):
        if getattr(args, flag) is not None and key in keys:
            raise ConfigError(f"give --{flag.replace('_', '-')} (more than so far) or {key}= (in all),"
                              " not both")
    run_dir = Path(args.resume)
    cfg_file = run_dir / "config.yaml"
    if not cfg_file.is_file():
        raise ConfigError(f"{run_dir} is not a run folder (no config.yaml)")
    cfg = load_config(cfg_file, args.overrides)
    ckpt, counters = _progress(run_dir)
    if args.more_minutes is not None:
        cfg.max_minutes = round(float(counters.get("wall_s", 0.0)) / 60 + args.more_minutes, 3)
    if args.more_decisions is not None:
        cfg.total_decisions = int(counters.get("decisions_trained", 0)) + args.more_decisions
    return cfg, run_dir, ckpt, counters


def _nothing_left(cfg: TrainConfig, run_dir: Path, counters: dict[str, Any]) -> str:
    """The one line a resume with nothing left to do prints ('' when there is work left)."""
    trained, wall = int(counters.get("decisions_trained", 0)), float(counters.get("wall_s", 0.0))
    why = stop_reason(cfg, trained, wall)
    if why.startswith("total_decisions"):
        return (f"{run_dir}: nothing left to do: {trained:,} decisions trained, total_decisions is"
                f" {cfg.total_decisions:,} (give --more-decisions N, or total_decisions=D)")
    if why:
        return (f"{run_dir}: nothing left to do: {wall / 60:.1f} minutes trained over its sittings,"
                f" max_minutes is {cfg.max_minutes:g} (give --more-minutes N, or max_minutes=M)")
    return ""


def _writable(path: Path) -> bool:
    """Whether ``path`` can be created or written: its nearest existing folder is writable."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return os.access(p, os.W_OK | os.X_OK)


def _dry_run(cfg: TrainConfig, args: argparse.Namespace, run_dir: Path | None, ckpt: Path | None,
             counters: dict[str, Any] | None) -> None:
    """Every check that needs no Ray, then what the run would do; raises the first problem found."""
    from agents.nets.format import CheckpointError, read_metadata, resolve, verify
    from .learner import DeviceError, resolve_device
    from .trainer import TrainError, cpu_shortfall, embedded_cpus, new_run_dir

    if run_dir is None:
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(cfg)
        if args.run_dir and (run_dir / "checkpoints").exists():
            raise TrainError(f"{run_dir} already holds a run; use --resume {run_dir}")
    for what, path in (("the run folder", run_dir), ("checkpoint.export_to", Path(cfg.checkpoint.export_to))):
        if str(path) not in ("", ".") and not _writable(path):
            raise TrainError(f"{what} {path} cannot be written here (permission denied)")
    shape = cfg.model.hparams()
    starts = [("--resume", ckpt)] if ckpt else []  # verified by _progress
    if cfg.init_from and not ckpt:  # a resume takes its own weights, not init_from's
        starts.append(("init_from", resolve(cfg.init_from)))
        verify(starts[-1][1])
    for what, path in starts:
        model = read_metadata(path).model
        if model != shape:
            raise CheckpointError(f"{what} {path}: the model shape {model} differs from the config's {shape}")
    try:
        device = resolve_device(cfg.learner.device)
    except DeviceError as exc:
        raise TrainError(str(exc)) from None
    short = "" if args.ray_address else cpu_shortfall(cfg, embedded_cpus(), embedded=True)
    if short:
        raise TrainError(short)
    tables = ", ".join(f"{t.rules.name}/{t.players}" for t in training_tables(cfg))
    ro, ev = cfg.rollout, cfg.eval
    where = (f"the Ray cluster at {args.ray_address} (not contacted)" if args.ray_address
             else f"the embedded Ray ({embedded_cpus()} CPUs)")
    print("samloc train --dry-run: everything checks out; nothing was started")
    print(f"  run folder:  {run_dir}" + (f" (resume from {ckpt.name}: update {counters['updates']},"
                                         f" {counters['decisions_trained']:,} decisions,"
                                         f" {counters['wall_s'] / 60:.1f} minutes)" if ckpt else " (new)"))
    print(f"  name:        {cfg.name}; tables {tables}")
    minutes = f"max_minutes {cfg.max_minutes:g}" if cfg.max_minutes else "no max_minutes"
    print(f"  budget:      total_decisions {cfg.total_decisions:,}, {minutes} (every sitting together)")
    d = cfg.distill
    rollout = (f"{ro.num_workers} x {ro.cpus_per_worker:g} CPU" if not d.enabled or d.ppo
               else "no rollout workers")
    print(f"  workers:     {rollout} on {where}; learner on {device}"
          f" ({cfg.learner.precision})" + ("; deterministic (reproducible)" if ro.deterministic else ""))
    if d.enabled:
        print(f"  expert iteration: {d.num_workers} x {d.cpus_per_worker:g} CPU search workers"
              f" (candidates {d.candidates}, worlds {d.worlds}, horizon {d.horizon}, critic {d.critic});"
              f" KL x {d.coef:g} at temperature {d.temperature:g} lá"
              + (" beside PPO" if d.ppo else ", no PPO") + f"; rounds of {d.round_updates:,} updates")
    final = (f"evaluation {ev.final_deals:,} deals vs {', '.join(ev.opponents)}" if ev.final_deals
             else "no final evaluation")
    print(f"  at the end:  {final}, ONNX export, curve.png"
          + (f", belief {cfg.belief.deals:,} deals" if cfg.belief.deals else "")
          + (f", copy to {cfg.checkpoint.export_to}" if cfg.checkpoint.export_to else ""))


def final_report(run_dir: Path, ckpt_dir: Path, cfg: Any, deals: int) -> dict[str, Any]:
    """Evaluate the final checkpoint (greedy) against every configured opponent."""
    import torch

    from agents.nets import checkpoint as ckpt

    from .evaluation import evaluate_weights
    from .rollout import weights_to_numpy

    net, meta = ckpt.load_checkpoint(ckpt_dir)
    snap = None
    tensors, state = ckpt.load_trainer_state(ckpt_dir)
    ids = state["counters"].get("snapshot_ids") or []
    if ids:
        prefix = f"pool.{ids[0]}."
        snap = {k[len(prefix):]: v.numpy() for k, v in tensors.items() if k.startswith(prefix)}
    torch.set_num_threads(1)
    res = evaluate_weights(weights_to_numpy(net), net.hparams(), list(cfg.eval.opponents), snap,
                           eval_rules(cfg), eval_players(cfg), deals, 12345)
    report = {"name": cfg.name, "checkpoint": str(ckpt_dir), "rules": eval_rules(cfg),
              "players": eval_players(cfg),
              "deals": deals, "snapshot_update": ids[0] if ids else None, "updates": meta.updates,
              "decisions_trained": meta.decisions_trained, "games": meta.games,
              "results": res}
    write_json_atomic(run_dir / "eval_report.json", report)
    write_json_atomic(Path(ckpt_dir) / "eval_report.json", report)
    return report


def _export_onnx(ckpt_dir: Path) -> tuple[Path | None, str]:
    """``policy.onnx`` (+ ``policy.json``) in the final checkpoint, by ``samloc export``'s own function:
    (its path, '') or (None, why it failed)."""
    from agents.export import export

    try:
        return Path(export(ckpt_dir)["path"]), ""
    except (ValueError, OSError) as exc:
        return None, (f"the ONNX export failed ({exc}); the checkpoint is kept"
                      f" (retry: samloc export {ckpt_dir})")


def main(argv: list[str]) -> int:
    try:
        args = _parse(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    command = "samloc train " + " ".join(shlex.quote(a) for a in argv)
    from agents.nets.format import CheckpointError
    try:
        cfg, run_dir, ckpt, counters = _resolve(args)
    except ConfigError as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 2
    except CheckpointError as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 1
    if args.print_config:
        print(config_text(cfg, str(run_dir / "config.yaml") if run_dir else args.config), end="")
        return 0
    if run_dir is not None and counters is not None:
        done = _nothing_left(cfg, run_dir, counters)
        if done:
            print(f"samloc train: {done}")
            return 0
    if args.dry_run:
        from .trainer import TrainError
        try:
            _dry_run(cfg, args, run_dir, ckpt, counters)
        except (TrainError, CheckpointError, ConfigError) as exc:
            print(f"samloc train: {exc}", file=sys.stderr)
            return 1
        return 0

    import torch

    from agents.evaluate import table_name
    from agents.nets.checkpoint import copy_checkpoint
    from .curve import plot_curve
    from .distill import trainer_class
    from .trainer import TrainError, new_run_dir, write_hparams

    torch.set_num_threads(1)
    resume = run_dir is not None
    if run_dir is None:
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(cfg)
        if args.run_dir and (run_dir / "checkpoints").exists():
            print(f"samloc train: {run_dir} already holds a run; use --resume {run_dir}", file=sys.stderr)
            return 2
    t0 = time.time()
    errors: list[str] = []  # steps after training that failed; the trained policy is kept all the same
    paths: dict[str, str] = {}
    try:
        trainer = trainer_class(cfg)(cfg, run_dir, resume=resume, ray_address=args.ray_address,
                                     command=command, dashboard=args.dashboard)
        print(f"samloc train: run folder {run_dir}  (tensorboard --logdir {run_dir.parent})", flush=True)
        summary = trainer.run()
        ckpt_dir = Path(summary["checkpoint"])
        report = None
        if cfg.eval.final_deals:
            report = final_report(run_dir, ckpt_dir, cfg, cfg.eval.final_deals)
            trainer.record_final_eval(report)
            summary["final_eval"] = report["results"]
            paths["eval_report"] = str(run_dir / "eval_report.json")
            print("final evaluation (" + f"{cfg.eval.final_deals} duplicate deals, {eval_rules(cfg)}, "
                  f"{eval_players(cfg)} players):", flush=True)
            for opp, r in report["results"].items():
                lo, hi = r["ci95"]
                print(f"  vs {opp:<10} {r['mean_score']:+7.2f} lá/game (95% CI {lo:+.2f} … {hi:+.2f}), "
                      f"win rate {100 * r['win_rate']:.1f}%, Sâm declared {r['sam_declared']}"
                      f" ({100 * r['sam_success_rate']:.0f}% succeeded)", flush=True)
        if cfg.belief.deals:
            from .belief import train_belief
            print(f"hand belief for the search: {cfg.belief.deals:,} deals ...", flush=True)
            try:
                info = train_belief(summary["checkpoint"], cfg.belief.deals, cfg.belief.epochs,
                                    cfg.belief.hidden, cfg.seed, command=command)
                summary["belief"] = {k: info[k] for k in ("decisions", "holdout_nll", "uniform_nll",
                                                          "wall_time_s")}
                print(f"  held-out {info['holdout_nll']:.4f} nats per unseen card (uniform deal "
                      f"{info['uniform_nll']:.4f}), {info['wall_time_s']:.0f} s", flush=True)
            except (ValueError, MemoryError) as exc:  # the trained policy is kept and exported all the same
                errors.append(f"the hand belief failed ({exc}); the policy is saved and exported without it"
                              f" (retry: samloc belief {summary['checkpoint']})")
        onnx, why = _export_onnx(ckpt_dir)
        if onnx is not None:
            paths["onnx"] = summary["onnx"] = str(onnx)
        else:
            errors.append(why)
        title = (f"{cfg.name}: greedy policy at {table_name(eval_rules(cfg), eval_players(cfg))},"
                 f" {summary['decisions_trained']:,} decisions trained")
        curve = plot_curve(trainer.eval_history, report, run_dir / "curve.png", title)
        paths["curve"] = summary["curve"] = str(curve)
        write_hparams(trainer, summary, report)
        if cfg.checkpoint.export_to:
            extra = {"eval_report.json": report} if report else {}
            dest = copy_checkpoint(ckpt_dir, Path(cfg.checkpoint.export_to), extra)  # ONNX included
            summary["exported_to"] = str(dest)
        write_json_atomic(run_dir / "summary.json", summary)
    except (TrainError, CheckpointError, ConfigError) as exc:
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
    for e in errors:
        print(f"samloc train: {e}", file=sys.stderr)
    r = summary.get("session_rates") or {}
    print(f"done in {time.time() - t0:.0f} s ({summary['stop_reason']}): {summary['updates']} updates, "
          f"{summary['games']:,} games, {summary['decisions_trained']:,} decisions trained"
          f" ({r.get('trained_per_s', 0):,.0f}/s)")
    print(f"logs (TensorBoard): {run_dir}")
    print(f"training curve:    {paths['curve']}")
    if "eval_report" in paths:
        print(f"final evaluation:  {paths['eval_report']}")
    print(f"checkpoint:        {summary['checkpoint']}")
    if "onnx" in paths:
        print(f"served bot (ONNX): {paths['onnx']}")
    if summary.get("exported_to"):
        print(f"exported bot:      {summary['exported_to']}")
    print(json.dumps({"run_dir": str(run_dir), "checkpoint": summary["checkpoint"]} | paths))
    return 1 if errors else 0
