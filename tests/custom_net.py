"""A user's network for ``model.kind=tests.custom_net:TinyNet``: not the MLP, to show that any
:class:`agents.nets.interface.PolicyNetwork` trains, searches, exports and serves."""

from __future__ import annotations

import torch
from torch import nn

from agents.nets.interface import MASK_LOGIT, HParam, PolicyNetwork


class TinyNet(PolicyNetwork):
    """Separate policy and value towers (tanh, no residual), the policy's logits gated by a sigmoid of
    the observation, and a critic of its own over the raw observation and every hand."""

    def __init__(self, obs_size: int, num_actions: int, critic_size: int = 0, width: int = 16):
        super().__init__()
        self.obs_size, self.num_actions, self.critic_size = obs_size, num_actions, critic_size
        self.width = width
        self.has_critic = critic_size > 0
        self.policy = nn.Sequential(nn.Linear(obs_size, width), nn.Tanh(), nn.Linear(width, num_actions))
        self.gate = nn.Linear(obs_size, num_actions)
        self.value = nn.Sequential(nn.Linear(obs_size, width), nn.Tanh(), nn.Linear(width, 1))
        self.critic = (nn.Sequential(nn.Linear(obs_size + critic_size, width), nn.Tanh(), nn.Linear(width, 1))
                       if critic_size > 0 else None)

    def arguments(self) -> dict[str, HParam]:
        return {"obs_size": self.obs_size, "num_actions": self.num_actions, "critic_size": self.critic_size,
                "width": self.width}

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.policy(obs) * torch.sigmoid(self.gate(obs))
        masked = torch.where(mask > 0, logits, torch.full_like(logits, MASK_LOGIT))
        return masked, self.value(obs).squeeze(-1)

    def train_forward(self, obs: torch.Tensor, mask: torch.Tensor,
                      hidden_hands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        masked, value = self(obs, mask)
        if self.critic is None:
            return masked, value, value
        both = torch.cat([obs, hidden_hands.to(obs.dtype)], dim=-1)
        return masked, value, self.critic(both).squeeze(-1)


class NotANetwork(nn.Module):
    """A module that does not follow the interface: a config naming it is refused."""


class PeekingNet(TinyNet):
    """A network whose ``train_forward`` feeds every hand into its policy: refused before it trains."""

    def __init__(self, obs_size: int, num_actions: int, critic_size: int = 0, width: int = 16):
        super().__init__(obs_size, num_actions, critic_size, width)
        self.peek = nn.Linear(max(critic_size, 1), num_actions)

    def train_forward(self, obs: torch.Tensor, mask: torch.Tensor,
                      hidden_hands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        masked, value, critic = super().train_forward(obs, mask, hidden_hands)
        seen = masked + self.peek(hidden_hands.to(obs.dtype))
        return torch.where(mask > 0, seen, masked), value, critic


class ZeroPeekNet(TinyNet):
    """A cheat the guard must catch after training: ``train_forward`` adds a branch over every hand to the
    policy's logits, initialised to zero, so a fresh network's probe sees nothing; training moves it."""

    def __init__(self, obs_size: int, num_actions: int, critic_size: int = 0, width: int = 16):
        super().__init__(obs_size, num_actions, critic_size, width)
        self.peek = nn.Linear(max(critic_size, 1), num_actions)
        nn.init.zeros_(self.peek.weight)
        nn.init.zeros_(self.peek.bias)

    def train_forward(self, obs: torch.Tensor, mask: torch.Tensor,
                      hidden_hands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        masked, value, critic = super().train_forward(obs, mask, hidden_hands)
        seen = masked + self.peek(hidden_hands.to(obs.dtype))
        return torch.where(mask > 0, seen, masked), value, critic


#: the hands the last critic call saw: GlobalPeekNet's policy reads them from here
SEEN: torch.Tensor | None = None


class GlobalPeekNet(TinyNet):
    """A cheat that hides the hands from ``train_forward``'s arguments: the critic call leaves them in a
    module global, and ``forward`` (the policy, in every later call) reads their mean through a branch
    initialised to zero."""

    def __init__(self, obs_size: int, num_actions: int, critic_size: int = 0, width: int = 16):
        super().__init__(obs_size, num_actions, critic_size, width)
        self.peek = nn.Linear(max(critic_size, 1), num_actions)
        nn.init.zeros_(self.peek.weight)
        nn.init.zeros_(self.peek.bias)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        masked, value = super().forward(obs, mask)
        if SEEN is None or SEEN.shape[-1] != self.peek.in_features:
            return masked, value
        seen = masked + self.peek(SEEN.to(obs.dtype).mean(0, keepdim=True))
        return torch.where(mask > 0, seen, masked), value

    def train_forward(self, obs: torch.Tensor, mask: torch.Tensor,
                      hidden_hands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        global SEEN
        masked, value, critic = super().train_forward(obs, mask, hidden_hands)
        SEEN = hidden_hands.detach().float()
        return masked, value, critic
