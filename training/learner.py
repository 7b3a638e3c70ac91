"""The learner: the network, its optimizer and the PPO update, on one torch device.

Rollouts arrive packed (:mod:`training.compact`); an update copies them to
the device (pinned memory, asynchronous copies on CUDA), expands them there
in one vectorized step and runs :func:`training.ppo.ppo_update`.  Weights
leave as CPU numpy arrays (the workers' engine is numba, on CPU), and
checkpoints hold CPU tensors only, so a run trained on a GPU resumes on a
CPU and the other way round.  The trainer and ``samloc bench --learner``
use this same class.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from agents.nets.interface import PolicyNetwork

from . import compact
from .config import TrainConfig
from .ppo import DistillSampler, distill_update, ppo_update
from .rollout import weights_to_numpy


class DeviceError(RuntimeError):
    """The torch device asked for is not there (one-line reason)."""


def wants_cuda(spec: str) -> bool:
    """Whether ``learner.device`` asks for a GPU (``auto`` does where torch sees one)."""
    return spec.startswith("cuda") or (spec == "auto" and torch.cuda.is_available())


def resolve_device(spec: str) -> torch.device:
    """``learner.device`` (auto, cpu, cuda, cuda:N) as a torch device; DeviceError when CUDA is absent."""
    if spec == "cpu" or not wants_cuda(spec):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise DeviceError(f"learner.device={spec}: torch sees no CUDA device here (torch {torch.__version__},"
                          f" {build}); use learner.device=cpu")
    dev = torch.device(spec)
    count = torch.cuda.device_count()
    if dev.index is not None and dev.index >= count:
        raise DeviceError(f"learner.device={spec}: this machine has {count} CUDA device(s) (cuda:0 … cuda:{count - 1})")
    return dev


class Learner:
    """The policy network and Adam on ``device`` (built on the CPU; :meth:`to` moves both)."""

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.device = torch.device("cpu")
        self.net: PolicyNetwork = cfg.model.build().eval()
        self.opt = self.fresh_optimizer()
        #: search targets whose KL term rides on each PPO step (expert iteration sets it; None: plain PPO)
        self.distill: DistillSampler | None = None

    def to(self, device: torch.device) -> None:
        """Move the network and the optimizer's moments.  The optimizer is made anew on the moved
        parameters (a move may replace them) and given the old state, which loading casts to their device."""
        state = self.opt.state_dict()
        self.device = device
        self.net.to(device)
        self.opt = self.fresh_optimizer()
        self.opt.load_state_dict(state)

    def fresh_optimizer(self) -> torch.optim.Optimizer:
        """Adam over the network's parameters, without moments (a warm start's are not the algorithm's)."""
        return torch.optim.Adam(self.net.parameters(), lr=self.cfg.ppo.lr, eps=1e-5)

    def set_lr(self, lr: float) -> None:
        for g in self.opt.param_groups:
            g["lr"] = lr

    def update(self, batches: list[dict[str, np.ndarray]], lags: list[int], gen: torch.Generator,
               between_steps: Callable[[], None] | None = None) -> dict[str, float]:
        """One PPO update on packed rollouts; ``lags[k]``: updates between the weights that made ``batches[k]``
        and these."""
        packed = compact.to_device(compact.concat(batches), self.device)
        data = compact.expand(packed, sparse=self.sparse_input())
        sizes = torch.tensor([len(b["act"]) for b in batches])
        data["lag"] = torch.repeat_interleave(torch.tensor(lags), sizes).to(self.device)
        return ppo_update(self.net, self.opt, data, self.cfg.ppo, self.cfg.learner, gen, between_steps,
                          self.distill, self.cfg.distill.coef)

    def sparse_input(self) -> bool:
        """Whether updates feed the network its inputs' nonzero cells (agents/nets/sparse.py): on a CPU in fp32,
        where skipping the zeros beats the dense products; a GPU's dense products beat the gathers."""
        return self.device.type == "cpu" and self.cfg.learner.precision == "fp32" and self.net.takes_sparse_rows

    def distill_update(self, sample: DistillSampler, steps: int,
                       between_steps: Callable[[], None] | None = None) -> dict[str, float]:
        """Up to ``steps`` gradient steps on search targets alone (expert iteration without PPO)."""
        return distill_update(self.net, self.opt, sample, steps, self.cfg.ppo.max_grad_norm,
                              self.cfg.learner.precision == "bf16", between_steps)

    def weights(self) -> dict[str, np.ndarray]:
        """The network's weights as CPU numpy arrays (what the workers and the evaluation load)."""
        return weights_to_numpy(self.net)

    def state(self) -> dict[str, Any]:
        """The optimizer's state with CPU tensors (for a checkpoint any device can load)."""
        st = self.opt.state_dict()
        st["state"] = {i: {k: v.detach().cpu() if torch.is_tensor(v) else v for k, v in s.items()}
                       for i, s in st["state"].items()}
        return st
