"""The checkpoint folder format and what a checkpoint says of itself; no torch here.

A checkpoint is a folder (``<run>/checkpoints/ckpt_<updates>/``, or a shipped
bot such as ``checkpoints/standard``):

- ``model.safetensors`` — the policy's weights (all that a player needs);
- ``metadata.json`` — :class:`CheckpointMeta`: the network's kind and
  hyper-parameters (``model``: ``kind`` absent is an ``mlp``), the
  observation and action-table versions, the tables it was trained for, how
  it was trained (config, commands, wall time), and the SHA-256 of every
  other file it lists;
- ``trainer.safetensors`` + ``trainer.json`` — optimizer, snapshot pool,
  counters and RNG states: what ``samloc train --resume`` needs;
- optionally ``belief.safetensors`` + ``belief.json`` (:mod:`agents.nets.belief`)
  and ``policy.onnx`` + ``policy.json`` (:mod:`agents.nets.export`).

This module reads and verifies the format without importing torch, so the
ONNX server can check what it serves; :mod:`agents.nets.checkpoint` writes
and loads the weights.  Every reader checks versions through
:func:`check_versions`, the one place that knows what "compatible" means.

Nothing is allocated on a file's word: a JSON file is read only when it is a
regular file of at most :data:`MAX_JSON_BYTES` (:func:`read_json_file`), a
network's shape is bounded (:data:`MAX_PARAMS`) and must be the one its
safetensors header describes (:func:`check_tensors`) before it is built.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Mapping

from sam_env.actions import ACTION_TABLE_VERSION, NUM_ACTIONS
from sam_env.cards import DEFAULT_PLAYERS
from sam_env.obs import LA_SCALE, OBS_SIZE, OBS_VERSION
from sam_env.rules import DEFAULT_PRESET, RuleSet, RulesError
from sam_env.table import Table

MODEL_FILE, META_FILE = "model.safetensors", "metadata.json"
TRAINER_TENSORS, TRAINER_JSON = "trainer.safetensors", "trainer.json"
BELIEF_FILE, BELIEF_META = "belief.safetensors", "belief.json"
ONNX_FILE, ONNX_META = "policy.onnx", "policy.json"  # the served artifact (agents/nets/export.py)
REPORT_FILE = "eval_report.json"  # the final evaluation, beside the weights it scored
#: Every file a checkpoint folder may hold; a bot folder (``checkpoint.export_to``) holds the first ones.
BOT_FILES = frozenset({MODEL_FILE, META_FILE, BELIEF_FILE, BELIEF_META, ONNX_FILE, ONNX_META, REPORT_FILE})
CHECKPOINT_FILES = BOT_FILES | {TRAINER_TENSORS, TRAINER_JSON}
FORMAT = "samloc-checkpoint/1"
DEFAULT_KIND = "mlp"  # the registered network (agents.nets.policy.PolicyNet); a model without "kind" is one
#: The registered networks sized by ``model.hidden`` and ``model.layers``: the MLP and the parts of
#: agents/nets/parts.py (agents.nets.factory.NETWORKS holds their classes; a test keeps the two in step).
SIZED_KINDS = (DEFAULT_KIND, "moves", "history", "shape", "combined")
#: A user's network: ``package.module:Class`` (agents.nets.factory imports it).
KIND_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
MAX_JSON_BYTES = 1 << 20          # a metadata, sidecar, belief or report file (they are a few KiB)
MAX_PARAMS = 1 << 28              # parameters of one network (1 GiB in float32; the shipped bot has 0.6 M)
MAX_LAYERS = 256
MAX_SAFETENSORS_HEADER = 1 << 20  # the JSON header of a weights file (a few hundred bytes per tensor)
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                "BOOL": 1}


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated, corrupt or made for another engine (one-line reason)."""


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open_regular(path) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def open_regular(path: str | Path, max_bytes: int | None = None) -> BinaryIO:
    """``path`` opened for reading, refused (CheckpointError naming it) unless it is a regular file
    of at most ``max_bytes``: a link to /dev/zero or a pipe would never end.  FileNotFoundError
    passes through, for callers to say what a missing file means."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a pipe with no writer would block a plain open
    st = os.fstat(fd)
    problem = ("not a regular file" if not stat.S_ISREG(st.st_mode) else
               f"{st.st_size:,} bytes, more than such a file may have ({max_bytes:,})"
               if max_bytes is not None and st.st_size > max_bytes else None)
    if problem is not None:
        os.close(fd)
        raise CheckpointError(f"{path}: {problem}")
    return os.fdopen(fd, "rb")


def read_json_file(path: str | Path) -> Any:
    """The JSON value of a small file (metadata, sidecar, belief, report); CheckpointError, one line
    naming the file, for one that is not a regular file, is over :data:`MAX_JSON_BYTES` or is not
    JSON.  FileNotFoundError passes through."""
    with open_regular(path, MAX_JSON_BYTES) as f:
        data = f.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:  # it grew since it was measured
        raise CheckpointError(f"{path}: more than such a file may have ({MAX_JSON_BYTES:,} bytes)")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: JSON, or a huge integer
        raise CheckpointError(f"{path}: unreadable or truncated JSON ({str(exc).splitlines()[0]})") from None


def check_versions(meta: Mapping[str, Any], where: str, remedy: str = "") -> None:
    """Refuse an artifact made for another observation encoding or action table.

    ``meta`` is any artifact's description (checkpoint metadata, an ONNX
    sidecar, a belief's JSON) with ``obs_version``/``action_table_version``
    and optionally ``obs_size``/``num_actions``; a missing key is not checked
    (artifacts from before it was recorded)."""
    ours = {"obs_version": OBS_VERSION, "action_table_version": ACTION_TABLE_VERSION,
            "obs_size": OBS_SIZE, "num_actions": NUM_ACTIONS}
    for key, want in ours.items():
        theirs = meta.get(key)
        if theirs is not None and theirs != want:
            raise CheckpointError(f"{where} was made for {key} {theirs}, but this engine has {want}"
                                  + (f"; {remedy}" if remedy else ""))


def parse_tables(raw: Mapping[str, Any], where: str) -> tuple[Table, ...]:
    """The tables an artifact says it was trained for: ``tables`` ([{rules, players}]), or, as
    written before that field existed, every allowed pair of ``rules`` x ``players``."""
    try:
        if raw.get("tables"):
            return tuple(Table.from_record(t) for t in raw["tables"])
        rules = raw.get("rules") or [DEFAULT_PRESET]
        players = raw.get("players") or [DEFAULT_PLAYERS]
        rules = rules if isinstance(rules, list) else [rules]
        players = players if isinstance(players, list) else [players]
        out = []
        for r in rules:
            rs = RuleSet.parse(r)
            out += [Table(rs, int(p)) for p in sorted(set(players)) if int(p) in rs.player_counts]
        return tuple(out)
    except (RulesError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{where}: the tables it was trained for are unreadable ({exc})") from None


def policy_shapes(model: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    """The tensors, name → shape, of the policy network (:class:`agents.nets.policy.PolicyNet`) that
    a metadata ``model`` describes, worked out without building it: what ``model.safetensors``
    must hold."""
    obs, acts, h, layers = (int(model[k]) for k in ("obs_size", "num_actions", "hidden", "layers"))
    out: dict[str, tuple[int, ...]] = {"inp.weight": (h, obs), "inp.bias": (h,)}
    for i in range(layers - 1):
        out |= {f"blocks.{i}.weight": (h, h), f"blocks.{i}.bias": (h,)}
    out |= {"pi.weight": (acts, h), "pi.bias": (acts,), "v.weight": (1, h), "v.bias": (1,)}
    critic = int(model.get("critic_size", 0))
    if critic > 0:
        out |= {"critic.inp.weight": (h, h + critic), "critic.inp.bias": (h,), "critic.block.weight": (h, h),
                "critic.block.bias": (h,), "critic.v.weight": (1, h), "critic.v.bias": (1,)}
    return out


def belief_shapes(obs_size: int, hidden: int, places: int, ranks: int) -> dict[str, tuple[int, ...]]:
    """The tensors of the hand belief (:class:`agents.nets.belief.BeliefNet`) of this size."""
    return {"body.0.weight": (hidden, obs_size), "body.0.bias": (hidden,), "body.2.weight": (hidden, hidden),
            "body.2.bias": (hidden,), "out.weight": (places * ranks, hidden), "out.bias": (places * ranks,)}


def check_size(shapes: Mapping[str, tuple[int, ...]], where: str) -> None:
    """Refuse a network of more than :data:`MAX_PARAMS` parameters before anything is allocated."""
    n = sum(math.prod(s) for s in shapes.values())
    if n > MAX_PARAMS:
        raise CheckpointError(f"{where}: the network it describes has {n:,} parameters, more than"
                              f" {MAX_PARAMS:,} (corrupt metadata?)")


def check_kind(kind: Any, where: str) -> None:
    """A model kind is a registered network or an import path ``package.module:Class``."""
    if not isinstance(kind, str) or not (kind in SIZED_KINDS or KIND_PATH.fullmatch(kind)):
        raise CheckpointError(f"{where}: model kind {str(kind)[:80]!r} is neither a registered network"
                              f" ({', '.join(SIZED_KINDS)}) nor an import path package.module:Class")


def _check_model_fields(model: Any, where: str) -> None:
    """The model: its kind, and for the mlp positive integers (``critic_size`` may be 0) of a network
    of bounded size; a user's network has JSON scalars (its shapes are checked when it is built)."""
    if not isinstance(model, dict):
        raise CheckpointError(f"{where}: metadata lacks the model")
    check_kind(model.get("kind", DEFAULT_KIND), where)
    if model.get("kind", DEFAULT_KIND) != DEFAULT_KIND:
        bad = [k for k, v in model.items() if not isinstance(v, (int, float, str, bool))]
        if bad or not all(isinstance(model.get(k), int) for k in ("obs_size", "num_actions", "critic_size")):
            raise CheckpointError(f"{where}: the model's hyper-parameters must be numbers or strings,"
                                  " with integer obs_size, num_actions and critic_size")
        return
    if not all(isinstance(model.get(k), int) for k in ("obs_size", "num_actions", "hidden", "layers")):
        raise CheckpointError(f"{where}: metadata lacks the model shape"
                              " (obs_size, num_actions, hidden, layers)")
    for k in ("obs_size", "num_actions", "hidden", "layers", "critic_size"):
        v, low = model.get(k, 0), int(k != "critic_size")
        top = MAX_LAYERS if k == "layers" else MAX_PARAMS
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= top:
            raise CheckpointError(f"{where}: the model shape's {k} must be an integer from {low} to {top:,},"
                                  f" not {str(v)[:40]}")
    check_size(policy_shapes(model), where)


def safetensors_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """The tensors a safetensors file holds, name → shape, from its header alone, after checking
    that the header is bounded and that every tensor's bytes lie in the file."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 2 <= n <= min(MAX_SAFETENSORS_HEADER, size - 8):
            raise CheckpointError(f"{path}: not a safetensors file (a header of {n} bytes in {size:,})")
        text = f.read(n)
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CheckpointError(f"{path}: unreadable safetensors header ({str(exc).splitlines()[0]})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: unreadable safetensors header (not a JSON object)")
    data, out = size - 8 - n, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        try:
            shape, (lo, hi) = tuple(int(x) for x in t["shape"]), t["data_offsets"]
            fits = 0 <= lo <= hi <= data and hi - lo == math.prod(shape) * _DTYPE_BYTES[t["dtype"]]
        except (KeyError, TypeError, ValueError):
            fits = False
        if not fits:
            raise CheckpointError(f"{path}: the tensor {str(name)[:60]!r} does not lie in the file"
                                  " (truncated?)")
        out[str(name)] = shape
    return out


def check_tensors(path: str | Path, expected: Mapping[str, tuple[int, ...]], where: str) -> None:
    """Refuse weights whose tensors are not those the metadata describes, before a network is built."""
    found = safetensors_shapes(path)
    for name in sorted(set(expected) | set(found)):
        want, got = expected.get(name), found.get(name)
        if want != got:
            raise CheckpointError(f"{where}: {Path(path).name} does not hold the network its metadata"
                                  f" describes ({name}: {'missing' if got is None else list(got)}, expected"
                                  f" {'none' if want is None else list(want)})")


@dataclass(frozen=True)
class CheckpointMeta:
    """What ``metadata.json`` says, typed: the fields players and tools rely on.

    ``raw`` keeps the whole document (the training config, the last evaluation)
    for reports; nothing outside training reads the config through it."""

    name: str
    model: dict[str, Any]
    """The network's ``kind`` (written in, ``mlp`` where the file has none) and hyper-parameters."""
    tables: tuple[Table, ...]
    reward_scale: float = LA_SCALE
    """Lá per unit of the network's value head."""
    heuristic_share: float = 0.0
    """Share of the training games the learner played against the heuristic (the opponent mix)."""
    obs_version: int | None = None
    action_table_version: int | None = None
    updates: int = 0
    games: int = 0
    decisions: int = 0
    decisions_trained: int = 0
    command: str = ""
    resumes: tuple[str, ...] = ()
    wall_time_s: float = 0.0
    git_commit: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> "CheckpointMeta":
        """Parse and check a metadata document; CheckpointError names what is wrong."""
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise CheckpointError(f"{where}: not a {FORMAT} metadata file")
        model = raw.get("model")
        _check_model_fields(model, where)
        cfg = raw.get("config") if isinstance(raw.get("config"), dict) else {}
        roll = cfg.get("rollout") or {}
        env = cfg.get("env") or {}
        try:  # written by the trainer since the typed record; older checkpoints: from their config
            scale = float(raw.get("reward_scale", env.get("reward_scale", LA_SCALE)))
            share = float(raw.get("heuristic_share",
                                  float(roll.get("opponent_fraction", 0.0))
                                  * float(roll.get("heuristic_share", 0.0))))
            counts = {k: int(raw.get(k) or 0) for k in ("updates", "games", "decisions", "decisions_trained")}
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: unreadable metadata ({exc})") from None
        return cls(name=str(raw.get("name") or ""), model={"kind": DEFAULT_KIND, **model},
                   tables=parse_tables(raw, where),
                   reward_scale=scale, heuristic_share=share, obs_version=raw.get("obs_version"),
                   action_table_version=raw.get("action_table_version"), **counts,
                   command=str(raw.get("command") or ""), resumes=tuple(raw.get("resumes") or ()),
                   wall_time_s=float(raw.get("wall_time_s") or 0.0),
                   git_commit=str(raw.get("git_commit") or ""), raw=raw)


def read_metadata(ckpt_dir: str | Path) -> CheckpointMeta:
    """The typed metadata of a checkpoint folder (versions not yet checked)."""
    path = Path(ckpt_dir) / META_FILE
    try:
        raw = read_json_file(path)
    except FileNotFoundError:
        raise CheckpointError(f"{ckpt_dir}: no {META_FILE} (not a checkpoint folder)") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: unreadable metadata ({exc.strerror})") from None
    return CheckpointMeta.from_json(raw, str(path))


def metadata_digest(raw: Mapping[str, Any]) -> str:
    """The SHA-256 a metadata document records of itself: of its canonical JSON (sorted keys, no
    spaces, ASCII) without that entry, so that it can be written into the file it covers."""
    body = dict(raw)
    hashes = body.get("sha256")
    if isinstance(hashes, dict):
        body["sha256"] = {k: v for k, v in hashes.items() if k != META_FILE}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def sealed(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A metadata document (as it will read back from JSON) with its own hash set: what is written."""
    out = json.loads(json.dumps(raw))
    out.setdefault("sha256", {})[META_FILE] = metadata_digest(out)
    return out


def verify(ckpt_dir: str | Path, trainer: bool = False, served: bool = False) -> CheckpointMeta:
    """The metadata, after checking its own hash (where it records one), the versions and the hash of
    the weights (and of the trainer files when asked; of the exported ``policy.onnx``, when
    ``served`` and the checkpoint has one)."""
    ckpt_dir = Path(ckpt_dir)
    meta = read_metadata(ckpt_dir)
    hashes = meta.raw.get("sha256") or {}
    if not isinstance(hashes, dict):
        raise CheckpointError(f"{ckpt_dir}: {META_FILE} is damaged (its sha256 is not a table)")
    if META_FILE in hashes and hashes[META_FILE] != metadata_digest(meta.raw):
        raise CheckpointError(f"{ckpt_dir}: {META_FILE} is damaged or was changed (hash mismatch)")
    check_versions({**meta.raw, **meta.model}, str(ckpt_dir))
    for name in [MODEL_FILE] + ([TRAINER_TENSORS, TRAINER_JSON] if trainer else []):
        if name not in hashes:
            raise CheckpointError(f"{ckpt_dir}: {name} is not part of this checkpoint")
        p = ckpt_dir / name
        if not p.exists():
            raise CheckpointError(f"{ckpt_dir}: {name} is missing")
        if file_sha256(p) != hashes[name]:
            raise CheckpointError(f"{ckpt_dir}: {name} is truncated or corrupt (hash mismatch)")
    if served and (ckpt_dir / ONNX_FILE).exists():
        _verify_onnx(ckpt_dir, hashes[MODEL_FILE])
    return meta


def _verify_onnx(ckpt_dir: Path, weights_sha256: str) -> None:
    """The exported model matches the SHA-256 its sidecar records, and was exported from these weights."""
    try:
        side = read_json_file(ckpt_dir / ONNX_META)
    except FileNotFoundError:
        raise CheckpointError(f"{ckpt_dir}: {ONNX_FILE} has no {ONNX_META} beside it") from None
    if not isinstance(side, dict) or side.get("onnx_sha256") != file_sha256(ckpt_dir / ONNX_FILE):
        raise CheckpointError(f"{ckpt_dir}: {ONNX_FILE} is truncated or corrupt"
                              f" (hash mismatch with {ONNX_META})")
    if side.get("checkpoint_sha256") not in (None, weights_sha256):
        raise CheckpointError(f"{ckpt_dir}: {ONNX_FILE} was not exported from these weights")


def is_checkpoint_of(folder: Path, name: str, files: frozenset[str] = CHECKPOINT_FILES) -> bool:
    """Whether ``folder`` holds a checkpoint of the run called ``name`` and nothing else: only regular
    files a checkpoint has (``files``), with a metadata.json that names that run.  What a run may
    replace (its own checkpoint written again; its bot in ``checkpoint.export_to``)."""
    try:
        entries = list(folder.iterdir())
        if not all(p.name in files and not p.is_symlink() and p.is_file() for p in entries):
            return False
        raw = read_json_file(folder / META_FILE)
    except (OSError, CheckpointError):
        return False
    return isinstance(raw, dict) and raw.get("format") == FORMAT and raw.get("name") == name


#: a checkpoint's folder name in a run's ``checkpoints/``: ``ckpt_`` and its update, eight digits or more
CKPT_NAME = re.compile(r"ckpt_(\d{8,})")


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoint folders of a run, oldest first: folders (not links) named exactly as the run names them
    (:data:`CKPT_NAME`); temporary folders and anything a user put there are not among them."""
    d = Path(run_dir) / "checkpoints"
    if not d.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in d.iterdir()
             if (m := CKPT_NAME.fullmatch(p.name)) and p.is_dir() and not p.is_symlink()]
    return [p for _, p in sorted(found)]


def latest_good(run_dir: str | Path, trainer: bool = True, warn: Any = None, served: bool = False) -> Path:
    """The newest checkpoint of a run that verifies (:func:`verify` with ``trainer`` and ``served``);
    ``warn(msg)`` hears about each bad one skipped."""
    cands = list_checkpoints(run_dir)
    if not cands:
        raise CheckpointError(f"{run_dir}: no checkpoints in this run folder")
    errors = []
    for p in reversed(cands):
        try:
            verify(p, trainer=trainer, served=served)
            return p
        except CheckpointError as exc:
            errors.append(str(exc))
            if warn is not None:
                warn(f"skipping bad checkpoint: {exc}")
    raise CheckpointError(f"{run_dir}: no usable checkpoint ({errors[0]})")


_WARNED: set[str] = set()


def warn(message: str) -> None:
    """One line on standard error, once per process (a command may resolve a run folder twice): a
    damaged checkpoint skipped."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"samloc: {message}", file=sys.stderr)


def resolve(path: str | Path) -> Path:
    """A checkpoint folder, or a run folder (→ its newest good checkpoint: weights, metadata and
    exported model verified, so that every command falls back to the same one; a warning line for
    each damaged one skipped)."""
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"{path}: no such checkpoint or run folder")
    if (p / META_FILE).exists():
        return p
    if (p / "checkpoints").is_dir():
        return latest_good(p, trainer=False, warn=warn, served=True)
    raise CheckpointError(f"{path}: neither a checkpoint folder nor a run folder")
