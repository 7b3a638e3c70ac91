"""The one check of a loaded network, whatever runs it: its outputs on known positions.

The hashes a checkpoint or an exported model records catch a file damaged after it
was written, not weights that were already broken when they were written (a run that
diverged to NaN, a hand-edited tensor).  So every loader (the PyTorch checkpoint, the
ONNX model, and through them export, search, evaluation and the server) runs the
network once on the first decisions of fixed deals and refuses it, in one line, unless
each row is a probability distribution with a legal argmax and a finite value of a
plausible size.  A network refused here would otherwise answer every request with a
pass or the lowest play.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from sam_env import obs as obs_mod
from sam_env.game import Game
from sam_env.table import Table

from .format import CheckpointError

MAX_VALUE = 1000.0         # |value| in units of the training reward_scale: no game comes near it
KNOWN_POSITIONS = 16       # decisions of fixed deals, run once at load

#: ``(obs float32[B, OBS_SIZE], masks float32[B, 201]) -> (probs [B, 201], value [B])``
Infer = Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, np.ndarray]"]


def output_problem(probs: np.ndarray, value: np.ndarray, mask: np.ndarray) -> str | None:
    """What is wrong with a batch of the model's outputs, or None: each row's probabilities must be
    finite, sum to 1 over the legal actions and put the most on a legal one, and its value must be
    finite and at most :data:`MAX_VALUE` in size."""
    legal = np.asarray(mask) > 0
    if not np.isfinite(probs).all():
        return "its probabilities are not finite"
    if not np.isfinite(value).all():
        return "its value is not finite"
    worst = float(np.abs(value).max(initial=0.0))
    if worst > MAX_VALUE:
        return f"its value {worst:.3g} is beyond any game's"
    if (np.abs(np.where(legal, probs, 0.0).sum(axis=1) - 1.0) > 1e-3).any():
        return "its probabilities of the legal moves do not sum to 1"
    if not legal[np.arange(len(legal)), np.argmax(probs, axis=1)].all():
        return "its most probable move is illegal"
    return None


def known_positions(table: Table | None, count: int = KNOWN_POSITIONS) -> tuple[np.ndarray, np.ndarray]:
    """``(obs, masks)`` of the first decisions of fixed deals at ``table`` (the default table when
    None): inputs on which any sound policy gives a distribution and a finite value."""
    table = table or Table.default()
    rules, players = table.rules, table.players
    obs, masks, seed = [], [], 0
    while len(obs) < count:
        g = Game.new(rules, players, seed=seed)
        seed += 1
        while not g.finished and len(obs) < count:
            obs.append(obs_mod.encode(g, g.to_act))
            masks.append(g.legal_mask())
            g.apply(int(np.flatnonzero(g.legal_mask())[-1]))
    return np.stack(obs).astype(np.float32), np.stack(masks).astype(np.float32)


def check_known_positions(infer: Infer, tables: "tuple[Table, ...] | None", where: str, remedy: str) -> None:
    """Run ``infer`` on known positions of the first trained table; CheckpointError (one line:
    ``WHERE: on known positions PROBLEM: the network is damaged (REMEDY)``) unless sound."""
    obs, masks = known_positions(tables[0] if tables else None)
    probs, value = infer(obs, masks)
    problem = output_problem(np.asarray(probs), np.asarray(value).reshape(-1), masks)
    if problem is not None:
        raise CheckpointError(f"{where}: on known positions {problem}: the network is damaged ({remedy})")
