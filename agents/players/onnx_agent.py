"""A player that runs an exported policy (``samloc export``) through onnxruntime.

This is how the trained bot is served: no PyTorch, one small ONNX file and
its JSON sidecar.  The model takes ``obs`` (float32[B, OBS_SIZE], from
:func:`sam_env.obs.encode`) and ``mask`` (float32[B, 201], 1 = legal) and
returns ``probs`` (float32[B, 201], zero on illegal actions) and ``value``
(float32[B], the policy's estimate of the seat's lá).

Greedy by default (``temperature=0``: the most probable legal action, ties to
the lowest id), so the same position always gets the same answer.  With a
temperature ``T > 0`` the action is sampled from ``probs ** (1 / T)``.

Loading checks what it loads before anyone is answered: the ``.onnx`` bytes
against the ``onnx_sha256`` its sidecar records (``samloc export`` writes it;
a lone file, or one exported before the field existed, has only the next
check), then its graph, read before onnxruntime builds it (:mod:`agents.players.onnx_check`:
no loops, a symbolic batch dimension, bounded sizes and cost), then one run on known positions
within :data:`LOAD_CHECK_S`, whose outputs must be a probability
distribution with a legal argmax and a finite value of a plausible size (the
check every loader runs: :mod:`agents.nets.outputs`).
Every later output is checked the same way: a damaged model raises
:class:`~agents.base.AgentFailure` rather than answer with a NaN.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from sam_env import obs as obs_mod
from sam_env.actions import NUM_ACTIONS
from sam_env.game import Game
from sam_env.table import Table

from ..base import Agent, AgentFailure, check_seat
from ..nets.format import (MODEL_FILE, CheckpointError, check_versions, file_sha256, open_regular,
                           parse_tables, read_json_file)
from ..nets.outputs import check_known_positions, output_problem
from .onnx_check import check_graph, one_line

MAX_ONNX_BYTES = 1 << 30   # an exported policy is a few MiB
LOAD_CHECK_S = 10.0        # the known-position run at load must end by then (a policy takes ~1 ms)


def sidecar_path(model_path: str | Path) -> Path:
    """Where the JSON sidecar of an exported model lives: ``policy.onnx`` → ``policy.json``."""
    return Path(model_path).with_suffix(".json")


def choose_action(probs: np.ndarray, mask: np.ndarray, temperature: float,
                  rng: np.random.Generator | None) -> int:
    """Pick a legal action from a probability row: argmax at T=0, else a sample of p^(1/T)."""
    legal = np.asarray(mask).astype(bool)
    if not legal.any():
        raise ValueError("no legal action to choose from")
    p = np.where(legal, np.asarray(probs, dtype=np.float64), 0.0)
    if temperature <= 0.0 or rng is None:
        if p.max() <= 0.0:  # the model put no mass on any legal action: lowest legal id
            return int(np.argmax(legal))
        return int(np.argmax(p))
    with np.errstate(divide="ignore"):
        logp = np.where(p > 0, np.log(np.maximum(p, 1e-300)) / temperature, -np.inf)
    if not np.isfinite(logp).any():
        logp = np.where(legal, 0.0, -np.inf)
    w = np.exp(logp - logp.max())
    w /= w.sum()
    return int(rng.choice(NUM_ACTIONS, p=w))


class OnnxAgent(Agent):
    """An :class:`agents.base.Agent` that plays from an ONNX policy file."""

    needs_obs = True

    def __init__(self, path: str | Path, seed: int = 0, temperature: float = 0.0, threads: int = 1):
        super().__init__(seed)
        import onnxruntime as ort  # imported here so `samloc replay` never pays for it

        self.path = Path(path)
        if not self.path.exists():
            raise ValueError(f"no ONNX model at {self.path}")
        if not temperature >= 0.0:
            raise ValueError(f"temperature must be 0 (greedy) or positive, not {temperature!r}")
        blob = self._model_bytes()
        self.metadata: dict[str, Any] = self._sidecar(blob)
        check_graph(blob, str(self.path))  # before onnxruntime folds or allocates anything in it
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(blob, opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ValueError(f"cannot load ONNX model {self.path}: {str(exc).splitlines()[0]}") from None
        if not self.metadata:  # no sidecar: what the .onnx itself says
            embedded = self.session.get_modelmeta().custom_metadata_map.get("samloc")
            if embedded:
                try:
                    self.metadata = json.loads(embedded)
                except json.JSONDecodeError:
                    pass
        check_versions(self.metadata, str(self.path), "export it again from its checkpoint")
        names = [i.name for i in self.session.get_inputs()]
        if names != ["obs", "mask"]:
            raise ValueError(f"{self.path} must take inputs obs and mask, not {names}")
        shape = self.session.get_inputs()[0].shape
        if isinstance(shape[-1], int) and shape[-1] != obs_mod.OBS_SIZE:
            raise ValueError(f"{self.path} expects observations of size {shape[-1]}, this engine makes"
                             f" {obs_mod.OBS_SIZE}; export it again from its checkpoint")
        self.name = str(self.metadata.get("name") or self.path.stem)
        self.temperature = float(temperature)
        self.rng = np.random.default_rng(seed)
        check_known_positions(self._timed_infer, self.trained_tables, str(self.path), "export it again")

    def _model_bytes(self) -> bytes:
        """The model file, read once (what is hashed is what runs)."""
        with open_regular(self.path, MAX_ONNX_BYTES) as f:
            return f.read()

    def _sidecar(self, blob: bytes) -> dict[str, Any]:
        """What the sidecar says of the model ({} without one), after checking ``blob`` against the
        SHA-256 it records."""
        side = sidecar_path(self.path)
        if not side.exists():
            return {}
        meta = read_json_file(side)
        if not isinstance(meta, dict):
            raise CheckpointError(f"{side}: not a JSON object")
        recorded = meta.get("onnx_sha256")
        if recorded is not None and hashlib.sha256(blob).hexdigest() != recorded:
            raise CheckpointError(f"{self.path} does not match the onnx_sha256 recorded in {side.name}"
                                  " (damaged or changed since it was exported): export it again")
        return meta

    def check_exported_from(self, ckpt_dir: Path) -> None:
        """Refuse to stand in for a checkpoint folder whose weights are not those this model was
        exported from (the sidecar's ``checkpoint_sha256``): retrained or changed since."""
        weights = Path(ckpt_dir) / MODEL_FILE
        if weights.exists() and self.metadata.get("checkpoint_sha256") != file_sha256(weights):
            raise CheckpointError(f"{self.path} was not exported from {weights} (the checkpoint_sha256 in"
                                  f" {sidecar_path(self.path).name} differs): export it again"
                                  f" (samloc export {ckpt_dir})")

    @property
    def replayable(self) -> bool:
        return self.temperature <= 0.0  # greedy; sampling draws from a running generator

    @property
    def trained_tables(self) -> tuple[Table, ...] | None:
        """From the sidecar; None for a model exported without one (it says nothing of its tables)."""
        if not self.metadata.get("tables") and not self.metadata.get("rules"):
            return None
        return parse_tables(self.metadata, str(self.path))

    # ---- the model ------------------------------------------------------------
    def run(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Batched inference: (probs float32[B, 201], value float32[B]); AgentFailure for outputs
        no sound model gives (:func:`output_problem`)."""
        try:
            probs, value = self._infer(obs, mask)
        except Exception as exc:  # onnxruntime's own types: a 503 naming it, never a 500
            raise AgentFailure(f"the model {self.name} cannot run: {one_line(exc)}") from None
        problem = output_problem(probs, value, mask)
        if problem is not None:
            raise AgentFailure(f"the model {self.name} cannot answer this position: {problem}")
        return probs, value

    def _infer(self, obs: np.ndarray, mask: np.ndarray, options: Any = None) -> tuple[np.ndarray, np.ndarray]:
        probs, value = self.session.run(["probs", "value"], {
            "obs": np.ascontiguousarray(obs, dtype=np.float32),
            "mask": np.ascontiguousarray(mask, dtype=np.float32)}, options)
        return probs, value.reshape(-1)

    def _timed_infer(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_infer` stopped by onnxruntime's terminate flag after :data:`LOAD_CHECK_S`, and
        any failure as one line (the load check's run: the graph's bounds keep it short)."""
        import onnxruntime as ort  # as in __init__
        options = ort.RunOptions()
        timer = threading.Timer(LOAD_CHECK_S, setattr, (options, "terminate", True))
        timer.start()
        try:
            return self._infer(obs, mask, options)
        except Exception as exc:
            why = (f"did not end within {LOAD_CHECK_S:g} s" if options.terminate
                   else f"failed ({one_line(exc)})")
            raise CheckpointError(f"{self.path}: its run on known positions {why}") from None
        finally:
            timer.cancel()

    def policy(self, game: Game, seat: int) -> tuple[np.ndarray, float, np.ndarray]:
        """The model's view of one decision: (probs[201], value, legal mask[201])."""
        check_seat(game, seat)
        mask = game.legal_mask()
        obs = obs_mod.encode(game, seat)
        probs, value = self.run(obs[None, :], mask[None, :])
        return probs[0], float(value[0]), mask

    # ---- the Agent interface ----------------------------------------------------
    def act(self, game: Game, seat: int) -> int:
        probs, _, mask = self.policy(game, seat)
        return choose_action(probs, mask, self.temperature, self.rng)

    def act_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        """One action per engine row, for the seat to act in that row."""
        n = states.shape[0]
        probs, _ = self.run(self.observations(states, rule_array, obs), masks)
        return np.array([choose_action(probs[i], masks[i], self.temperature, self.rng) for i in range(n)],
                        dtype=np.int64)
