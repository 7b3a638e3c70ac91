"""The one way a network is built: from its kind (registered, or a user's class) and hyper-parameters.

The learner, the rollout and search workers, the evaluation, checkpoint loading and
export all call :func:`build_network` with a ``hparams`` dict (``kind`` plus the
constructor's keyword arguments: what :meth:`PolicyNetwork.hparams` gives and a
checkpoint's metadata records).

A kind other than a registered one is ``package.module:Class``, and building it
imports that module.  That is code the user chose to run, as a config naming it
is: a checkpoint of such a network names its module in its metadata, and loading
the checkpoint imports it (from the Python path, never from the checkpoint
folder).  Weights are safetensors and metadata JSON, so nothing is unpickled;
load only checkpoints whose model kind you would import yourself.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from typing import Any, Mapping

import torch

from .format import DEFAULT_KIND, KIND_PATH, CheckpointError
from .interface import HParam, PolicyNetwork
from .parts import PART_NETWORKS
from .policy import PolicyNet

#: The networks ``model.kind`` names without an import path.
NETWORKS: dict[str, type[PolicyNetwork]] = {PolicyNet.kind: PolicyNet, **{n.kind: n for n in PART_NETWORKS}}


class NetworkError(ValueError):
    """A model kind that names no network, or arguments its class does not take (one line)."""


def network_class(kind: str) -> type[PolicyNetwork]:
    """The class a kind names: a registered one, or ``package.module:Class`` imported."""
    if kind in NETWORKS:
        return NETWORKS[kind]
    if not KIND_PATH.fullmatch(kind):
        raise NetworkError(f"model kind {kind!r} is neither a registered network ({', '.join(NETWORKS)})"
                           " nor an import path package.module:Class")
    module, _, name = kind.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except Exception as exc:  # a user's module may fail in any way as it loads: one line, whatever it is
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise NetworkError(f"model kind {kind}: cannot import {module}"
                           f" ({type(exc).__name__}: {first})") from None
    for part in name.split("."):
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and issubclass(obj, PolicyNetwork)):
        raise NetworkError(f"model kind {kind}: {name} in {module} is not a subclass of"
                           " agents.nets.interface.PolicyNetwork")
    return obj


def check_arguments(kind: str, arguments: Mapping[str, HParam]) -> type[PolicyNetwork]:
    """The kind's class, after refusing in one line arguments its constructor does not take."""
    cls = network_class(kind)
    try:
        inspect.signature(cls).bind(**arguments)
    except TypeError as exc:
        raise NetworkError(f"model kind {kind}: {exc} (given: {', '.join(arguments)})") from None
    return cls


def build_network(hparams: Mapping[str, HParam], device: str | torch.device | None = None) -> PolicyNetwork:
    """The network ``hparams`` describe (``kind`` absent: an mlp, as checkpoints before kinds were),
    freshly initialised; ``device="meta"`` builds its shapes without allocating anything."""
    args = dict(hparams)
    kind = str(args.pop("kind", DEFAULT_KIND))
    cls = check_arguments(kind, args)
    with torch.device(device) if device is not None else contextlib.nullcontext():
        return cls(**args)


def recorded_hparams(hparams: Mapping[str, HParam]) -> dict[str, HParam]:
    """What a checkpoint of the network ``hparams`` describe records as its model shape: the built
    network's own ``hparams()``, its kind's default arguments filled in (``move_width`` of a ``moves``
    network), so a config and a checkpoint compare alike.  Built on the meta device."""
    return dict(build_network(hparams, device="meta").hparams())


def network_shapes(hparams: Mapping[str, HParam], where: str) -> dict[str, tuple[int, ...]]:
    """The tensors, name → shape, of the network ``hparams`` describe, built on the meta device (nothing
    allocated); CheckpointError when it cannot be built."""
    try:
        net = build_network(hparams, device="meta")
    except (NetworkError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{where}: its model {dict(hparams).get('kind', DEFAULT_KIND)} does not build"
                              f" ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    return {k: tuple(v.shape) for k, v in net.state_dict().items()}
