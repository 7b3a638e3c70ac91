"""The hand belief: where the cards a seat cannot see are likely to be, learned from play.

Play-time search (``agents/players/search.py``) plays its candidate moves out in drawn
deals of the unseen cards.  Drawn uniformly, those deals ignore everything the
table has shown: who passed on what, what each seat led and kept.  The belief
network reads the seat's own observation (nothing hidden) and gives, for each
rank, the share of its unseen cards held by each other seat and by the
undealt stock.  Search then deals each unseen card with weight
``belief / prior share × room left`` (a flat belief gives exactly the uniform
deal), so the worlds it plays look more like the real one.

It is trained by supervised learning, the true hands being the labels, on
games the trained policy plays against the opponent mix of its own training
(``rollout.opponent_fraction`` × ``heuristic_share`` of the tables are
heuristics, the rest the policy itself, standing in for its snapshots and
self-play).  ``samloc belief CHECKPOINT_DIR`` trains one for a checkpoint;
``samloc train`` does it at the end of a run when ``belief.deals`` > 0.
Files: ``belief.safetensors`` (weights) and ``belief.json`` (how it was made).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from agents.base import Agent
from agents.evaluation.evaluate import evaluate
from agents.nets.belief import NR, PLACES, BeliefNet, load_belief, save_belief
from agents.players.policy_agent import load_policy_agent
from sam_env import core
from sam_env import obs as obs_mod
from sam_env.table import Table


def targets(states: np.ndarray) -> np.ndarray:
    """The labels: for each row's seat to act, its unseen cards per place and rank
    (int8 ``[B, PLACES, 13]``)."""
    n = states[:, core.O_N].astype(np.int64)
    seat = states[:, core.O_TO_ACT].astype(np.int64)
    hands = states[:, core.O_HAND:core.O_HAND + PLACES * NR].reshape(-1, PLACES, NR).astype(np.int64)
    played = states[:, core.O_PLAYED:core.O_PLAYED + PLACES * NR].reshape(-1, PLACES, NR).astype(np.int64)
    rows = np.arange(states.shape[0])
    out = np.zeros((states.shape[0], PLACES, NR), dtype=np.int8)
    held = np.zeros((states.shape[0], NR), dtype=np.int64)
    for r in range(1, PLACES):
        h = np.where((r < n)[:, None], hands[rows, (seat + r) % n], 0)
        out[:, r] = h
        held += h
    out[:, 0] = 4 - hands[rows, seat] - played.sum(1) - held
    return out


def _prior_log_shares(obs: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Log of the uniform deal's shares: each place in proportion to the cards it holds."""
    cells = core.HAND + 1  # cards_left: per relative seat, one-hot 0…10
    left = obs[:, obs_mod.F_LEFT:obs_mod.F_LEFT + PLACES * cells].view(-1, PLACES, cells).argmax(2).float()
    total = tgt.sum((1, 2))
    room = torch.cat([(total - left[:, 1:].sum(1))[:, None], left[:, 1:]], 1)
    return torch.log((room / total[:, None]).clamp_min(1e-9))[:, :, None]


def nll(logits: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood per unseen card (nats)."""
    return -(tgt * torch.log_softmax(logits, dim=1)).sum() / tgt.sum()


def collect(policy: Any, heuristic_share: float, deals: int, tables: list[Table], seed: int,
            progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Observations (float16) and labels at the policy's searched decisions (play phase, a real
    choice), over ``deals`` duplicate deals shared among the (rules, players) ``tables``:
    ``heuristic_share`` of them against heuristics, the rest against the policy itself."""

    obs_parts: list[np.ndarray] = []
    tgt_parts: list[np.ndarray] = []

    class Recorder(Agent):
        needs_obs = True

        def __init__(self) -> None:
            super().__init__(0)
            self.name = policy.name

        def act_batch(self, states: np.ndarray, rule_array: np.ndarray, obs: np.ndarray | None,
                      masks: np.ndarray) -> np.ndarray:
            sel = ((masks > 0).sum(1) > 1) & (states[:, core.O_PHASE] == core.PH_PLAY)
            if sel.any() and obs is not None:
                obs_parts.append(obs[sel].astype(np.float16))
                tgt_parts.append(targets(states[sel]))
            return policy.act_batch(states, rule_array, obs, masks)

        def act(self, game: Any, seat: int) -> int:  # evaluate batches; never called
            raise NotImplementedError

    for t, table in enumerate(tables):
        share = deals // len(tables) + (t < deals % len(tables))
        n_heur = int(round(share * heuristic_share))
        for opp, count, s in (("heuristic", n_heur, 2 * t), (policy, share - n_heur, 2 * t + 1)):
            if count > 0:
                evaluate(Recorder(), opp, table, count, seed * 1_000_003 + s)
                if progress:
                    progress(f"{table.rules.name}, {table.players} players:"
                             f" {sum(len(p) for p in obs_parts):,} decisions recorded")
    count = sum(len(p) for p in obs_parts)
    obs = np.empty((count, obs_mod.OBS_SIZE), dtype=np.float16)
    tgt = np.empty((count, PLACES, NR), dtype=np.int8)
    k = 0
    while obs_parts:  # copy and free chunk by chunk: the observations are gigabytes
        o, t = obs_parts.pop(0), tgt_parts.pop(0)
        obs[k:k + len(o)], tgt[k:k + len(o)] = o, t
        k += len(o)
    return obs, tgt


def fit(obs: np.ndarray, tgt: np.ndarray, hidden: int = 512, epochs: int = 4, batch: int = 1024,
        lr: float = 1e-3, holdout: int = 50_000, seed: int = 0, incumbent: BeliefNet | None = None,
        progress: Callable[[str], None] | None = None) -> tuple[BeliefNet, dict[str, float]]:
    """Train a BeliefNet (Adam, one-cycle learning rate); returns it and its held-out losses.

    ``incumbent``, the belief the new one would replace, is scored on the same held-out decisions
    (``incumbent_nll``): the one comparison that says whether learning it again helped, since both
    beliefs then face the same network's play."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(tgt))
    holdout = min(holdout, len(tgt) // 10)
    hold, train = np.sort(perm[:holdout]), perm[holdout:]
    if len(train) < 64:
        raise ValueError(f"too few decisions to train a belief ({len(tgt)}); play more deals")
    batch = min(batch, len(train))
    net = BeliefNet(obs.shape[1], hidden)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    steps = epochs * (len(train) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps)
    ho = torch.from_numpy(obs[hold].astype(np.float32))
    ht = torch.from_numpy(tgt[hold].astype(np.float32))
    with torch.no_grad():
        prior = float(-(ht * _prior_log_shares(ho, ht)).sum() / ht.sum())
        rival = {} if incumbent is None else {"incumbent_nll": float(nll(incumbent.eval()(ho), ht))}
    for ep in range(epochs):
        order = rng.permutation(train)
        for i in range(0, len(order) - batch + 1, batch):
            idx = np.sort(order[i:i + batch])
            loss = nll(net(torch.from_numpy(obs[idx].astype(np.float32))),
                       torch.from_numpy(tgt[idx].astype(np.float32)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        with torch.no_grad():
            held = float(nll(net(ho), ht))
        if progress:
            progress(f"epoch {ep + 1}/{epochs}: held-out {held:.4f} nats/card (uniform deal {prior:.4f})")
    net.eval()
    return net, {"holdout_nll": held, "uniform_nll": prior, "holdout": int(holdout), "train": int(len(train)),
                 **rival}


def train_belief(ckpt_dir: str | Path, deals: int, epochs: int = 4, hidden: int = 512, seed: int = 0,
                 command: str = "", progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Play, learn and save the belief of the checkpoint in ``ckpt_dir``; returns what ``belief.json`` says
    (with ``incumbent_nll``, the replaced belief's held-out loss on the same decisions, when there was
    one)."""

    t0 = time.time()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    policy = load_policy_agent(ckpt_dir, seed=seed)
    try:
        incumbent = load_belief(ckpt_dir)
    except ValueError as exc:  # replaced all the same: learning it again is the mend
        incumbent = None
        if progress:
            progress(f"the belief there is not scored: {exc}")
    share = policy.meta.heuristic_share
    tables = list(policy.meta.tables)
    obs, tgt = collect(policy, share, deals, tables, seed, progress)
    t_play = time.time() - t0
    net, losses = fit(obs, tgt, hidden=hidden, epochs=epochs, seed=seed, incumbent=incumbent,
                      progress=progress)
    info = {"command": command, "deals": deals, "heuristic_share": round(share, 6),
            "tables": [t.to_record() for t in tables],
            "epochs": epochs, "seed": seed, "decisions": int(len(tgt)), **losses,
            "play_s": round(t_play, 1), "wall_time_s": round(time.time() - t0, 1)}
    save_belief(ckpt_dir, net, info)
    return info
