"""The policy/value network: a plain MLP with residual blocks and legal-action masking.

Plain layers only (Linear, ReLU, add, where), so the same module exports to
ONNX and runs under onnxruntime.  Illegal actions get a large negative
*finite* logit (``MASK_LOGIT``), never ``-inf``: softmax still gives them
probability 0 and no NaN can appear, in PyTorch or in an exported graph.
"""

from __future__ import annotations

import torch
from torch import nn

from sam_env.actions import NUM_ACTIONS, SAM

MASK_LOGIT = -1e9
SAM_PRIOR_LOGIT = -3.0  # a fresh policy declares Sâm ~5% of the time, not 50%


class PolicyNet(nn.Module):
    """``forward(obs, mask) -> (masked_logits, value)``.

    ``obs``: float32 ``[B, obs_size]``; ``mask``: ``[B, num_actions]``, nonzero = legal
    (any numeric dtype).  ``value`` is ``[B]``, in lá / ``reward_scale``.
    """

    def __init__(self, obs_size: int, num_actions: int = NUM_ACTIONS, hidden: int = 256, layers: int = 2):
        super().__init__()
        self.obs_size, self.num_actions, self.hidden, self.layers = obs_size, num_actions, hidden, layers
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

    def hparams(self) -> dict[str, int]:
        return {"obs_size": self.obs_size, "num_actions": self.num_actions,
                "hidden": self.hidden, "layers": self.layers}

    def trunk(self, obs: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inp(obs))
        for blk in self.blocks:
            h = h + torch.relu(blk(h))
        return h

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(obs)
        logits = self.pi(h)
        masked = torch.where(mask > 0, logits, torch.full_like(logits, MASK_LOGIT))
        return masked, self.v(h).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.v(self.trunk(obs)).squeeze(-1)
