"""The learner: the network, its optimizer, its learning rate and the one gradient step, on one torch device.

An algorithm brings its loss and its learning-rate schedule; the learner turns packed rollouts
(:mod:`training.run.compact`) into tensors on the device (:meth:`Learner.batch`: pinned memory,
asynchronous copies on CUDA, expanded there in one vectorized step) and takes the step
(:meth:`Learner.step`: zero the gradients, backward, clip, Adam).
The learner owns the learning rate: before each update the loop hands it the run's :class:`Progress`, and
:meth:`Learner.begin_update` sets the rate its schedule gives for it (``Algorithm.lr_schedule``, PPO's
annealing) and reports it in :attr:`Learner.figures` (``charts/learning_rate``), as RLlib's Learner owns its
optimizers' schedules.
Weights leave as CPU numpy arrays (the workers' engine is numba, on CPU), and checkpoints hold CPU
tensors only, so a run trained on a GPU resumes on a CPU and the other way round.  The trainer and
``samloc bench --learner`` use this same class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from agents.nets.guards import check_blind_policy
from agents.nets.interface import PolicyNetwork

from . import compact
from ..config import LearnerConfig, ModelConfig
from .rollout import weights_to_numpy


@dataclass(frozen=True)
class Progress:
    """Where the run is when an update begins: what a learning-rate schedule reads."""

    updates: int
    decisions_trained: int
    wall_s: float
    """Training wall time over every sitting so far."""
    stage_start_s: float = 0.0
    """The wall time at which the run's current stage began (0: the run's start, or no stages)."""


#: A learning rate as a function of the run's progress.
LearningRate = Callable[[Progress], float]


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
    """The network ``model`` describes and Adam on ``device`` (built on the CPU; :meth:`to` moves both), at
    ``lr``: a rate, or a schedule of the run's progress; ``settings``: the run's ``learner`` section."""

    def __init__(self, model: ModelConfig, settings: LearnerConfig, lr: float | LearningRate):
        self.settings = settings  # the run's learner section (precision is settled in it, in place)
        self.device = torch.device("cpu")
        self.net: PolicyNetwork = model.build().eval()
        check_blind_policy(self.net)  # only the critic may read the hidden hands: refused in one line
        self.schedule: LearningRate = (lambda progress: lr) if isinstance(lr, (int, float)) else lr
        self.opt = self.new_optimizer(self.schedule(Progress(0, 0, 0.0)))
        #: what the learner reports of the last update it began (the loop writes them as ``charts/<name>``)
        self.figures: dict[str, float] = {}

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

    def begin_update(self, progress: Progress) -> None:
        """Set the learning rate the schedule gives at ``progress``, and report it."""
        lr = self.schedule(progress)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.figures["learning_rate"] = lr

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
