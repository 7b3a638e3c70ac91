"""The hand belief's network and its files: where a seat's unseen cards are likely to be.

Play-time search (:mod:`agents.players.search`) deals the cards a seat cannot see
into sampled worlds; the belief network reads the seat's own observation
(nothing hidden) and gives, for each rank, the share of its unseen cards held
by each other seat and by the undealt stock.  It is learned from play by
:mod:`training.tools.belief` and shipped beside the policy:
``belief.safetensors`` (weights) and ``belief.json`` (how it was made, the
weights' SHA-256, the observation it reads).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from torch import nn

from sam_env import core
from sam_env import obs as obs_mod
from sam_env.atomic import write_atomic, write_json_atomic

from .format import (BELIEF_FILE, BELIEF_META, CheckpointError, belief_shapes, check_size, check_tensors,
                     check_versions, file_sha256, read_json_file)

BELIEF_FORMAT = "samloc-belief/1"
#: Where an unseen card can be: 0 the undealt stock, 1…4 the relative seats after the observer.
PLACES = core.MAX_PLAYERS
NR = core.NR


class BeliefNet(nn.Module):
    """``forward(obs) -> logits [B, PLACES, 13]``; a softmax over places gives, per rank,
    the share of its unseen cards at each place."""

    def __init__(self, obs_size: int = obs_mod.OBS_SIZE, hidden: int = 512):
        super().__init__()
        self.obs_size, self.hidden = obs_size, hidden
        self.body = nn.Sequential(nn.Linear(obs_size, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                  nn.ReLU())
        self.out = nn.Linear(hidden, PLACES * NR)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.out(self.body(obs)).view(-1, PLACES, NR)

    @torch.no_grad()
    def shares(self, obs: np.ndarray) -> np.ndarray:
        """Per decision, rank and place: the believed share of the rank's unseen cards (float64)."""
        o = torch.from_numpy(np.ascontiguousarray(obs, dtype=np.float32))
        return torch.softmax(self(o), dim=1).double().numpy()


def save_belief(ckpt_dir: str | Path, net: BeliefNet, info: dict[str, Any]) -> None:
    """Weights and their description into a checkpoint folder, each written atomically."""
    d = Path(ckpt_dir)
    blob = safetensors_bytes({k: v.contiguous() for k, v in net.state_dict().items()})
    write_atomic(d / BELIEF_FILE, blob)
    write_json_atomic(d / BELIEF_META, {"format": BELIEF_FORMAT, "obs_version": obs_mod.OBS_VERSION,
                                        "obs_size": net.obs_size, "hidden": net.hidden,
                                        "sha256": hashlib.sha256(blob).hexdigest(), **info})


def load_belief(ckpt_dir: str | Path) -> BeliefNet | None:
    """The checkpoint's belief network, or None when it has none.  Raises ValueError (one
    line) for a belief that is corrupt, truncated or made for another observation."""
    d = Path(ckpt_dir)
    wfile, mfile = d / BELIEF_FILE, d / BELIEF_META
    if not wfile.exists() and not mfile.exists():
        return None
    try:
        meta = read_json_file(mfile)
        if not isinstance(meta, dict) or meta.get("format") != BELIEF_FORMAT:
            raise ValueError(f"{BELIEF_META} is not {BELIEF_FORMAT}")
        if file_sha256(wfile) != meta.get("sha256"):
            raise ValueError(f"{BELIEF_FILE} does not match the checksum in {BELIEF_META}"
                             " (truncated or changed)")
    except (OSError, ValueError) as exc:  # I/O, a file not regular or too big, JSON, checksum
        raise ValueError(f"{d}: unreadable belief ({str(exc).splitlines()[0]})") from None
    if "obs_version" not in meta or "obs_size" not in meta:
        raise CheckpointError(f"{d}: the belief's metadata does not say which observation it reads")
    check_versions(meta, f"{d}: the belief", "learn it again with samloc belief")
    hidden = meta.get("hidden")
    if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < 1:
        raise ValueError(f"{d}: the belief's metadata has no valid 'hidden' size")
    shapes = belief_shapes(obs_mod.OBS_SIZE, hidden, PLACES, NR)
    check_size(shapes, f"{d}: the belief")
    check_tensors(wfile, shapes, f"{d}: the belief")  # before anything is allocated
    try:
        tensors = load_file(str(wfile))
    except (OSError, SafetensorError) as exc:
        raise ValueError(f"{d}: unreadable belief ({str(exc).splitlines()[0]})") from None
    net = BeliefNet(obs_mod.OBS_SIZE, hidden)
    try:
        net.load_state_dict(tensors)
    except RuntimeError as exc:
        raise ValueError(f"{d}: belief weights do not fit the network ({str(exc).splitlines()[0]})") from None
    return net.eval()
