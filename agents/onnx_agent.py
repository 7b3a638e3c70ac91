"""A player that runs an exported policy (``samloc export``) through onnxruntime.

This is how the trained bot is served: no PyTorch, one small ONNX file and
its JSON sidecar.  The model takes ``obs`` (float32[B, OBS_SIZE], from
:func:`sam_env.obs.encode`) and ``mask`` (float32[B, 201], 1 = legal) and
returns ``probs`` (float32[B, 201], zero on illegal actions) and ``value``
(float32[B], the policy's estimate of the seat's lá).

Greedy by default (``temperature=0``: the most probable legal action, ties to
the lowest id), so the same position always gets the same answer.  With a
temperature ``T > 0`` the action is sampled from ``probs ** (1 / T)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sam_env.actions import NUM_ACTIONS
from sam_env.game import Game

from .base import Agent, check_seat
from .nets.format import Table, check_versions, parse_tables


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

        from sam_env import obs as obs_mod

        self.path = Path(path)
        if not self.path.is_file():
            raise ValueError(f"no ONNX model at {self.path}")
        if not temperature >= 0.0:
            raise ValueError(f"temperature must be 0 (greedy) or positive, not {temperature!r}")
        self.metadata: dict[str, Any] = {}
        side = sidecar_path(self.path)  # what the model plays; else what the .onnx itself says (below)
        if side.is_file():
            try:
                self.metadata = json.loads(side.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"cannot read the model's sidecar {side}: {exc}") from None
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(self.path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ValueError(f"cannot load ONNX model {self.path}: {exc}") from None
        if not self.metadata:
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
        self._obs = obs_mod
        self.name = str(self.metadata.get("name") or self.path.stem)
        self.temperature = float(temperature)
        self.rng = np.random.default_rng(seed)

    @property
    def trained_tables(self) -> "tuple[Table, ...] | None":
        """From the sidecar; None for a model exported without one (it says nothing of its tables)."""
        if not self.metadata.get("tables") and not self.metadata.get("rules"):
            return None
        return parse_tables(self.metadata, str(self.path))

    # ---- the model ------------------------------------------------------------
    def run(self, obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Batched inference: (probs float32[B, 201], value float32[B])."""
        probs, value = self.session.run(["probs", "value"], {
            "obs": np.ascontiguousarray(obs, dtype=np.float32),
            "mask": np.ascontiguousarray(mask, dtype=np.float32)})
        return probs, value.reshape(-1)

    def policy(self, game: Game, seat: int) -> tuple[np.ndarray, float, np.ndarray]:
        """The model's view of one decision: (probs[201], value, legal mask[201])."""
        check_seat(game, seat)
        mask = game.legal_mask()
        obs = self._obs.encode(game, seat)
        probs, value = self.run(obs[None, :], mask[None, :])
        return probs[0], float(value[0]), mask

    # ---- the Agent interface ----------------------------------------------------
    def act(self, game: Game, seat: int) -> int:
        probs, _, mask = self.policy(game, seat)
        return choose_action(probs, mask, self.temperature, self.rng)

    def act_batch(self, states: np.ndarray, ru: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        """One action per engine row, for the seat to act in that row."""
        n = states.shape[0]
        probs, _ = self.run(self.observations(states, ru, obs), masks)
        return np.array([choose_action(probs[i], masks[i], self.temperature, self.rng) for i in range(n)],
                        dtype=np.int64)
