"""What a network of ``model.kind`` is: the one interface training, search, export and serving call.

A network is a :class:`PolicyNetwork`: a ``torch.nn.Module`` built from a plain
dict of hyper-parameters (ints, floats, strings: what the checkpoint metadata
records) that maps a batch of observations and legal masks to masked logits
and a value.  A class written for it needs three things:

- ``__init__(obs_size, num_actions, critic_size, **kwargs)``: the sizes it is
  given, and ``model.kwargs`` from the config.  ``critic_size`` is the length of
  the hidden-hands vector the full-information critic reads (0: no critic);
- :meth:`PolicyNetwork.arguments`: those keyword arguments back, so that
  ``build_network(net.hparams())`` builds its twin (the checkpoint's loader does);
- :meth:`PolicyNetwork.forward`: ``(obs, mask) -> (masked_logits, value)``, in
  ops that export to ONNX (the served graph is this forward and a softmax).

A network with a critic (``critic_size > 0``) sets ``has_critic`` and overrides
:meth:`PolicyNetwork.train_forward`, which adds the critic's value of the same
positions seen with every hand; training uses it as the advantages' baseline, and
the play-time search at its leaves.  The rest has generic defaults a class may
override for speed (:class:`agents.nets.policy.PolicyNet` does).

Illegal actions get a large negative *finite* logit (:data:`MASK_LOGIT`), never
``-inf``: softmax still gives them probability 0, and no NaN can appear.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from typing import ClassVar, Union

import torch
from torch import nn

from sam_env.actions import NUM_ACTIONS

#: One hyper-parameter value, as JSON keeps it.
HParam = Union[int, float, str, bool]
MASK_LOGIT = -1e9


class PolicyNetwork(nn.Module, metaclass=ABCMeta):
    """The interface of a policy/value network (see the module docstring).

    ``obs``: float ``[B, obs_size]``; ``mask``: ``[B, num_actions]``, nonzero = legal (any
    numeric dtype); values are ``[B]``, in lá / ``reward_scale``; ``hidden_hands``: ``[B,
    critic_size]``, every hand (the critic's input, never the policy's)."""

    kind: ClassVar[str] = ""
    """The registered name (``mlp``); empty: the class is named by its import path."""
    has_critic: bool = False
    """Whether :meth:`train_forward` gives a critic's value (``model.critic: full``)."""
    takes_sparse_rows: ClassVar[bool] = False
    """Whether :meth:`forward` and :meth:`train_forward` also take ``obs`` and ``hidden_hands`` as
    :class:`agents.nets.sparse.SparseRows` (their nonzero cells), as a CPU learner passes them."""

    @abstractmethod
    def arguments(self) -> dict[str, HParam]:
        """The keyword arguments this network was constructed with."""

    @abstractmethod
    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(masked_logits [B, num_actions], value [B])``."""

    def hparams(self) -> dict[str, HParam]:
        """``kind`` and :meth:`arguments`: what the metadata records and ``build_network`` takes."""
        kind = self.kind or f"{type(self).__module__}:{type(self).__qualname__}"
        return {"kind": kind, **self.arguments()}

    def train_forward(self, obs: torch.Tensor, mask: torch.Tensor,
                      hidden_hands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(masked_logits, value, baseline)``: the baseline is the critic's value (``value``
        itself for a network without one, this default)."""
        masked, value = self(obs, mask)
        return masked, value, value

    def policy_logits(self, obs: torch.Tensor, legal: torch.Tensor | None = None) -> torch.Tensor:
        """The logits alone: a rollout's greedy step, which masks them itself.  ``legal`` (the rows' legal
        moves, where the caller has them) lets a network that scores each move score those alone; the
        others' logits are then unspecified, as the caller masks them."""
        return self(obs, obs.new_ones((obs.shape[0], NUM_ACTIONS)) if legal is None else legal)[0]

    def leaf_value(self, obs: torch.Tensor, hidden_hands: torch.Tensor, critic_weight: float) -> torch.Tensor:
        """``critic_weight`` x the critic + the rest x the seat's own value: a play-time search's
        leaf, where the critic alone sees the sampled hands."""
        ones = obs.new_ones((obs.shape[0], NUM_ACTIONS))
        if critic_weight == 0.0:
            return self(obs, ones)[1]
        if not self.has_critic:
            raise ValueError("this network has no critic (trained without model.critic: full)")
        _, value, critic = self.train_forward(obs, ones, hidden_hands)
        return critic if critic_weight == 1.0 else critic_weight * critic + (1.0 - critic_weight) * value

    def baseline(self, obs: torch.Tensor, hidden_hands: torch.Tensor) -> torch.Tensor:
        """The training baseline alone (bootstrapping an unfinished trajectory)."""
        return self.leaf_value(obs, hidden_hands, 1.0 if self.has_critic else 0.0)


def param_dtype(net: nn.Module) -> torch.dtype:
    """The dtype of a network's weights (float32, or bfloat16 for a search's fast copy)."""
    return next(net.parameters()).dtype
