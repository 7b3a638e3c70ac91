"""An evaluation's chunks of deals played apart: side by side in worker processes (:class:`EvalPool`),
or kept on disk as they finish so that an interrupted run continues where it stopped (:class:`ChunkStore`).

Both are sound only for replayable agents (:attr:`Agent.replayable`): a chunk then plays the same
games alone as inside the whole run, so the result is the one-process, uninterrupted one.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sam_env.atomic import write_atomic, write_json_atomic
from sam_env.table import Table

from ..base import Agent
from ..nets.format import BELIEF_FILE, BELIEF_META, META_FILE, MODEL_FILE, CheckpointError, resolve
from ..players.heuristic import HeuristicAgent
from ..players.random_agent import RandomAgent
from .matches import play_chunk
from ..registry import make_agent, parse_spec

_pool_agents: tuple[Agent, Agent] | None = None  # a worker process's two agents, built once


def _pool_init(agent: str, opponents: str, seed: int) -> None:
    """A worker's start: the agents built as evaluate builds them, so each chunk plays what it plays in
    one process.  The workers are sized to cores, so each plays on one thread: it inherits the parent's
    environment (``samloc``'s entry point sets one thread), and a network's torch is held to one."""
    global _pool_agents
    _pool_agents = (make_agent(agent, seed=seed), make_agent(opponents, seed=seed + 1))
    torch = sys.modules.get("torch")  # loaded by a network's agent; rule-based pools never import it
    if torch is not None:
        torch.set_num_threads(1)


def _pool_chunk(table: Table, lo: int, hi: int, hands: np.ndarray, openers: np.ndarray,
                logging: bool) -> tuple[int, int, dict[str, np.ndarray], list[dict[str, Any]], float]:
    assert _pool_agents is not None, "_pool_init runs first"
    a, b = _pool_agents
    t0 = time.perf_counter()
    part, recs = play_chunk(a, b, table, hands, openers, logging)
    return lo, hi, part, recs, time.perf_counter() - t0


def check_workers(workers: int) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, not {workers!r}")
    return workers


class EvalPool:
    """Worker processes that play an evaluation's chunks side by side (``samloc eval --workers N``),
    each holding its own copy of the two agents.  Only replayable agents (:attr:`Agent.replayable`)
    qualify: their chunks play alone what they play in one process, so the result is the one-process
    result to the digit, whatever the number of workers.  One pool serves every table of a run
    (:func:`evaluate_tables`); the agents are given as specs, which each worker loads."""

    def __init__(self, agent: "str | Agent", opponents: "str | Agent", seed: int, workers: int):
        if not (isinstance(agent, str) and isinstance(opponents, str)):
            raise ValueError("worker processes load the agents themselves: give them as specs (strings),"
                             " not Agent objects")
        if check_workers(workers) < 2:
            raise ValueError(f"an evaluation pool needs at least 2 workers, not {workers!r}")
        self.key = (agent, opponents, int(seed))
        self.workers = workers
        self._executor = ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                                             initializer=_pool_init, initargs=self.key)

    def submit(self, *args: Any) -> Future:
        return self._executor.submit(_pool_chunk, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "EvalPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()



CHUNKS = "chunks"  # the folder of finished chunks inside a run's --out folder, until the run completes
CHUNKS_FORMAT = "samloc-eval-chunks/1"


#: what a checkpoint agent plays from: its weights and metadata (a search's belief too, when it has one)
_PLAYED_FILES = (MODEL_FILE, META_FILE, BELIEF_FILE, BELIEF_META)


def agent_files(spec: "str | Agent") -> dict[str, str]:
    """The sha256 of each file a spec plays from (a run folder's newest good checkpoint, found as the
    agent found it: its weights, metadata and belief; an ONNX model and its sidecar), by its path, so
    finished chunks are never mixed with games of other weights under the same name; {} for built-in
    agents.  ValueError for an Agent object that is not built in: its files are not known (give its
    spec), and without them its chunks would be keyed on nothing."""
    if not isinstance(spec, str):
        if isinstance(spec, (RandomAgent, HeuristicAgent)):
            return {}
        raise ValueError(f"{spec.name}: an evaluation that keeps its chunks keys them on the agent's files;"
                         " give the agent as its spec (the path it was loaded from)")
    s = parse_spec(spec)
    if s.kind == "onnx":
        model = Path(s.target)
        files = [model, model.with_suffix(".json")]  # and its sidecar (onnx_agent.sidecar_path)
    elif s.kind in ("checkpoint", "search"):
        try:
            ckpt = resolve(s.target)  # the checkpoint the agent plays, as make_agent finds it
        except CheckpointError as exc:
            raise ValueError(str(exc)) from None
        files = [ckpt / name for name in _PLAYED_FILES]
    else:
        return {}
    out = {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}
    if not out:
        raise ValueError(f"{spec}: no model file to key its chunks on")
    return out


def not_resumable(agents: Sequence[Agent], save_games: str | None) -> str | None:
    """Why an evaluation of ``agents`` cannot be continued from its finished chunks, or None if it can:
    a chunk must play the same games alone as inside the whole run."""
    if save_games is not None:
        return "--save-games writes every game, and the games of chunks played before are not kept"
    return next((f"{a.name} plays differently alone than in the whole run (a sampling temperature, a"
                 " random stream, a deadline or a remote server)" for a in agents if not a.replayable), None)


class ChunkStore:
    """One table's finished chunks (the statistics of their games), kept until the evaluation completes,
    so that an interrupted run continues where it stopped (``samloc eval --resume``).

    Sound only for replayable agents (:attr:`Agent.replayable`): a chunk then plays the same games alone
    as inside the whole run, so a resumed run's result is the uninterrupted one's.  ``key`` says what
    was evaluated; chunks of any other evaluation are refused, never mixed in."""

    def __init__(self, folder: str | Path, key: dict[str, Any]):
        self.folder = Path(folder)
        self.key = json.loads(json.dumps(key))  # as it reads back (tuples as lists)
        keyfile = self.folder / "key.json"
        if keyfile.is_file():
            saved = json.loads(keyfile.read_text(encoding="utf-8"))
            diff = sorted(k for k in self.key.keys() | saved.keys() if self.key.get(k) != saved.get(k))
            if diff:
                raise ValueError(f"{self.folder} holds chunks of another evaluation (it differs in"
                                 f" {', '.join(diff)}); use another --out")
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_json_atomic(keyfile, self.key)

    def _path(self, lo: int, hi: int) -> Path:
        return self.folder / f"deals_{lo:08d}_{hi:08d}.npz"

    def load(self, lo: int, hi: int) -> tuple[dict[str, np.ndarray], float] | None:
        """A finished chunk's statistics and the seconds it took, or None if it is still to play."""
        path = self._path(lo, hi)
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            part = {k: z[k] for k in z.files if k != "seconds"}
            return part, float(z["seconds"])

    def save(self, lo: int, hi: int, part: dict[str, np.ndarray], seconds: float) -> None:
        buf = io.BytesIO()
        np.savez(buf, seconds=np.float64(seconds), **part)
        write_atomic(self._path(lo, hi), buf.getvalue())

    def done(self) -> int:
        return sum(1 for _ in self.folder.glob("deals_*.npz"))

