"""The policy/value network: a plain MLP with residual blocks and legal-action masking.

``model.kind: mlp``, the default and the registered kind of every shipped
checkpoint (:mod:`agents.nets.interface` is what any kind provides).  Plain
layers only (Linear, ReLU, add, where), so the same module exports to ONNX and
runs under onnxruntime.

An optional critic sees every hand (perfect information): a small MLP over
the policy trunk's features and the hidden hands.  It only trains the policy:
it gives the advantages a baseline without the luck of the unseen cards, as
PerfectDou's perfect-training-imperfect-execution does.  Playing, exporting
and serving use ``forward`` alone, which never reads hidden cards.  Sitting
on the trunk, the critic costs a fraction of a second network, and its
gradient shapes the trunk as a value head would.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from sam_env.actions import NUM_ACTIONS, SAM
from sam_env.obs import FULL_EXTRA, OBS_SIZE

from .format import DEFAULT_KIND
from .interface import MASK_LOGIT, HParam, PolicyNetwork
from .sparse import SparseRows, masked_linear, sparse_linear

#: An observation batch: dense, or its nonzero cells (a CPU learner's input, agents/nets/sparse.py).
Obs = torch.Tensor | SparseRows

SAM_PRIOR_LOGIT = -3.0  # a fresh policy declares Sâm ~5% of the time, not 50%


class PolicyNet(PolicyNetwork):
    """The MLP: ``hidden`` wide, ``layers`` deep (each layer after the first a residual block).

    ``critic_size``: entries of the hidden-hands vector the critic reads (0: no critic).
    """

    kind = DEFAULT_KIND
    takes_sparse_rows = True

    def __init__(self, obs_size: int, num_actions: int = NUM_ACTIONS, hidden: int = 256, layers: int = 2,
                 critic_size: int = 0):
        super().__init__()
        self.obs_size, self.num_actions, self.hidden, self.layers = obs_size, num_actions, hidden, layers
        self.critic_size = critic_size
        self.inp = nn.Linear(obs_size, hidden)
        self.blocks = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers - 1))
        self.pi = nn.Linear(hidden, num_actions)
        self.v = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.pi.weight, 0.01)
        nn.init.zeros_(self.pi.bias)
        if num_actions > SAM:
            # A coin-flip Sâm (±60 lá) would drown every other signal in the first updates.
            with torch.no_grad():
                self.pi.bias[SAM] = SAM_PRIOR_LOGIT
        nn.init.orthogonal_(self.v.weight, 1.0)
        nn.init.zeros_(self.v.bias)
        self.critic = _Critic(hidden + critic_size, hidden) if critic_size > 0 else None

    @property
    def has_critic(self) -> bool:
        return self.critic is not None

    def arguments(self) -> dict[str, HParam]:
        return {"obs_size": self.obs_size, "num_actions": self.num_actions,
                "hidden": self.hidden, "layers": self.layers, "critic_size": self.critic_size}

    def trunk(self, obs: Obs) -> torch.Tensor:
        if torch.is_tensor(obs):
            h = torch.relu(self.inp(obs))
        else:
            h = sparse_linear(obs, self.inp.weight, self.inp.bias, relu=True)
        for blk in self.blocks:
            h = h + torch.relu(blk(h))
        return h

    def forward(self, obs: Obs, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._heads(self.trunk(obs), mask, sparse=not torch.is_tensor(obs))

    def policy_logits(self, obs: torch.Tensor, legal: torch.Tensor | None = None) -> torch.Tensor:
        return self.pi(self.trunk(obs))  # every move at once, without the value head and the masked copy

    def _heads(self, h: torch.Tensor, mask: torch.Tensor,
               sparse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        if sparse:  # the logits at the legal moves alone
            masked = masked_linear(h, mask, self.pi)
        else:
            logits = self.pi(h)
            masked = torch.where(mask > 0, logits, torch.full_like(logits, MASK_LOGIT))
        return masked, self.v(h).squeeze(-1)

    def train_forward(self, obs: Obs, mask: torch.Tensor, hidden_hands: torch.Tensor | SparseRows
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.trunk(obs)
        masked, value = self._heads(h, mask, sparse=not torch.is_tensor(obs))
        return masked, value, value if self.critic is None else self._critic(h, hidden_hands)

    def leaf_value(self, obs: torch.Tensor, hidden_hands: torch.Tensor, critic_weight: float) -> torch.Tensor:
        """As the interface's, without the policy head."""
        h = self.trunk(obs)
        if critic_weight == 0.0:
            return self.v(h).squeeze(-1)
        if self.critic is None:
            raise ValueError("this network has no critic (trained without model.critic: full)")
        critic = self._critic(h, hidden_hands)
        if critic_weight == 1.0:
            return critic
        return critic_weight * critic + (1.0 - critic_weight) * self.v(h).squeeze(-1)

    def _critic(self, h: torch.Tensor, hidden_hands: torch.Tensor | SparseRows) -> torch.Tensor:
        if isinstance(hidden_hands, SparseRows):
            return self.critic.split(h, hidden_hands)
        return self.critic(torch.cat([h, hidden_hands.to(h.dtype)], dim=-1))


def build_net(hidden: int, layers: int, critic: str) -> PolicyNet:
    """The MLP of this size for this engine (``critic``: "full" or "obs"): what tests and tools build
    directly; a training config's network comes from ``ModelConfig.build``."""
    return PolicyNet(OBS_SIZE, NUM_ACTIONS, hidden, layers, FULL_EXTRA if critic == "full" else 0)


class _Critic(nn.Module):
    """Value from the trunk's features and every hand (trained, never exported)."""

    def __init__(self, size: int, hidden: int):
        super().__init__()
        self.inp = nn.Linear(size, hidden)
        self.block = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, 1)
        nn.init.orthogonal_(self.v.weight, 1.0)
        nn.init.zeros_(self.v.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rest(self.inp(x))

    def split(self, h: torch.Tensor, hands: SparseRows) -> torch.Tensor:
        """``forward(cat([h, hands.dense()]))`` with the hands' columns of the first layer sparse and no
        gradient computed for the hands (the dense path's backward computes one and drops it)."""
        w, n = self.inp.weight, h.shape[1]
        return self.rest(F.linear(h, w[:, :n], self.inp.bias) + sparse_linear(hands, w[:, n:]))

    def rest(self, x: torch.Tensor) -> torch.Tensor:
        """The value from the first layer's output (before its ReLU)."""
        h = torch.relu(x)
        h = h + torch.relu(self.block(h))
        return self.v(h).squeeze(-1)
