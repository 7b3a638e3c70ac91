"""Evaluation of the policy being trained, through the evaluation harness (duplicate deals): the final
evaluation's functions, and the run's periodic evaluation as a part of the loop (:class:`PeriodicEval`)
with what it plays as a part of its own (:class:`EvalTarget`: the configured opponents, or a frozen
target for ``samloc exploit``)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, Callable, Protocol

import numpy as np
import ray
import torch

from agents import make_agent
from agents.evaluation.evaluate import evaluate
from agents.nets.factory import build_network
from agents.nets.interface import PolicyNetwork
from agents.players.policy_agent import PolicyAgent
from sam_env.seeding import mix
from sam_env.table import Table

from ..config import EvalConfig, TrainConfig, eval_table
from .rollout import load_numpy_weights
from .runlog import Board
from .runstate import RunState


def _net(weights: dict[str, np.ndarray], hparams: dict[str, Any]) -> PolicyNetwork:
    net = build_network(hparams)
    load_numpy_weights(net, weights)
    return net.eval()


def _opponent(spec: str, snap: dict[str, np.ndarray] | None, hparams: dict[str, int], seed: int) -> Any:
    if spec == "snapshot":
        return PolicyAgent(_net(snap, hparams), seed=seed, name="snapshot") if snap is not None else None
    return make_agent(spec, seed=seed)


def evaluate_against(weights: dict[str, np.ndarray], hparams: dict[str, int], opponent: Any, table: Table,
                     deals: int, seed: int) -> dict[str, Any]:
    """``agents.evaluation.evaluate`` of the greedy policy of ``weights`` against one opponent (a spec or an
    Agent the caller made, e.g. with a temperature) at ``table``, on the duplicate deals of ``seed``; without
    the score histogram."""
    torch.set_num_threads(1)
    agent = PolicyAgent(_net(weights, hparams), seed=seed, name="learner")
    res = evaluate(agent, opponent, table, deals, seed)
    return {k: v for k, v in res.items() if k != "score_hist"}


def _against(weights: dict[str, np.ndarray], hparams: dict[str, int], spec: str,
             snap: dict[str, np.ndarray] | None, table: Table, deals: int, seed: int,
             i: int) -> dict[str, Any] | None:
    """The greedy policy against the ``i``-th opponent, ``spec`` (None: a snapshot, and none yet)."""
    opp = _opponent(spec, snap, hparams, seed + 1 + i)
    return None if opp is None else evaluate_against(weights, hparams, opp, table, deals, seed)


def evaluate_weights(weights: dict[str, np.ndarray], hparams: dict[str, int], opponents: list[str],
                     snap: dict[str, np.ndarray] | None, table: Table, deals: int, seed: int,
                     workers: int = 1) -> dict[str, dict[str, Any]]:
    """``{opponent: evaluate(...) result}`` for the greedy policy against each opponent spec at ``table``;
    ``workers`` > 1 (``eval.num_workers``): the opponents side by side in that many processes, each with the
    figures it has in one process."""
    args = [(weights, hparams, spec, snap, table, deals, seed, i) for i, spec in enumerate(opponents)]
    if workers > 1 and len(args) > 1:
        with ProcessPoolExecutor(min(workers, len(args)), mp_context=get_context("spawn")) as ex:
            results = [f.result() for f in [ex.submit(_against, *a) for a in args]]
    else:
        results = [_against(*a) for a in args]
    return {spec: r for spec, r in zip(opponents, results) if r is not None}


def eval_processes(ev: EvalConfig) -> int:
    """``eval.num_workers`` as the run resolved it (1 where it was never sized: outside a run)."""
    return ev.num_workers if isinstance(ev.num_workers, int) else 1


# ---- the run's periodic evaluation -------------------------------------------------------------------
@ray.remote(num_cpus=0)
def _evaluate_remote(weights: dict[str, np.ndarray], hparams: dict[str, int], opponents: list[str],
                     snap: dict[str, np.ndarray] | None, table: Table, deals: int, seed: int,
                     workers: int) -> dict[str, Any]:
    return evaluate_weights(weights, hparams, opponents, snap, table, deals, seed, workers)


class EvalTarget(Protocol):
    """What a run's periodic evaluation plays: :meth:`launch` sends one evaluation of the learner's
    weights to Ray and returns (its ObjectRef, the run's point it measures, for ``eval.jsonl``)."""

    def launch(self, weights: dict[str, np.ndarray], hparams: dict[str, int], state: RunState,
               deals: int) -> tuple[Any, dict[str, Any]]: ...


class OpponentsEval:
    """The configured opponents (``eval.opponents``, ``snapshot`` the pool's oldest) at the evaluation
    table, on the duplicate deals of a seed of the run and the update; or ``opponents`` on the same deals
    (``deals_seed``) at every point, as ``samloc sweep`` compares its trials."""

    def __init__(self, cfg: TrainConfig, opponents: list[str] | None = None, deals_seed: int | None = None):
        self.cfg, self.opponents, self.deals_seed = cfg, opponents or list(cfg.eval.opponents), deals_seed

    def launch(self, weights: dict[str, np.ndarray], hparams: dict[str, int], state: RunState,
               deals: int) -> tuple[Any, dict[str, Any]]:
        cfg, c, pool = self.cfg, state.counters, state.pool
        snap = pool[0][1] if pool else None
        at = {"updates": c.updates, "decisions_trained": c.decisions_trained, "games": c.games,
              "wall_s": round(c.wall_s, 1), "snapshot": pool[0][0] if pool else None}
        seed = mix(cfg.seed, 7, c.updates) if self.deals_seed is None else self.deals_seed
        ref = _evaluate_remote.remote(weights, hparams, self.opponents, snap, eval_table(cfg.env, cfg.eval),
                                      deals, seed, eval_processes(cfg.eval))
        return ref, at


class PeriodicEval:
    """The evaluation in flight (one at a time) and its records: ``eval.jsonl``, the run state's history
    and TensorBoard's ``eval/…``.  ``note`` adds the algorithm's own fields to the point measured."""

    def __init__(self, target: EvalTarget, state: RunState, board: Board,
                 note: Callable[[dict[str, Any]], None]):
        self.target, self.state, self.board, self.note = target, state, board, note
        self.in_flight: tuple[Any, dict[str, Any]] | None = None

    def launch(self, weights: dict[str, np.ndarray], hparams: dict[str, int], deals: int) -> None:
        ref, at = self.target.launch(weights, hparams, self.state, deals)
        if self.state.stage_starts:  # a run in stages: the stage it measures (a plateau is read per stage)
            at["stage"] = self.state.stage
        self.note(at)
        self.in_flight = (ref, at)

    def _record(self, res: dict[str, Any], at: dict[str, Any]) -> None:
        self.state.record_eval(dict(at) | {"results": res})
        self.board.evaluation(res, at["decisions_trained"])

    def poll(self) -> None:
        """Record the evaluation in flight if it is done."""
        if self.in_flight is not None and ray.wait([self.in_flight[0]], timeout=0)[0]:
            self.finish()

    def abandon(self, timeout_s: float = 10.0) -> None:
        """Cancel the evaluation in flight (a run that stops on an error) and wait until Ray has settled it:
        a task still running when an embedded Ray shuts down can have Ray end this whole process when the
        task's failure reaches it after the disconnect (seen in the test suite, the driver gone mid-run)."""
        in_flight, self.in_flight = self.in_flight, None
        if in_flight is None or not ray.is_initialized():
            return
        ref = in_flight[0]
        try:
            ray.cancel(ref, force=True)
            ray.wait([ref], timeout=timeout_s)
        except Exception:  # noqa: BLE001  Ray itself failing here must not hide the error the run stops on
            pass

    def finish(self) -> None:
        """Wait for the evaluation in flight (if any) and record it: it is part of the curve."""
        if self.in_flight is not None:
            ref, at = self.in_flight
            self.in_flight = None
            self._record(ray.get(ref), at)
