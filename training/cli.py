"""``samloc train``: self-play training on Ray, from this machine to a cluster.

    samloc train --config configs/quick.yaml [key=value ...]
    samloc train --resume runs/quick__0__20250101-120000 [key=value ...]
    samloc train --config configs/cluster.yaml --ray-address HOST:6379

At the end the policy is evaluated (``eval.final_deals`` duplicate deals per
opponent), the report is written next to the final checkpoint, the search's
hand belief is learned when ``belief.deals`` > 0 (training/belief.py), and the
paths of the logs and the checkpoint are printed.  Exit 2 on a bad config or
command line, 1 when training fails.
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

from .config import ConfigError, eval_players, eval_rules, load_config


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="samloc train", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="a YAML config (configs/quick.yaml, standard, cluster) or its name")
    ap.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest good checkpoint")
    ap.add_argument("--ray-address", help="join this Ray cluster (default: start Ray embedded here, on 127.0.0.1"
                                          " only; docs/training.md says what to secure on a cluster)")
    ap.add_argument("--dashboard", action="store_true",
                    help="start Ray's dashboard with the embedded Ray (on 127.0.0.1:8265)")
    ap.add_argument("--run-dir", help="write the run here instead of runs/<name>__<seed>__<time>/")
    ap.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. ppo.lr=1e-4")
    return ap.parse_args(argv)


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
    report = {"checkpoint": str(ckpt_dir), "rules": eval_rules(cfg), "players": eval_players(cfg),
              "deals": deals, "snapshot_update": ids[0] if ids else None, "updates": meta.updates,
              "decisions_trained": meta.decisions_trained, "games": meta.games,
              "results": res}
    write_json_atomic(run_dir / "eval_report.json", report)
    write_json_atomic(Path(ckpt_dir) / "eval_report.json", report)
    return report


def main(argv: list[str]) -> int:
    try:
        args = _parse(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    command = "samloc train " + " ".join(shlex.quote(a) for a in argv)
    try:
        if args.resume:
            if args.config:
                raise ConfigError("--resume takes the run's own config; give changes as key=value")
            run_dir = Path(args.resume)
            cfg_file = run_dir / "config.yaml"
            if not cfg_file.is_file():
                raise ConfigError(f"{run_dir} is not a run folder (no config.yaml)")
            cfg = load_config(cfg_file, args.overrides)
        else:
            if not args.config:
                raise ConfigError("give --config FILE (e.g. configs/quick.yaml) or --resume RUN_DIR")
            cfg = load_config(args.config, args.overrides)
            run_dir = None
    except ConfigError as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 2

    import torch

    from agents.nets.checkpoint import copy_checkpoint
    from agents.nets.format import CheckpointError
    from .trainer import TrainError, Trainer, new_run_dir, write_hparams

    torch.set_num_threads(1)
    if run_dir is None:
        run_dir = Path(args.run_dir) if args.run_dir else new_run_dir(cfg)
        if args.run_dir and (run_dir / "checkpoints").exists():
            print(f"samloc train: {run_dir} already holds a run; use --resume {run_dir}", file=sys.stderr)
            return 2
    t0 = time.time()
    try:
        trainer = Trainer(cfg, run_dir, resume=bool(args.resume), ray_address=args.ray_address, command=command,
                          dashboard=args.dashboard)
        print(f"samloc train: run folder {run_dir}  (tensorboard --logdir {run_dir.parent})", flush=True)
        summary = trainer.run()
        report = None
        if cfg.eval.final_deals:
            report = final_report(run_dir, Path(summary["checkpoint"]), cfg, cfg.eval.final_deals)
            summary["final_eval"] = report["results"]
            print("final evaluation (" + f"{cfg.eval.final_deals} duplicate deals, {eval_rules(cfg)}, "
                  f"{eval_players(cfg)} players):", flush=True)
            for opp, r in report["results"].items():
                lo, hi = r["ci95"]
                print(f"  vs {opp:<10} {r['mean_score']:+7.2f} lá/game (95% CI {lo:+.2f} … {hi:+.2f}), "
                      f"win rate {100 * r['win_rate']:.1f}%, Sâm declared {r['sam_declared']}"
                      f" ({100 * r['sam_success_rate']:.0f}% succeeded)", flush=True)
        belief_error = ""
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
                belief_error = (f"the hand belief failed ({exc}); the policy is saved and exported without it"
                                f" (retry: samloc belief {summary['checkpoint']})")
        write_hparams(trainer, summary)
        if cfg.checkpoint.export_to:
            extra = {"eval_report.json": report} if report else {}
            dest = copy_checkpoint(Path(summary["checkpoint"]), Path(cfg.checkpoint.export_to), extra)
            summary["exported_to"] = str(dest)
        write_json_atomic(run_dir / "summary.json", summary)
    except (TrainError, CheckpointError, ConfigError) as exc:
        print(f"samloc train: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a folder that cannot be written, a full disk: the reason, not a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"samloc train: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    if belief_error:
        print(f"samloc train: {belief_error}", file=sys.stderr)
    r = summary.get("session_rates") or {}
    print(f"done in {time.time() - t0:.0f} s ({summary['stop_reason']}): {summary['updates']} updates, "
          f"{summary['games']:,} games, {summary['decisions_trained']:,} decisions trained"
          f" ({r.get('trained_per_s', 0):,.0f}/s)")
    print(f"logs (TensorBoard): {run_dir}")
    print(f"checkpoint:        {summary['checkpoint']}")
    if summary.get("exported_to"):
        print(f"exported bot:      {summary['exported_to']}")
    print(json.dumps({"run_dir": str(run_dir), "checkpoint": summary["checkpoint"]}))
    return 1 if belief_error else 0
