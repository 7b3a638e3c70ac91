"""Expert iteration's targets: the searched decisions the search workers send, held for the learner.

:class:`TargetBuffer` keeps the newest searched decisions, packed, in arrays allocated once;
:class:`SearchTargets` is the stage's side of them: what arrives goes into the buffer (every
:data:`HOLD_EVERY`-th decision into a held-out set the learner never trains on), and distillation
minibatches are drawn from it no faster than ``distill.reuse`` times each searched decision on average.
A minibatch is the learner's tensors (:func:`target_batch`): the observations, the legal masks and what
the search said (:func:`search_answer`), for the distillation term (``training.algorithms.losses``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from agents.players.search import search_targets

from ..run import compact
from .losses import DISTILL_NAMES, distill_terms

HOLD_EVERY = 20  # every 20th searched decision that arrives is held out of training (distill.heldout)


def target_batch(packed: dict[str, np.ndarray], device: torch.device, temperature: float,
                 stake: float = 0.0, loss: str = "kl") -> dict[str, Any]:
    """Searched decisions (a search worker's ``batch``) as the learner's minibatch: ``obs`` and ``mask``,
    then :func:`search_answer`'s tensors, ``stake``, how its rows' KL is weighted, and ``loss``, the term
    trained (distill_terms)."""
    obs, mask = compact.expand_obs(compact.to_device({k: v for k, v in packed.items()
                                                      if k not in ("cands", "values")}, device))
    return {"obs": obs, "mask": mask, **search_answer(packed["cands"], packed["values"], temperature, device),
            "stake": float(stake), "loss": loss}


def search_answer(cands: np.ndarray, values: np.ndarray, temperature: float,
                  device: torch.device) -> dict[str, torch.Tensor]:
    """What the search said of each decision, as tensors: the ``target`` distribution at ``temperature``,
    its entropy, the search's ``move``, the ``cands`` (-1: none) and their ``values`` in lá."""
    cands = cands.astype(np.int64)
    target = search_targets(cands, values, temperature)
    best = np.where(cands >= 0, values, -np.inf).argmax(axis=1)
    t = target.astype(np.float64)
    entropy = -(t * np.log(np.where(t > 0, t, 1.0))).sum(axis=1)
    return {"target": torch.from_numpy(target).to(device),
            "target_entropy": torch.from_numpy(entropy.astype(np.float32)).to(device),
            "move": torch.from_numpy(cands[np.arange(len(cands)), best]).to(device),
            "cands": torch.from_numpy(cands).to(device),
            "values": torch.from_numpy(values.astype(np.float32)).to(device)}


class TargetBuffer:
    """The newest ``capacity`` searched decisions as the workers packed them, in arrays allocated once (at
    the first batch); minibatches are drawn uniformly with replacement."""

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.arrays: dict[str, np.ndarray] = {}
        self.size = 0
        self.next = 0

    def __len__(self) -> int:
        return self.size

    def add(self, batch: dict[str, np.ndarray]) -> None:
        n = len(batch["cands"])
        if not self.arrays:
            self.arrays = {k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype)
                           for k, v in batch.items()}
        skip = max(0, n - self.capacity)  # more than fits: the newest
        idx = (self.next + np.arange(n - skip)) % self.capacity
        for k, a in self.arrays.items():
            a[idx] = batch[k][skip:]
        self.next = int((self.next + n - skip) % self.capacity)
        self.size = min(self.capacity, self.size + n - skip)

    def rows(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        return {k: a[idx] for k, a in self.arrays.items()}

    def sample(self, n: int, gen: torch.Generator, device: torch.device, temperature: float,
               stake: float = 0.0, loss: str = "kl") -> dict[str, Any]:
        idx = torch.randint(self.size, (n,), generator=gen).numpy()
        return target_batch(self.rows(idx), device, temperature, stake, loss)


@torch.no_grad()
def kl_to_targets(net: torch.nn.Module, packed: dict[str, np.ndarray],
                  temperature: float) -> dict[str, float]:
    """KL(target || policy), cross-entropy, agreement and regret of ``net`` (in eval mode) on searched
    decisions it was not trained on, on the network's device."""
    device = next(net.parameters()).device
    _, terms = distill_terms(net.eval(), target_batch(packed, device, temperature), bf16=False)
    return dict(zip(DISTILL_NAMES, terms.tolist()))


class SearchTargets:
    """The stage's searched decisions: the training buffer (``distill.buffer``), the held-out set
    (``distill.heldout``; 0: none) and the accounting of what was drawn and what arrived this sitting."""

    def __init__(self, buffer: int, heldout: int):
        self.buffer = TargetBuffer(buffer)
        self.held = TargetBuffer(heldout) if heldout else None  # never trained on
        self.drawn = self.received = self.fresh = 0  # this sitting's draws into minibatches, arrivals

    def add(self, batch: dict[str, np.ndarray]) -> None:
        """A search result's decisions: every HOLD_EVERY-th into the held-out set, the rest to train on."""
        if self.held is not None:
            hold = np.arange(len(batch["cands"])) % HOLD_EVERY == 0
            self.held.add({k: v[hold] for k, v in batch.items()})
            batch = {k: v[~hold] for k, v in batch.items()}
        self.buffer.add(batch)
        self.received += len(batch["cands"])
        self.fresh += len(batch["cands"])

    def sample(self, minibatch: int, reuse: float, gen: torch.Generator, device: torch.device,
               temperature: float, stake: float, loss: str) -> dict[str, Any] | None:
        """A distillation minibatch, or None while drawing it would use the searched decisions more than
        ``reuse`` times each on average."""
        if len(self.buffer) < minibatch or self.drawn + minibatch > reuse * self.received + 1e-9:
            return None
        self.drawn += minibatch
        return self.buffer.sample(minibatch, gen, device, temperature, stake, loss)

    def take_fresh(self, batch_decisions: int, minibatch: int) -> int:
        """The searched decisions that arrived since the last update, once there are ``batch_decisions``
        of them and a minibatch in the buffer (else 0)."""
        if self.fresh < batch_decisions or len(self.buffer) < minibatch:
            return 0
        fresh, self.fresh = self.fresh, 0
        return fresh

    def held_out_kl(self, net: torch.nn.Module, temperature: float) -> dict[str, float]:
        """The distillation figures of ``net`` on the held-out decisions ({} while there are none)."""
        if self.held is None or not len(self.held):
            return {}
        return kl_to_targets(net, self.held.rows(np.arange(len(self.held))), temperature)
