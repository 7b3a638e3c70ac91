"""Checkpoints on disk: weights in safetensors, everything else in JSON; no pickle anywhere.

The folder format is :mod:`agents.nets.format`.  A folder is written under a
temporary name and renamed into place, so a reader never sees half a
checkpoint; the hashes in its metadata catch a file truncated or damaged
later, and loading verifies them before it builds anything.  The network built
is run once on known positions (:mod:`agents.nets.outputs`) before anyone gets
it: weights broken before they were written (NaN) are refused too, and so is a policy that reads the
hidden hands (:mod:`agents.nets.guards`).  The network is
built by :func:`agents.nets.factory.build_network` from the ``model`` its
metadata records (a user's kind imports its module: see there).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save

from sam_env.atomic import check_dir_target, replace_dir, temp_dir_for, temp_owner, write_atomic

from .format import (BELIEF_FILE, BELIEF_META, BOT_FILES, CHECKPOINT_FILES, CKPT_NAME, FORMAT, ONNX_FILE,
                     ONNX_META, META_FILE, MODEL_FILE, TRAINER_JSON, TRAINER_TENSORS, CheckpointError,
                     CheckpointMeta, check_size, check_tensors, file_sha256, is_checkpoint_of,
                     list_checkpoints, read_metadata, resolve, sealed, verify)
from .factory import build_network, network_shapes
from .guards import BlindPolicyError, check_blind_policy
from .interface import PolicyNetwork
from .outputs import Infer, check_known_positions

__all__ = ["save_checkpoint", "load_checkpoint", "load_trainer_state", "prune", "check_bot_folder",
           "copy_checkpoint"]


def save_checkpoint(ckpt_dir: str | Path, net: PolicyNetwork, metadata: dict[str, Any],
                    trainer_tensors: dict[str, torch.Tensor] | None = None,
                    trainer_state: dict[str, Any] | None = None) -> Path:
    """Write a checkpoint folder atomically (temp folder, then rename); returns its path.  On an error
    (a full disk) the temporary folder is removed and the error raised.  A folder already there is
    replaced only when it is a checkpoint of the same run (a resumed run writing its step again):
    UnsafeTarget otherwise."""
    ckpt_dir = Path(ckpt_dir)
    tmp = temp_dir_for(ckpt_dir)
    try:  # each file by the one atomic write (flushed to disk), into the folder made for them
        write_atomic(tmp / MODEL_FILE, _safetensors(net.state_dict()))
        files = [MODEL_FILE]
        if trainer_tensors is not None:
            write_atomic(tmp / TRAINER_TENSORS, _safetensors(trainer_tensors))
            files.append(TRAINER_TENSORS)
        if trainer_state is not None:
            write_atomic(tmp / TRAINER_JSON, json.dumps(trainer_state))
            files.append(TRAINER_JSON)
        meta = dict(metadata)
        meta["format"] = FORMAT
        meta["model"] = net.hparams()
        meta["sha256"] = {name: file_sha256(tmp / name) for name in files}
        meta = sealed(meta)  # with the hash of itself
        CheckpointMeta.from_json(meta, str(ckpt_dir))  # what is written must read back
        write_atomic(tmp / META_FILE, json.dumps(meta, indent=2))
    except BaseException:  # a full disk, say: free what was written; the previous checkpoints stay
        # as they were
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    name = str(meta.get("name") or "")
    return replace_dir(tmp, ckpt_dir, lambda p: is_checkpoint_of(p, name),
                       f"a checkpoint of the run {name!r}")


def _safetensors(tensors: dict[str, torch.Tensor]) -> bytes:
    """Tensors as the bytes of a safetensors file (CPU, contiguous: as any device wrote them)."""
    return save({k: v.detach().cpu().contiguous() for k, v in tensors.items()})


def load_checkpoint(path: str | Path, device: str = "cpu") -> tuple[PolicyNetwork, CheckpointMeta]:
    """``(network in eval mode, metadata)`` from a checkpoint or run folder; CheckpointError if bad."""
    ckpt = resolve(path)
    meta = verify(ckpt)
    shapes = network_shapes(meta.model, str(ckpt))  # before anything is allocated
    check_size(shapes, str(ckpt))
    check_tensors(ckpt / MODEL_FILE, shapes, str(ckpt))
    net = build_network(meta.model)
    try:
        net.load_state_dict(load_file(str(ckpt / MODEL_FILE), device=device))
    except (SafetensorError, RuntimeError, OSError) as exc:
        raise CheckpointError(f"{ckpt}: weights do not load ({str(exc).splitlines()[0]})") from None
    net = net.to(device).eval()
    check_known_positions(_infer(net, device), meta.tables, str(ckpt),
                          "train it again, or load an earlier checkpoint")
    try:  # weights trained to peek pass a fresh network's probe: every load is probed again
        check_blind_policy(net)
    except BlindPolicyError as exc:
        raise CheckpointError(f"{ckpt}: refused: {exc}") from None
    return net, meta


def _infer(net: PolicyNetwork, device: str) -> Infer:
    """``net`` as :mod:`agents.nets.outputs` runs it: the served softmax of its masked logits."""
    @torch.no_grad()
    def infer(obs: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m = torch.as_tensor(masks, device=device)
        logits, value = net(torch.as_tensor(obs, device=device), m)
        probs = torch.softmax(logits.float(), dim=-1) * (m > 0)
        return probs.cpu().numpy(), value.float().cpu().numpy()
    return infer


def load_trainer_state(ckpt_dir: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The optimizer tensors, snapshot pool and RNG states (``trainer.safetensors``) and the counters
    (``trainer.json``) that ``--resume`` needs, after verifying their hashes."""
    ckpt_dir = Path(ckpt_dir)
    verify(ckpt_dir, trainer=True)
    try:
        tensors = load_file(str(ckpt_dir / TRAINER_TENSORS))
        state = json.loads((ckpt_dir / TRAINER_JSON).read_text(encoding="utf-8"))
    except (SafetensorError, OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{ckpt_dir}: trainer state does not load ({exc})") from None
    return tensors, state


def prune(run_dir: str | Path, keep: int) -> None:
    """Delete all but the newest ``keep`` checkpoints (0: none deleted), and stale temporary folders of
    checkpoints: only what the run made, by exact names (``ckpt_<update>`` holding only a checkpoint's
    files, ``.ckpt_<update>.XXXXXXXX.tmp``/``.old``), never a link, never a user's ``notes.old``."""
    d = Path(run_dir) / "checkpoints"
    for p in list_checkpoints(run_dir)[:-keep] if keep else []:
        if _only_checkpoint_files(p):
            shutil.rmtree(p, ignore_errors=True)
    if d.is_dir():
        for p in d.iterdir():
            owner = temp_owner(p.name)
            if owner and CKPT_NAME.fullmatch(owner) and p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)


def _only_checkpoint_files(folder: Path) -> bool:
    """Whether ``folder`` holds nothing but regular files a checkpoint has (and their temporaries)."""
    try:
        return all((p.name in CHECKPOINT_FILES or temp_owner(p.name) in CHECKPOINT_FILES)
                   and p.is_file() and not p.is_symlink() for p in folder.iterdir())
    except OSError:
        return False


def check_bot_folder(dest: str | Path, name: str) -> Path:
    """``dest`` as a Path, when a bot of the run called ``name`` may be put there
    (:func:`copy_checkpoint`): a new or empty folder, or one that holds a bot of that run and nothing
    else.  UnsafeTarget (one line) otherwise: nothing else is ever deleted or renamed."""
    return check_dir_target(dest, lambda p: is_checkpoint_of(p, name, BOT_FILES),
                            f"a bot of the run {name!r}")


def copy_checkpoint(ckpt_dir: str | Path, dest: str | Path,
                    extra_files: dict[str, Any] | None = None) -> Path:
    """Copy a checkpoint's weights, metadata, belief and ONNX export (not the trainer state) to ``dest``,
    atomically: what a bot folder serves.  ``dest`` is checked first (:func:`check_bot_folder`)."""
    name = read_metadata(ckpt_dir).name
    dest = check_bot_folder(dest, name)
    tmp = temp_dir_for(dest)
    try:
        for file in (MODEL_FILE, META_FILE, BELIEF_FILE, BELIEF_META, ONNX_FILE, ONNX_META):
            if (Path(ckpt_dir) / file).is_file():  # the belief and ONNX: when the run made them
                shutil.copy2(Path(ckpt_dir) / file, tmp / file)
        for file, data in (extra_files or {}).items():
            write_atomic(tmp / file, json.dumps(data, indent=2) if not isinstance(data, str) else data)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return replace_dir(tmp, dest, lambda p: is_checkpoint_of(p, name, BOT_FILES),
                       f"a bot of the run {name!r}")
