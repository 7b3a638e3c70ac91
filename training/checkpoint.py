"""Checkpoints: weights in safetensors, everything else in JSON; no pickle anywhere.

A checkpoint is a folder ``<run>/checkpoints/ckpt_<updates>/``:

- ``model.safetensors`` — the policy's weights (all that a player needs);
- ``metadata.json`` — config, rules, observation and action-table versions,
  games and decisions trained, git commit, command, wall time, and the
  SHA-256 of every other file in the folder;
- ``trainer.safetensors`` + ``trainer.json`` — optimizer tensors, the
  snapshot pool, counters and RNG states: what ``--resume`` needs.

The folder is written under a temporary name and renamed into place
(``os.replace``), so a reader never sees half a checkpoint; the hashes catch
a file truncated or damaged later.  :func:`latest_good` walks back from the
newest checkpoint to the newest one that verifies.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .model import PolicyNet

MODEL_FILE, META_FILE = "model.safetensors", "metadata.json"
TRAINER_TENSORS, TRAINER_JSON = "trainer.safetensors", "trainer.json"
BELIEF_FILES = ("belief.safetensors", "belief.json")  # training/belief.py (BELIEF_FILE, BELIEF_META)
FORMAT = "samloc-checkpoint/1"


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated or corrupt (one-line reason)."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(ckpt_dir: Path, net: PolicyNet, metadata: dict[str, Any],
                    trainer_tensors: dict[str, torch.Tensor] | None = None,
                    trainer_state: dict[str, Any] | None = None) -> Path:
    """Write a checkpoint folder atomically (temp folder + os.replace); returns its path."""
    ckpt_dir = Path(ckpt_dir)
    ckpt_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = ckpt_dir.with_name(ckpt_dir.name + f".tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    save_file({k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()}, str(tmp / MODEL_FILE))
    files = [MODEL_FILE]
    if trainer_tensors is not None:
        save_file({k: v.detach().cpu().contiguous() for k, v in trainer_tensors.items()},
                  str(tmp / TRAINER_TENSORS))
        files.append(TRAINER_TENSORS)
    if trainer_state is not None:
        with open(tmp / TRAINER_JSON, "w", encoding="utf-8") as f:
            json.dump(trainer_state, f)
        files.append(TRAINER_JSON)
    meta = dict(metadata)
    meta["format"] = FORMAT
    meta["model"] = net.hparams()
    meta["sha256"] = {name: _sha256(tmp / name) for name in files}
    with open(tmp / META_FILE, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2)
    for name in files + [META_FILE]:
        with open(tmp / name, "rb") as f:
            os.fsync(f.fileno())
    return _swap_in(tmp, ckpt_dir)  # the same step written again (a resumed run) is replaced


def read_metadata(ckpt_dir: Path) -> dict[str, Any]:
    path = Path(ckpt_dir) / META_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{ckpt_dir}: no {META_FILE} (not a checkpoint folder)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable or truncated metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a {FORMAT} metadata file")
    return meta


def verify(ckpt_dir: Path, trainer: bool = False) -> dict[str, Any]:
    """The metadata, after checking every listed file's hash (and the trainer files when asked)."""
    ckpt_dir = Path(ckpt_dir)
    meta = read_metadata(ckpt_dir)
    hashes = meta.get("sha256", {})
    need = [MODEL_FILE] + ([TRAINER_TENSORS, TRAINER_JSON] if trainer else [])
    for name in need:
        if name not in hashes:
            raise CheckpointError(f"{ckpt_dir}: {name} is not part of this checkpoint")
        p = ckpt_dir / name
        if not p.is_file():
            raise CheckpointError(f"{ckpt_dir}: {name} is missing")
        if _sha256(p) != hashes[name]:
            raise CheckpointError(f"{ckpt_dir}: {name} is truncated or corrupt (hash mismatch)")
    return meta


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoint folders of a run, oldest first (temporary folders excluded)."""
    d = Path(run_dir) / "checkpoints"
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_dir() and p.name.startswith("ckpt_") and "." not in p.name)


def latest_good(run_dir: Path, trainer: bool = True, warn: Any = None) -> Path:
    """The newest checkpoint of a run that verifies; ``warn(msg)`` hears about each bad one skipped."""
    cands = list_checkpoints(run_dir)
    if not cands:
        raise CheckpointError(f"{run_dir}: no checkpoints in this run folder")
    errors = []
    for p in reversed(cands):
        try:
            verify(p, trainer=trainer)
            return p
        except CheckpointError as exc:
            errors.append(str(exc))
            if warn is not None:
                warn(f"skipping bad checkpoint: {exc}")
    raise CheckpointError(f"{run_dir}: no usable checkpoint ({errors[0]})")


def resolve(path: str | Path) -> Path:
    """A checkpoint folder, or a run folder (→ its newest good checkpoint)."""
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"{path}: no such checkpoint or run folder")
    if (p / META_FILE).exists():
        return p
    if (p / "checkpoints").is_dir():
        return latest_good(p, trainer=False)
    raise CheckpointError(f"{path}: neither a checkpoint folder nor a run folder")


def load_checkpoint(path: str | Path, device: str = "cpu") -> tuple[PolicyNet, dict[str, Any]]:
    """``(PolicyNet in eval mode, metadata)`` from a checkpoint or run folder; CheckpointError if bad."""
    ckpt = resolve(path)
    meta = verify(ckpt)
    m = meta.get("model") or {}
    try:
        net = PolicyNet.from_hparams(m)
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"{ckpt}: metadata lacks the model shape (obs_size, num_actions, hidden, layers)") \
            from None
    try:
        state = load_file(str(ckpt / MODEL_FILE), device=device)
        net.load_state_dict(state)
    except (SafetensorError, RuntimeError, OSError) as exc:
        raise CheckpointError(f"{ckpt}: weights do not load ({str(exc).splitlines()[0]})") from None
    return net.to(device).eval(), meta


def load_trainer_state(ckpt_dir: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    ckpt_dir = Path(ckpt_dir)
    verify(ckpt_dir, trainer=True)
    try:
        tensors = load_file(str(ckpt_dir / TRAINER_TENSORS))
        state = json.loads((ckpt_dir / TRAINER_JSON).read_text(encoding="utf-8"))
    except (SafetensorError, OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{ckpt_dir}: trainer state does not load ({exc})") from None
    return tensors, state


def prune(run_dir: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` checkpoints (and stale temporary folders)."""
    d = Path(run_dir) / "checkpoints"
    for p in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(p, ignore_errors=True)
    if d.is_dir():
        for p in d.iterdir():
            if ".tmp" in p.name or ".old" in p.name:
                shutil.rmtree(p, ignore_errors=True)


def copy_checkpoint(ckpt_dir: Path, dest: Path, extra_files: dict[str, Any] | None = None) -> Path:
    """Copy a checkpoint's weights, metadata and belief (not the trainer state) to ``dest``, atomically."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    shutil.copy2(Path(ckpt_dir) / MODEL_FILE, tmp / MODEL_FILE)
    shutil.copy2(Path(ckpt_dir) / META_FILE, tmp / META_FILE)
    for name in BELIEF_FILES:  # the search's hand belief, when the run made one
        if (Path(ckpt_dir) / name).is_file():
            shutil.copy2(Path(ckpt_dir) / name, tmp / name)
    for name, data in (extra_files or {}).items():
        (tmp / name).write_text(json.dumps(data, indent=2) if not isinstance(data, str) else data,
                                encoding="utf-8")
    return _swap_in(tmp, dest)


def _swap_in(tmp: Path, dest: Path) -> Path:
    """Move the finished folder ``tmp`` to ``dest``, replacing an older one there."""
    if dest.exists():
        old = dest.with_name(dest.name + f".old{os.getpid()}")
        os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)
    return dest
