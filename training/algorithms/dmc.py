"""Deep Monte-Carlo (``algorithm: dmc``): DouZero's recipe (Zha et al., 2021) as a part of the run loop.

- **Acting.** The learner's seats play ε-greedy on Q (``dmc.epsilon``); past snapshots in the opponent
  pool play greedily, as a served network does.
- **Targets.** Each decision's target is the Monte-Carlo return of its whole game: every lá its seat
  receives from that move to the end of the game (chops, the settlement), divided by
  ``env.reward_scale``.  No bootstrapping: a decision whose game is still running when a rollout ends is
  kept by the worker and shipped with the rollout in which its game ends.
- **Loss.** Mean squared error of the chosen move's Q against its return; the value head (and the critic)
  regress on the same returns with weight ``dmc.value_coef``, so the search's leaves and the exported
  value stay meaningful.
- **The Q-network.** The network's action head over the fixed action table, masked to the legal moves,
  is read as Q.  DouZero feeds each candidate move to the network as an input because Dou Dizhu's moves
  are too many to enumerate; here every move is one of the engine's fixed table, so one forward pass
  scores every legal move at once, and the network is the same module PPO trains: it is checkpointed,
  exported to ONNX, served (greedy: the highest Q), evaluated, rated and searched like any other.

Everything else (the Ray workers and their games, compact rollouts, the pool of past snapshots,
checkpoints, TensorBoard, the evaluation) is the run loop's and :mod:`training.run.rollout`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from ..config import MAX_BATCH_DECISIONS, Section, TrainConfig, need
from ..run import compact
from ..run.algorithm import Algorithm, RunContext
from ..run.rollout import MAX_SEATS, RolloutEngine, RolloutTargets, RolloutStream, rollout_actor_class
from .losses import Step
from .on_policy import value_regression

@dataclass
class DMCConfig(Section):
    """Deep Monte-Carlo (``algorithm: dmc``, after DouZero): the network's action head is a Q-value per move
    of the action table, learned by regression on each decision's whole-game return (docs/training.md)."""

    epsilon: float = 0.01
    """Share of the learner's moves drawn uniformly among the legal ones in self-play (the rest: the
    highest Q); past snapshots in the pool play greedily."""
    lr: float = 3e-4
    """Adam learning rate."""
    epochs: int = 1
    """Passes over each batch (DouZero: each decision is learned from once)."""
    minibatch: int = 4096
    """Decisions per gradient step."""
    batch_decisions: int = 16384
    """Decisions with a known return gathered before one update."""
    value_coef: float = 0.5
    """Weight of the value head's (and the critic's) regression on the same returns: they are what the
    search's leaves and the exported value read."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""

    def check(self, cfg: TrainConfig, name: str) -> None:
        need(0 <= self.epsilon <= 1, f"{name}.epsilon must be from 0 to 1")
        need(self.lr > 0 and self.epochs >= 1 and self.minibatch >= 1 and self.value_coef >= 0
             and self.max_grad_norm > 0,
             f"{name}.lr, epochs, minibatch and max_grad_norm must be positive, {name}.value_coef >= 0")
        need(1 <= self.batch_decisions <= MAX_BATCH_DECISIONS,
             f"{name}.batch_decisions must be from 1 to {MAX_BATCH_DECISIONS:,}")


#: what a worker keeps of a learner decision whose game has not ended yet, besides the decision packed
#: (training.run.compact): its seat's lá before the move, its game slot and its seat
CARRY = ("c0", "env", "seat")


def first_end(ended: np.ndarray) -> np.ndarray:
    """``[T, N]``: the first step at or after ``t`` at which game slot ``n``'s game ended (-1: none yet)."""
    out = np.empty(ended.shape, dtype=np.int64)
    nxt = np.full(ended.shape[1], -1, dtype=np.int64)
    for t in range(ended.shape[0] - 1, -1, -1):
        nxt = np.where(ended[t], t, nxt)
        out[t] = nxt
    return out


@dataclass
class ReturnTrack:
    """What the DMC engine keeps per stream (``RolloutStream.extra``) to give each decision its return."""

    cum: np.ndarray
    """``[n, MAX_SEATS]``: each seat's lá so far in the current game."""
    c0: np.ndarray
    """``[T, n]``: the acting seat's ``cum`` before its move at each step."""
    acted: np.ndarray
    """``[T, n]``: the seat that acted at each step."""
    ended: np.ndarray
    """``[T, n]``: whether the game ended at that step."""
    final: np.ndarray
    """``[T, n, MAX_SEATS]``: ``cum`` after each step (at a game's end: its result for every seat)."""
    carry: dict[str, np.ndarray]
    """Packed decisions of games still running when a rollout ended, with ``c0``, ``env`` and ``seat``."""

    @classmethod
    def of(cls, st: RolloutStream) -> "ReturnTrack":
        T, n = st.T, st.n
        return cls(np.zeros((n, MAX_SEATS)), np.zeros((T, n)), np.zeros((T, n), np.int64),
                   np.zeros((T, n), np.bool_), np.zeros((T, n, MAX_SEATS)),
                   compact.pack(st.b_obs[:0, 0], st.b_mask[:0, 0], st.b_hid[:0, 0], st.b_act[:0, 0],
                                {"c0": np.zeros(0), "env": np.zeros(0, np.int64),
                                 "seat": np.zeros(0, np.int64)}))


class MonteCarloEngine(RolloutEngine):
    """The rollout worker's engine for DMC: ε-greedy play, whole-game returns.

    Per game slot it keeps each seat's lá so far in the current game (``cum``).  A decision stores its
    seat's ``cum`` before the move (``c0``); when its game ends, its return is the seat's final ``cum``
    less ``c0``.  Decisions of games still running at the end of a rollout wait in ``carry``.
    """

    def __init__(self, cfg: TrainConfig, worker_id: int, seed: int, targets: RolloutTargets | None = None):
        super().__init__(cfg, worker_id, seed, RolloutTargets(teach=False))  # whole-game returns: no GAE
        self.dmc: DMCConfig = cfg.section("dmc")
        for st in self.streams:
            st.extra = ReturnTrack.of(st)

    def explore(self, logits: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The highest Q, or with probability ε a legal move drawn uniformly; no log-probabilities."""
        greedy = logits.argmax(-1)
        drawn = torch.multinomial((mask > 0).float(), 1, generator=self.gen).squeeze(-1)
        explore = torch.rand(greedy.shape[0], generator=self.gen) < self.dmc.epsilon
        return torch.where(explore, drawn, greedy), torch.zeros(greedy.shape[0])

    def pool_choice(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(-1)

    def stepped(self, st: RolloutStream, t: int, seat: np.ndarray, rewards: np.ndarray,
                done: np.ndarray) -> None:
        rows, tr = np.arange(st.n), st.extra
        tr.acted[t] = seat
        tr.c0[t] = tr.cum[rows, seat]
        tr.cum += rewards[:, :MAX_SEATS] / self.cfg.env.reward_scale
        tr.ended[t] = done
        tr.final[t] = tr.cum
        tr.cum[done] = 0.0

    def targets(self, st: RolloutStream, pend: np.ndarray, nxt: np.ndarray, term: np.ndarray,
                rew: np.ndarray) -> dict[str, np.ndarray]:
        """The decisions whose games ended in this rollout (earlier ones carried in first), each with its
        return ``ret``; the others are carried to the next rollout."""
        tr = st.extra
        end = first_end(tr.ended)
        v = st.b_valid
        t_idx, e_idx = np.nonzero(v)  # the order of st.b_obs[v]
        new = compact.pack(st.b_obs[v], st.b_mask[v], st.b_hid[v], st.b_act[v],
                           {"c0": tr.c0[v], "env": e_idx, "seat": tr.acted[v]})
        rows = compact.concat([tr.carry, new])
        d = np.concatenate([end[0, tr.carry["env"]], end[t_idx, e_idx]])
        done = d >= 0
        ret = tr.final[d[done], rows["env"][done], rows["seat"][done]] - rows["c0"][done]
        tr.carry = {k: a[~done] for k, a in rows.items()}
        out = {k: a[done] for k, a in rows.items() if k not in CARRY}
        out["ret"] = ret.astype(np.float32)
        return out

    # ---- deterministic mode: the carried decisions and the lá so far are a part of the games' state ---
    def get_state(self) -> dict[str, np.ndarray]:
        out = super().get_state()
        for i, tr in enumerate(st.extra for st in self.streams):
            out[f"{i}.cum"] = tr.cum.copy()
            out |= {f"{i}.carry.{k}": a.copy() for k, a in tr.carry.items()}
        return out

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        super().set_state(state)
        for i, tr in enumerate(st.extra for st in self.streams):
            missing = [k for k in (f"{i}.cum", *(f"{i}.carry.{k}" for k in tr.carry)) if k not in state]
            if missing or np.shape(state[f"{i}.cum"]) != tr.cum.shape:
                raise ValueError(f"rollout state: {(missing or [f'{i}.cum'])[0]}"
                                 " does not fit this DMC engine")
            tr.cum[:] = state[f"{i}.cum"]
            tr.carry = {k: np.asarray(state[f"{i}.carry.{k}"]).copy() for k in tr.carry}


def q_update(net: torch.nn.Module, step: Step, data: dict[str, torch.Tensor], cfg: DMCConfig,
             gen: torch.Generator, bf16: bool,
             between_steps: Callable[[], None] | None = None) -> dict[str, float]:
    """``cfg.epochs`` passes of minibatch regression of Q(s, a) (and the value head, and the critic) on the
    returns ``data["ret"]``, each minibatch one ``step`` (the learner's); returns the mean losses and
    figures of the batch."""
    n = int(data["act"].shape[0])
    names = ("q_loss", "value_loss", "q_mean", "grad_norm")
    sums, steps = torch.zeros(len(names)), 0
    net.train()
    for _ in range(cfg.epochs):
        order = torch.randperm(n, generator=gen).to(data["act"].device)
        for start in range(0, n, cfg.minibatch):
            i = order[start:start + cfg.minibatch]
            ret = data["ret"][i].float()
            with torch.autocast(data["obs"].device.type, torch.bfloat16, enabled=bf16):
                q_all, value, base = net.train_forward(data["obs"][i], data["mask"][i], data["hid"][i])
            q = q_all.float().gather(1, data["act"][i][:, None]).squeeze(-1)
            q_loss = (q - ret).pow(2).mean()
            v_loss = value_regression(net, value, base, ret)
            grad_norm = step(q_loss + cfg.value_coef * v_loss)
            sums += torch.stack([q_loss.detach(), v_loss.detach(), q.detach().mean(),
                                 grad_norm.float()]).cpu()
            steps += 1
            if between_steps is not None:
                between_steps()
    net.eval()
    out = dict(zip(names, (sums / max(steps, 1)).tolist()))
    out["return_mean"] = float(data["ret"].float().mean())
    return out


class DeepMonteCarlo(Algorithm):
    """Deep Monte-Carlo on the rollout workers' self-play (see the module docstring)."""

    name = "dmc"
    Settings = DMCConfig

    def rollout_actor(self) -> type:
        return rollout_actor_class(MonteCarloEngine)

    def learn(self, ctx: RunContext, batches: list[dict[str, Any]]) -> dict[str, float]:
        """One regression update on these rollouts' finished decisions."""
        dm, learner = self.settings, self.learner
        lags = [self.state.counters.updates - b["version"] for b in batches]
        losses = q_update(learner.net, lambda loss: learner.step(loss, dm.max_grad_norm),
                          learner.batch([b["batch"] for b in batches]), dm, self.state.gen,
                          self.cfg.learner.precision == "bf16", ctx.between_steps)
        return losses | {"policy_lag": float(np.mean(lags))}

    def log_scalars(self, ctx: RunContext, step: int) -> None:
        ctx.board.scalar("charts/epsilon", self.settings.epsilon, step)

    def display_rows(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        ls = self.losses
        if "q_loss" not in ls:
            return [], []
        return [("losses", f"q {ls['q_loss']:.4f}  value {ls['value_loss']:.4f}  Q {ls['q_mean']:+.3f}"
                           f"  return {ls['return_mean']:+.3f}")], []
