"""Guards on what a network sees while it trains.

Rollouts act on :meth:`~agents.nets.interface.PolicyNetwork.train_forward`'s logits, and ``train_forward``
is given every hand (the full-information critic's input).  A network that feeds those hands to its policy
would learn to play with cards it cannot see, and play differently once served (its ``forward`` has no
hands).  :func:`check_blind_policy` refuses such a network before it trains.
"""

from __future__ import annotations

import torch

from sam_env.actions import NUM_ACTIONS

from .factory import NetworkError
from .interface import PolicyNetwork, param_dtype

PROBES = 16  # positions probed, each seen with two different sets of hidden hands


@torch.no_grad()
def check_blind_policy(net: PolicyNetwork) -> None:
    """NetworkError (one line, naming ``model.kind``) when ``net``'s acting logits move with the hidden
    hands: only the critic may read them.  The probe is seeded, and leaves ``net`` and torch's global
    generator as they were."""
    hp = net.hparams()
    width = int(hp.get("critic_size", 0) or 0)
    if width == 0:  # no hidden hands are given to it
        return
    gen = torch.Generator().manual_seed(0)
    device, dtype = next(net.parameters()).device, param_dtype(net)
    obs = torch.rand((PROBES, int(hp["obs_size"])), generator=gen).to(device, dtype)
    mask = (torch.rand((PROBES, NUM_ACTIONS), generator=gen) < 0.5).to(device)
    mask[:, 0] = True  # at least one legal action per position
    hands = [(torch.rand((PROBES, width), generator=gen) < 0.5).to(device, torch.uint8) for _ in range(2)]
    training = net.training
    net.eval()
    try:
        first, second = (net.train_forward(obs, mask, h)[0] for h in hands)
    finally:
        net.train(training)
    if not torch.allclose(first, second, rtol=1e-5, atol=1e-5):
        moved = (first - second).abs().max().item()
        raise NetworkError(f"model.kind={hp['kind']}: its acting logits change with the hidden hands"
                           f" (by up to {moved:.3g}); only the critic may read them: train_forward must give"
                           " forward's policy, with the hands in the critic's value alone")
