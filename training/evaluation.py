"""Evaluation of the policy being trained, through the evaluation harness (duplicate deals)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.nets.factory import build_network
from agents.nets.interface import PolicyNetwork
from agents.policy_agent import PolicyAgent

from .rollout import load_numpy_weights


def _net(weights: dict[str, np.ndarray], hp: dict[str, Any]) -> PolicyNetwork:
    net = build_network(hp)
    load_numpy_weights(net, weights)
    return net.eval()


def _opponent(spec: str, snap: dict[str, np.ndarray] | None, hp: dict[str, int], seed: int) -> Any:
    if spec == "snapshot":
        return PolicyAgent(_net(snap, hp), seed=seed, name="snapshot") if snap is not None else None
    from agents import make_agent
    return make_agent(spec, seed=seed)


def evaluate_against(weights: dict[str, np.ndarray], hp: dict[str, int], opponent: Any, rules: Any,
                     players: int, deals: int, seed: int) -> dict[str, Any]:
    """``agents.evaluate`` of the greedy policy of ``weights`` against one opponent (a spec or an Agent the
    caller made, e.g. with a temperature), on the duplicate deals of ``seed``; without the score histogram."""
    from agents.evaluate import evaluate

    torch.set_num_threads(1)
    agent = PolicyAgent(_net(weights, hp), seed=seed, name="learner")
    res = evaluate(agent, opponent, rules=rules, players=players, deals=deals, seed=seed)
    return {k: v for k, v in res.items() if k != "score_hist"}


def evaluate_weights(weights: dict[str, np.ndarray], hp: dict[str, int], opponents: list[str],
                     snap: dict[str, np.ndarray] | None, rules: str, players: int, deals: int,
                     seed: int) -> dict[str, dict[str, Any]]:
    """``{opponent: evaluate(...) result}`` for the greedy policy against each opponent spec."""
    out: dict[str, dict[str, Any]] = {}
    for i, spec in enumerate(opponents):
        opp = _opponent(spec, snap, hp, seed + 1 + i)
        if opp is None:  # no snapshot yet
            continue
        out[spec] = evaluate_against(weights, hp, opp, rules, players, deals, seed)
    return out
