"""Guards on what a network sees while it trains.

Rollouts act on :meth:`~agents.nets.interface.PolicyNetwork.train_forward`'s logits, and ``train_forward``
is given every hand (the full-information critic's input).  A network that feeds those hands to its policy
would learn to play with cards it cannot see, and play differently once served (its ``forward`` has no
hands).  :func:`check_blind_policy` probes a network for it.  Fresh weights are not enough: a branch
initialised to zero, or a module global that the critic call sets and the policy reads, passes at the
start and learns to peek as it trains.  So the probe runs wherever weights appear (a config's fresh
network, ``--dry-run``, every :func:`agents.nets.checkpoint.load_checkpoint`: resume, ``init_from``, eval,
serve, export) and every ``learner.guard_every`` updates and before each checkpoint while training.
"""

from __future__ import annotations

import torch

from sam_env.actions import NUM_ACTIONS

from .factory import NetworkError
from .interface import PolicyNetwork, param_dtype

PROBES = 16  # positions probed, each seen with two different sets of hidden hands


class BlindPolicyError(NetworkError):
    """A network whose acting logits move with the hidden hands (one line)."""


@torch.no_grad()
def _acting(net: PolicyNetwork, obs: torch.Tensor, mask: torch.Tensor,
            hands: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``train_forward``'s logits, then ``forward``'s, after the network has been shown ``hands``: the
    call is made twice, so that state one call leaves for the next (a global set by the critic) is read."""
    net.train_forward(obs, mask, hands)
    return net.train_forward(obs, mask, hands)[0], net(obs, mask)[0]


@torch.no_grad()
def check_blind_policy(net: PolicyNetwork, positions: int = PROBES) -> None:
    """BlindPolicyError (one line, naming ``model.kind``) when ``net``'s acting logits (``train_forward``'s,
    or ``forward``'s after a ``train_forward``) move with the hidden hands: only the critic may read them.
    The probe is seeded, and leaves ``net``'s mode and torch's global generator as they were."""
    hp = net.hparams()
    width = int(hp.get("critic_size", 0) or 0)
    if width == 0:  # no hidden hands are given to it
        return
    gen = torch.Generator().manual_seed(0)
    device, dtype = next(net.parameters()).device, param_dtype(net)
    obs = torch.rand((positions, int(hp["obs_size"])), generator=gen).to(device, dtype)
    mask = (torch.rand((positions, NUM_ACTIONS), generator=gen) < 0.5).to(device)
    mask[:, 0] = True  # at least one legal action per position
    hands = [(torch.rand((positions, width), generator=gen) < 0.5).to(device, torch.uint8) for _ in range(2)]
    training = net.training
    net.eval()
    try:
        (tf_a, fw_a), (tf_b, fw_b) = (_acting(net, obs, mask, h) for h in hands)
    finally:
        net.train(training)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    pairs = ((tf_a.float(), tf_b.float()), (fw_a.float(), fw_b.float()))
    if not all(torch.allclose(a, b, rtol=tol, atol=tol, equal_nan=True) for a, b in pairs):
        moved = max((a - b).abs().nan_to_num(0.0).max().item() for a, b in pairs)
        raise BlindPolicyError(f"model.kind={hp['kind']}: its acting logits change with the hidden hands"
                               f" (by up to {moved:.3g}); only the critic may read them: train_forward must"
                               " give forward's policy, with the hands in the critic's value alone")
