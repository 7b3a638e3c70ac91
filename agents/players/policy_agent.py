"""A player that runs a trained PyTorch policy (a ``samloc train`` checkpoint).

Greedy by default (the most probable legal action), so evaluations are
repeatable; ``temperature > 0`` samples from the policy sharpened or flattened
by ``1 / temperature``, from a seeded generator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from sam_env import obs as obs_mod
from sam_env.game import Game
from sam_env.table import Table

from ..base import Agent, check_seat
from ..nets.checkpoint import load_checkpoint
from ..nets.format import CheckpointMeta


class PolicyAgent(Agent):
    """An Agent around a network of any kind (:class:`agents.nets.interface.PolicyNetwork`:
    ``act`` and ``act_batch``)."""

    needs_obs = True

    def __init__(self, net: Any, seed: int = 0, temperature: float = 0.0, name: str = "policy",
                 device: str = "cpu"):
        if not temperature >= 0.0:
            raise ValueError(f"temperature must be 0 (greedy) or positive, not {temperature!r}")
        super().__init__(seed)
        if getattr(net, "obs_size", obs_mod.OBS_SIZE) != obs_mod.OBS_SIZE:
            raise ValueError(f"the policy takes observations of size {net.obs_size}, this engine makes "
                             f"{obs_mod.OBS_SIZE}")
        self.net = net.to(device).eval()
        self.device = device
        self.temperature = float(temperature)
        self.name = name
        self.gen = torch.Generator(device=device).manual_seed(seed)
        # what its checkpoint says of itself (set by load_policy_agent)
        self.meta: CheckpointMeta | None = None

    @property
    def trained_tables(self) -> tuple[Table, ...] | None:
        return self.meta.tables if self.meta is not None else None

    @property
    def replayable(self) -> bool:
        return self.temperature <= 0.0  # greedy; sampling draws from a running generator

    @torch.no_grad()
    def logits(self, obs: np.ndarray, masks: np.ndarray) -> torch.Tensor:
        """Masked logits for a batch of observations and legal masks."""
        o = torch.as_tensor(np.ascontiguousarray(obs, dtype=np.float32), device=self.device)
        m = torch.as_tensor(np.ascontiguousarray(masks), device=self.device)
        if not bool((m > 0).any(dim=1).all()):
            raise ValueError("a decision with no legal action")
        return self.net(o, m)[0]

    @torch.no_grad()
    def choose(self, obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Actions for a batch of observations and legal masks."""
        logits = self.logits(obs, masks)
        if self.temperature <= 0.0:
            return logits.argmax(dim=1).cpu().numpy().astype(np.int64)
        probs = torch.softmax(logits / self.temperature, dim=1)
        return torch.multinomial(probs, 1, generator=self.gen).squeeze(1).cpu().numpy().astype(np.int64)

    def act(self, game: Game, seat: int) -> int:
        check_seat(game, seat)
        obs = obs_mod.encode(game, seat)
        mask = game.legal_mask()
        return int(self.choose(obs[None, :], np.asarray(mask)[None, :])[0])

    def act_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                  masks: np.ndarray) -> np.ndarray:
        """One action per engine row, for the seat to act in that row."""
        return self.choose(self.observations(states, rule_array, obs), masks)


def load_policy_agent(path: str | Path, seed: int = 0, device: str = "cpu",
                      temperature: float = 0.0) -> PolicyAgent:
    """A PolicyAgent from a checkpoint folder or a run folder (its newest good checkpoint).

    Raises :class:`~agents.nets.format.CheckpointError` (a ValueError, one line) for
    a damaged checkpoint or one made for another observation or action table.
    """
    net, meta = load_checkpoint(path, device=device)
    agent = PolicyAgent(net, seed=seed, temperature=temperature, name=meta.name or Path(path).name,
                        device=device)
    agent.meta = meta
    return agent
