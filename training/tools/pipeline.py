"""The training pipeline of ``samloc train``: train → final evaluation → hand belief → ONNX export →
curve (→ a copy to ``checkpoint.export_to``), each a named step, returning a :class:`TrainResult`.

A step after training that fails (the belief, the export) leaves the trained policy in place and adds
its reason to ``errors``; ``say`` is told each step's progress as it happens (the command prints it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from agents.nets.export import export
from agents.nets import checkpoint as ckpt
from agents.nets.checkpoint import copy_checkpoint
from sam_env.atomic import write_json_atomic
from sam_env.table import Table

from ..algorithms import warm_start
from ..config import BeliefConfig, EvalConfig, TrainConfig, eval_table
from ..errors import TrainError
from ..launch import check_memory, check_write_targets, new_loop
from ..run.evaluation import EvalTarget, eval_processes, evaluate_weights
from ..run.loop import RunLoop
from ..run.rollout import weights_to_numpy
from ..run.runlog import run_dir_note
from .belief import train_belief
from .curve import plot_curve

FINAL_EVAL_SEED = 12345  # the final evaluation's deals (samloc exploit's --eval-seed default too)


@dataclass
class TrainResult:
    """What a pipeline made: the run's summary (with the final figures), the paths of what it wrote, the
    steps after training that failed, and the seconds it took."""

    run_dir: Path
    summary: dict[str, Any]
    paths: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0


def final_report(run_dir: Path, ckpt_dir: Path, name: str, table: Table, ev: EvalConfig) -> dict[str, Any]:
    """Evaluate the final checkpoint (greedy) of run ``name`` at ``table`` against every opponent of ``ev``
    (its ``final_deals``, its processes)."""
    net, meta = ckpt.load_checkpoint(ckpt_dir)
    snap = None
    tensors, state = ckpt.load_trainer_state(ckpt_dir)
    ids = state["counters"].get("snapshot_ids") or []
    if ids:
        prefix = f"pool.{ids[0]}."
        snap = {k[len(prefix):]: v.numpy() for k, v in tensors.items() if k.startswith(prefix)}
    torch.set_num_threads(1)
    deals = ev.final_deals
    res = evaluate_weights(weights_to_numpy(net), net.hparams(), list(ev.opponents), snap, table, deals,
                           FINAL_EVAL_SEED, eval_processes(ev))
    report = {"name": name, "checkpoint": str(ckpt_dir), **table.to_record(),
              "deals": deals, "snapshot_update": ids[0] if ids else None, "updates": meta.updates,
              "decisions_trained": meta.decisions_trained, "games": meta.games,
              "results": res}
    write_json_atomic(run_dir / "eval_report.json", report)
    write_json_atomic(Path(ckpt_dir) / "eval_report.json", report)
    return report


def final_lines(table: Table, deals: int, report: dict[str, Any]) -> list[str]:
    """The final evaluation of ``deals`` duplicate deals at ``table`` as printed: a heading, then one line
    per opponent."""
    lines = ["final evaluation (" + f"{deals} duplicate deals, {table.rules.to_record()}, "
             f"{table.players} players):"]
    for opp, r in report["results"].items():
        lo, hi = r["ci95"]
        lines.append(f"  vs {opp:<10} {r['mean_score']:+7.2f} lá/game (95% CI {lo:+.2f} … {hi:+.2f}), "
                     f"win rate {100 * r['win_rate']:.1f}%, Sâm declared {r['sam_declared']}"
                     f" ({100 * r['sam_success_rate']:.0f}% succeeded)")
    h = report["results"].get("heuristic")
    if h is not None:  # the rule bot is the bar every run is read against
        lo, hi = h["ci95"]
        verdict = ("beats the heuristic" if lo > 0 else "loses to the heuristic" if hi < 0
                   else "is level with the heuristic within the evaluation's CI" if h["mean_score"] <= 0
                   else "is ahead of the heuristic, but not beyond the evaluation's CI")
        lines.append(f"verdict: the policy {verdict} ({h['mean_score']:+.2f} lá/game,"
                     f" 95% CI {lo:+.2f} … {hi:+.2f})")
    return lines


def _belief_step(belief: BeliefConfig, seed: int, res: TrainResult, command: str,
                 say: Callable[[str], None]) -> None:
    """The hand belief for the search (``belief``), learned from the final checkpoint's play."""
    summary = res.summary
    say(f"hand belief for the search: {belief.deals:,} deals ...")
    try:
        info = train_belief(summary["checkpoint"], belief.deals, belief.epochs, belief.hidden, seed,
                            command=command)
    except (ValueError, MemoryError) as exc:  # the trained policy is kept and exported all the same
        res.errors.append(f"the hand belief failed ({exc}); the policy is saved and exported without it"
                          f" (retry: samloc belief {summary['checkpoint']})")
        return
    summary["belief"] = {k: info[k] for k in ("decisions", "holdout_nll", "uniform_nll", "wall_time_s")}
    say(f"  held-out {info['holdout_nll']:.4f} nats per unseen card (uniform deal "
        f"{info['uniform_nll']:.4f}), {info['wall_time_s']:.0f} s")


def _export_step(ckpt_dir: Path, res: TrainResult) -> None:
    """``policy.onnx`` (+ ``policy.json``) in the final checkpoint, by ``samloc export``'s own function."""
    try:
        res.paths["onnx"] = res.summary["onnx"] = str(Path(export(ckpt_dir)["path"]))
    except (ValueError, OSError) as exc:
        res.errors.append(f"the ONNX export failed ({exc}); the checkpoint is kept"
                          f" (retry: samloc export {ckpt_dir})")


def run_pipeline(cfg: TrainConfig, run_dir: Path, resume: bool, command: str, say: Callable[[str], None],
                 ray_address: str | None = None, dashboard: bool = False,
                 on_update: Callable[[RunLoop], None] | None = None,
                 evaluation: EvalTarget | None = None) -> TrainResult:
    """Train (a new run in ``run_dir``, or a resume of it), then the steps after training (see the module
    docstring); ``on_update`` and ``evaluation`` are the run loop's (``samloc sweep`` reports each periodic
    evaluation to Ray Tune).  Raises TrainError, CheckpointError, ConfigError or OSError when training
    fails."""
    t0 = time.time()
    torch.set_num_threads(1)
    check_memory(cfg, embedded=not ray_address)
    # before training: export_to is replaced at the end
    check_write_targets(run_dir, cfg.checkpoint.export_to, cfg.name)
    short = "" if resume else warm_start.budget_problem(cfg.section("warm_start"),
                                                        cfg.max_minutes)  # as the dry run
    if short:
        raise TrainError(short)
    loop = new_loop(cfg, run_dir, resume=resume, ray_address=ray_address, command=command,
                    dashboard=dashboard, on_update=on_update, evaluation=evaluation)
    say(run_dir_note(run_dir))
    res = TrainResult(run_dir, loop.run())                                   # train
    summary, ckpt_dir, report = res.summary, Path(res.summary["checkpoint"]), None
    if cfg.eval.final_deals:                                                 # final evaluation
        report = final_report(run_dir, ckpt_dir, cfg.name, eval_table(cfg.env, cfg.eval), cfg.eval)
        loop.board.final_eval(report)
        summary["final_eval"] = report["results"]
        res.paths["eval_report"] = str(run_dir / "eval_report.json")
        for line in final_lines(eval_table(cfg.env, cfg.eval), cfg.eval.final_deals, report):
            say(line)
    if cfg.belief.deals:                                                     # belief
        _belief_step(cfg.belief, cfg.seed, res, command, say)
    _export_step(ckpt_dir, res)                                              # ONNX export
    title = (f"{cfg.name}: greedy policy at {eval_table(cfg.env, cfg.eval).name},"
             f" {summary['decisions_trained']:,} decisions trained")
    curve = plot_curve(loop.state.eval_history, report, run_dir / "curve.png", title,  # curve
                       loop.state.stage_starts)
    res.paths["curve"] = summary["curve"] = str(curve)
    loop.board.close(summary, report)
    if cfg.checkpoint.export_to:                                             # the copy of the bot
        extra = {"eval_report.json": report} if report else {}
        try:
            summary["exported_to"] = str(copy_checkpoint(ckpt_dir, cfg.checkpoint.export_to, extra))
        except OSError as exc:  # UnsafeTarget: something was put there while it trained
            res.errors.append(f"checkpoint.export_to: {exc}; the run's checkpoint is kept in {ckpt_dir}")
    write_json_atomic(run_dir / "summary.json", summary)
    res.seconds = time.time() - t0
    return res
