"""The learner: the network, its optimizer, its learning rate and the one gradient step, on one torch device.

An algorithm brings its loss; the learner turns packed rollouts (:mod:`training.run.compact`) into tensors
on the device (:meth:`Learner.batch`: pinned memory, asynchronous copies on CUDA, expanded there in one
vectorized step) and takes the step (:meth:`Learner.step`: zero the gradients, backward, clip, Adam).
The run loop sets the learning rate the algorithm asks for before each update (``Algorithm.learning_rate``).
Weights leave as CPU numpy arrays (the workers' engine is numba, on CPU), and checkpoints hold CPU
tensors only, so a run trained on a GPU resumes on a CPU and the other way round.  The trainer and
``samloc bench --learner`` use this same class.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.nets.guards import check_blind_policy
from agents.nets.interface import PolicyNetwork

from . import compact
from ..config import TrainConfig
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
        raise DeviceError(f"learner.device={spec}: this machine has {count} CUDA device(s)"
                          f" (cuda:0 … cuda:{count - 1})")
    return dev


class Learner:
    """The policy network and Adam on ``device`` (built on the CPU; :meth:`to` moves both), at ``lr``."""

    def __init__(self, cfg: TrainConfig, lr: float):
        self.cfg = cfg
        self.device = torch.device("cpu")
        self.net: PolicyNetwork = cfg.model.build().eval()
        check_blind_policy(self.net)  # only the critic may read the hidden hands: refused in one line
        self.opt = self.new_optimizer(lr)

    def to(self, device: torch.device) -> None:
        """Move the network and the optimizer's moments.  The optimizer is made anew on the moved
        parameters (a move may replace them) and given the old state, which loading casts to their device."""
        state = self.opt.state_dict()
        self.device = device
        self.net.to(device)
        self.opt = self.new_optimizer(self.lr)
        self.opt.load_state_dict(state)

    def new_optimizer(self, lr: float) -> torch.optim.Optimizer:
        """Adam over the network's parameters, without moments (a warm start's own is one)."""
        return torch.optim.Adam(self.net.parameters(), lr=lr, eps=1e-5)

    @property
    def lr(self) -> float:
        return float(self.opt.param_groups[0]["lr"])

    def set_lr(self, lr: float) -> None:
        for g in self.opt.param_groups:
            g["lr"] = lr

    def step(self, loss: torch.Tensor, max_grad_norm: float,
             opt: torch.optim.Optimizer | None = None) -> torch.Tensor:
        """The one gradient step of every algorithm: backward through ``loss``, clip the gradients' global
        norm at ``max_grad_norm``, step the optimizer (``opt``: a stage's own, else the learner's).  Returns
        the norm before clipping (a tensor on the device: reading it is the caller's sync)."""
        opt = opt or self.opt
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.net.parameters(), max_grad_norm)
        opt.step()
        return grad_norm

    def batch(self, batches: list[dict[str, np.ndarray]], lags: list[int] | None = None,
              sparse: bool = False) -> dict[str, torch.Tensor]:
        """Packed rollouts as one batch of tensors on the device (:func:`training.run.compact.expand`); with
        ``lags`` (updates between the weights that made ``batches[k]`` and these), each row's ``lag``; with
        ``sparse``, the inputs as their nonzero cells (:meth:`sparse_input` says when a loss may take
        them)."""
        data = compact.expand(compact.to_device(compact.concat(batches), self.device), sparse=sparse)
        if lags is not None:
            sizes = torch.tensor([len(b["act"]) for b in batches])
            data["lag"] = torch.repeat_interleave(torch.tensor(lags), sizes).to(self.device)
        return data

    def sparse_input(self) -> bool:
        """Whether updates may feed the network its inputs' nonzero cells (agents/nets/sparse.py): on a CPU,
        in fp32 or bf16 (the kernels run in float32 either way), where skipping the zeros beats the dense
        products; a GPU's dense products beat the gathers."""
        return self.device.type == "cpu" and self.net.takes_sparse_rows

    def weights(self) -> dict[str, np.ndarray]:
        """The network's weights as CPU numpy arrays (what the workers and the evaluation load)."""
        return weights_to_numpy(self.net)

    def state(self) -> dict[str, Any]:
        """The optimizer's state with CPU tensors (for a checkpoint any device can load)."""
        st = self.opt.state_dict()
        st["state"] = {i: {k: v.detach().cpu() if torch.is_tensor(v) else v for k, v in s.items()}
                       for i, s in st["state"].items()}
        return st
