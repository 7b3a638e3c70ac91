"""``learner.precision: auto``: the faster of fp32 and bf16 for this run's network on this learner, measured.

Whether bfloat16 autocast pays on a CPU is a property of the core and of the network, not of its flags:
1.65x fp32's decisions/s on an EPYC with AVX512-BF16 (docs/results.md), slower where bfloat16 is
emulated.  So a CPU learner times a few forward+backward passes of its own network on a synthetic
minibatch in each precision, as its updates feed it (the nonzero cells where
:meth:`training.run.learner.Learner.sparse_input` says so), and keeps the faster.  The optimizer step is
left out: it is float32 on float32 master weights in both.  On CUDA, ``auto`` is fp32: bf16 bought nothing
on an H200 (docs/results.md).  A reproducible run (``rollout.deterministic``) takes fp32 without
measuring, since a measured choice could differ between two runs of one config.

The choice is made once, when the learner is on its device, and written into the run folder's
``config.yaml`` beside the sizing figures (training/run/sizing.py); a resume reads it (give
``learner.precision=auto`` again to measure anew).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from agents.nets.interface import PolicyNetwork
from agents.nets.sparse import SparseRows
from sam_env.actions import NUM_ACTIONS
from sam_env.obs import FULL_EXTRA, OBS_SIZE

from ..config import AUTO, LearnerConfig
from .learner import Learner

Rows = torch.Tensor | SparseRows
#: The synthetic minibatch's rows and its nonzero cells per row, as in real play: about 130 of the
#: observation's cells, 28 of the hidden hands', 3 legal moves (agents/nets/sparse.py).
ROWS, OBS_CELLS, HAND_CELLS, LEGAL = 2048, 130, 28, 3
#: Timed passes per precision, after one warm-up each; the best counts (the least disturbed by the machine).
REPEATS = 3


def settle_precision(learner: Learner, deterministic: bool) -> tuple[str, dict[str, float]]:
    """Resolve ``learner.precision: auto`` in the learner's config, in place: the line that says what was
    chosen and why, and the rows/s measured (``{}`` where nothing was); ``('', {})`` when the config names
    a precision."""
    le = learner.settings
    if le.precision != AUTO:
        return "", {}
    fixed = unmeasured(learner.device.type, deterministic)
    if fixed is not None:
        le.precision = fixed[0]
        return f"learner.precision=auto → {fixed[0]} ({fixed[1]})", {}
    rates = learner_rates(learner.net, learner.sparse_input())
    le.precision = "bf16" if rates["bf16"] > rates["fp32"] else "fp32"
    return (f"learner.precision=auto → {le.precision} (measured {rates['fp32']:,.0f} rows/s in fp32,"
            f" {rates['bf16']:,.0f} in bf16, forward+backward)"), rates


def unmeasured(device_type: str, deterministic: bool) -> tuple[str, str] | None:
    """What ``auto`` is without measuring, and why: fp32 on CUDA and in a reproducible run; None on a CPU
    learner that measures."""
    if device_type != "cpu":
        return "fp32", f"on {device_type}: bf16 measured no faster on an H200, docs/results.md"
    if deterministic:
        return "fp32", "rollout.deterministic: a measured choice could differ between runs"
    return None


def planned(le: LearnerConfig, device_type: str, deterministic: bool) -> str:
    """The precision a run on ``device_type`` will take, in words (for the dry run, which measures
    nothing)."""
    if le.precision != AUTO:
        return le.precision
    fixed = unmeasured(device_type, deterministic)
    return fixed[0] if fixed else "auto: the faster of fp32 and bf16, measured at its start"


def learner_rates(net: PolicyNetwork, sparse: bool, rows: int = ROWS,
                  repeats: int = REPEATS) -> dict[str, float]:
    """Rows per second of a forward+backward pass of ``net`` (on the CPU) in fp32 and under bf16 autocast,
    the best of ``repeats`` after a warm-up; ``sparse``: fed the inputs' nonzero cells.  The network's
    gradients are cleared after and its mode restored; the weights are not touched."""
    obs, mask, hid = synthetic_batch(rows, FULL_EXTRA if net.has_critic else 0, sparse)
    training = net.training
    net.train()
    out = {}
    try:
        for name in ("fp32", "bf16"):
            best = math.inf
            for _ in range(repeats + 1):
                t0 = time.perf_counter()
                net.zero_grad(set_to_none=True)
                with torch.autocast("cpu", torch.bfloat16, enabled=name == "bf16"):
                    logits, value, baseline = net.train_forward(obs, mask, hid)
                loss = (torch.logsumexp(logits.float(), -1).mean() + value.float().square().mean()
                        + baseline.float().square().mean())
                loss.backward()
                best = min(best, time.perf_counter() - t0)
            out[name] = rows / best
    finally:
        net.zero_grad(set_to_none=True)
        net.train(training)
    return out


def synthetic_batch(rows: int, hand_width: int, sparse: bool) -> tuple[Rows, torch.Tensor, Rows]:
    """Observations, masks and hidden hands with real play's counts of nonzero cells (all 1) at random
    places, drawn from a generator of their own (the run's random streams are left alone), dense or as
    nonzero cells."""
    rng = np.random.default_rng(0)

    def cells(width: int, count: int, dtype: type) -> tuple[torch.Tensor, SparseRows]:
        cols = np.sort(rng.random((rows, width)).argsort(1)[:, :min(count, width)], axis=1).astype(np.int32)
        dense = np.zeros((rows, width), dtype)
        dense[np.arange(rows)[:, None], cols] = 1
        return torch.from_numpy(dense), SparseRows(torch.from_numpy(cols), torch.ones(cols.shape), width)

    obs, sobs = cells(OBS_SIZE, OBS_CELLS, np.float32)
    mask, _ = cells(NUM_ACTIONS, LEGAL, np.int8)
    hid, shid = cells(hand_width, HAND_CELLS, np.uint8)
    return (sobs, mask, shid) if sparse else (obs, mask, hid)
