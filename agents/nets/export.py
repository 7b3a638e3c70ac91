"""``samloc export CHECKPOINT_DIR [--out FILE.onnx]``: the policy as an ONNX model.

The model runs anywhere onnxruntime does, without PyTorch:

- inputs ``obs`` float32[B, OBS_SIZE] (:func:`sam_env.obs.encode`) and
  ``mask`` float32[B, 201] (1 = legal action, :meth:`Game.legal_mask`);
- outputs ``probs`` float32[B, 201] (softmax of the masked logits, exactly 0
  on illegal actions) and ``value`` float32[B] (the value head, in lá divided
  by the training ``reward_scale``).

Before the file is put in place it is checked against PyTorch on 1,000 real
positions from random games and 1,000 uniformly random observations and
masks: the largest difference of any output must be below 1e-5 on the real
positions and 1e-4 on the random inputs.  Those are far from any game: their
logits reach the hundreds, where float32 rounding alone moves a probability by
1e-5 (seen: 1.2e-5 on random inputs, 1.5e-6 on positions, for a trained
network).  A JSON
sidecar (``FILE.json``) says what the model plays: observation and
action-table versions, the rule sets and player counts it was trained for,
its checkpoint and the SHA-256 of its weights; the same JSON is embedded in
the ONNX metadata (key ``samloc``).  The sidecar alone also records the
SHA-256 of the ``.onnx`` file (``onnx_sha256``), which every loader checks.
Both files are written atomically and together (both written to temporary files, then renamed): a
failed export replaces neither, so a model is never left without its sidecar.
Default output: ``policy.onnx`` inside the checkpoint folder, where
``samloc serve --agent CHECKPOINT_DIR`` finds it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from sam_env import obs as obs_mod
from sam_env.actions import ACTION_TABLE_VERSION, NUM_ACTIONS
from sam_env.atomic import check_target, write_together
from sam_env.table import Table
from sam_env.vector import SelfPlayBatch

from .checkpoint import load_checkpoint
from .format import MODEL_FILE, ONNX_FILE, CheckpointMeta, file_sha256, resolve
from .interface import PolicyNetwork

TOLERANCE = 1e-5  # on real positions
RANDOM_TOLERANCE = 1e-4  # on uniformly random observations and masks (the docstring says why)
OPSET = 17
ONNX_FORMAT = "samloc-onnx/1"


def _positions(table: Table, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (obs, mask) pairs from random games at ``table``: every stage of a game, not only deals."""
    envs = 50
    batch = SelfPlayBatch(rules=table.rules, players=table.players, num_envs=envs, seed=seed)
    _, obs, mask = batch.reset(seed)
    rng = np.random.default_rng(seed)
    obs_out, mask_out = [obs.copy()], [mask.copy()]
    while sum(len(o) for o in obs_out) < n:
        legal = mask > 0
        acts = np.array([rng.choice(np.flatnonzero(row)) for row in legal], dtype=np.int64)
        _, obs, mask, _, _ = batch.step(acts)
        obs_out.append(obs.copy())
        mask_out.append(mask.copy())
    return np.concatenate(obs_out)[:n].astype(np.float32), np.concatenate(mask_out)[:n].astype(np.float32)


def _noise(obs_size: int, num_actions: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniformly random observations and masks (each with at least one legal action)."""
    rng = np.random.default_rng(seed)
    obs = rng.random((n, obs_size), dtype=np.float32)
    mask = (rng.random((n, num_actions)) < rng.random((n, 1))).astype(np.float32)
    mask[np.arange(n), rng.integers(0, num_actions, n)] = 1.0
    return obs, mask


def export(checkpoint: str | Path, out: str | Path | None = None, *, samples: int = 1000,
           seed: int = 0) -> dict[str, Any]:
    """Export, check and write; returns the sidecar (with the check's figures).  Any network kind
    whose forward exports to ONNX does: the graph's inputs and outputs are the same for all.

    Raises ValueError (one line) for a bad checkpoint or a failed check.
    """
    import onnx  # optional: the served bot runs the exported file with onnxruntime alone

    torch.set_num_threads(1)
    ckpt = resolve(checkpoint)
    net, meta = load_checkpoint(ckpt)  # CheckpointError (a ValueError): damaged, or for another engine
    out_path = Path(out) if out is not None else ckpt / ONNX_FILE
    check_target(out_path)  # UnsafeTarget before any work: the model and its sidecar are files
    if out_path.suffix != ".onnx":
        raise ValueError(f"the output file must end in .onnx, not {out_path.name!r}")
    check_target(out_path.with_suffix(".json"))
    model = Served(net).eval()
    sidecar = _sidecar(ckpt, meta)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=out_path.parent, prefix=".tmp-", suffix=".onnx")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        proto = _to_onnx(model, tmp)
        check = _check(model, tmp, meta.tables[0], samples, seed)
        sidecar["check"] = check
        for name, tol in (("positions", TOLERANCE), ("random", RANDOM_TOLERANCE)):
            worst = max(check[name]["max_abs_diff_probs"], check[name]["max_abs_diff_value"])
            if worst >= tol:
                raise ValueError(f"the ONNX model differs from PyTorch by {worst:.3g} on {name}"
                                 f" (tolerance {tol}); not written")
        del proto.metadata_props[:]
        onnx.helper.set_model_props(proto, {"samloc": json.dumps(sidecar)})
        blob = proto.SerializeToString()
        sidecar["onnx_sha256"] = hashlib.sha256(blob).hexdigest()  # the file's own: only the sidecar has it
        side_blob = (json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        # the pair as one: on a full disk neither is replaced; the sidecar (which holds the model's hash)
        # goes in first, so not even a crash leaves a new model beside no sidecar or an old one
        write_together([(out_path.with_suffix(".json"), side_blob), (out_path, blob)])
    finally:
        if tmp.exists():
            tmp.unlink()
    sidecar["path"] = str(out_path)
    return sidecar


class Served(nn.Module):
    """A network of any kind with its softmax: what a served bot needs, masked to exact zeros."""

    def __init__(self, inner: PolicyNetwork):
        super().__init__()
        self.inner = inner

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, value = self.inner(obs, mask)
        probs = torch.softmax(logits, dim=-1) * (mask > 0).to(logits.dtype)
        return probs, value


def _sidecar(ckpt: Path, meta: CheckpointMeta) -> dict[str, Any]:
    """What the exported model plays and where it came from (the check's figures are added after)."""
    rules: list[Any] = []
    for t in meta.tables:
        if t.rules.to_record() not in rules:
            rules.append(t.rules.to_record())
    return {
        "format": ONNX_FORMAT,
        "name": meta.name or ckpt.name,
        "obs_version": obs_mod.OBS_VERSION, "obs_size": obs_mod.OBS_SIZE,
        "action_table_version": ACTION_TABLE_VERSION, "num_actions": NUM_ACTIONS,
        "rules": rules, "players": sorted({t.players for t in meta.tables}),
        "tables": [t.to_record() for t in meta.tables],
        "model": meta.model,
        "checkpoint": str(ckpt),
        "checkpoint_sha256": file_sha256(ckpt / MODEL_FILE),
        "trained": {"updates": meta.updates, "games": meta.games, "decisions": meta.decisions,
                    "git_commit": meta.git_commit},
        "inputs": {"obs": ["batch", obs_mod.OBS_SIZE], "mask": ["batch", NUM_ACTIONS]},
        "outputs": {"probs": ["batch", NUM_ACTIONS], "value": ["batch"]},
        "opset": OPSET, "exported": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def _to_onnx(model: Served, path: Path) -> Any:
    """Trace ``model`` into ``path`` (inputs obs and mask, outputs probs and value, any batch size);
    returns the checked ONNX proto."""
    import onnx  # optional (see export)

    dummy = (torch.zeros(1, obs_mod.OBS_SIZE), torch.ones(1, NUM_ACTIONS))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(model, dummy, str(path), dynamo=False, opset_version=OPSET,
                          input_names=["obs", "mask"], output_names=["probs", "value"],
                          dynamic_axes={"obs": {0: "batch"}, "mask": {0: "batch"},
                                        "probs": {0: "batch"}, "value": {0: "batch"}})
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    return proto


def _check(model: Served, onnx_path: Path, table: Table, samples: int, seed: int) -> dict[str, Any]:
    """Largest |ONNX − PyTorch| over real positions (at ``table``) and random inputs."""
    import onnxruntime as ort  # optional: only an export checks against it

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    sets = {"positions": _positions(table, samples, seed),
            "random": _noise(obs_mod.OBS_SIZE, NUM_ACTIONS, samples, seed + 1)}
    out: dict[str, Any] = {"samples": 0, "tolerance": TOLERANCE, "random_tolerance": RANDOM_TOLERANCE}
    worst = 0.0
    for name, (obs, mask) in sets.items():
        with torch.no_grad():
            tp, tv = model(torch.from_numpy(obs), torch.from_numpy(mask))
        op, ov = sess.run(["probs", "value"], {"obs": obs, "mask": mask})
        dp = float(np.abs(op - tp.numpy()).max())
        dv = float(np.abs(ov.reshape(-1) - tv.numpy().reshape(-1)).max())
        out[name] = {"n": len(obs), "max_abs_diff_probs": dp, "max_abs_diff_value": dv,
                     "same_argmax": float(np.mean(op.argmax(1) == tp.numpy().argmax(1)))}
        out["samples"] += len(obs)
        worst = max(worst, dp, dv)
    out["max_abs_diff"] = worst
    return out
