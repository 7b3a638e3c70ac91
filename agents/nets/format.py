"""The checkpoint folder format and what a checkpoint says of itself; no torch here.

A checkpoint is a folder (``<run>/checkpoints/ckpt_<updates>/``, or a shipped
bot such as ``checkpoints/standard``):

- ``model.safetensors`` — the policy's weights (all that a player needs);
- ``metadata.json`` — :class:`CheckpointMeta`: the network's shape, the
  observation and action-table versions, the tables it was trained for, how
  it was trained (config, commands, wall time), and the SHA-256 of every
  other file it lists;
- ``trainer.safetensors`` + ``trainer.json`` — optimizer, snapshot pool,
  counters and RNG states: what ``samloc train --resume`` needs;
- optionally ``belief.safetensors`` + ``belief.json`` (:mod:`agents.nets.belief`)
  and ``policy.onnx`` + ``policy.json`` (:mod:`agents.export`).

This module reads and verifies the format without importing torch, so the
ONNX server can check what it serves; :mod:`agents.nets.checkpoint` writes
and loads the weights.  Every reader checks versions through
:func:`check_versions`, the one place that knows what "compatible" means.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sam_env.actions import ACTION_TABLE_VERSION, NUM_ACTIONS
from sam_env.obs import LA_SCALE, OBS_SIZE, OBS_VERSION
from sam_env.rules import RuleSet, RulesError

MODEL_FILE, META_FILE = "model.safetensors", "metadata.json"
TRAINER_TENSORS, TRAINER_JSON = "trainer.safetensors", "trainer.json"
BELIEF_FILE, BELIEF_META = "belief.safetensors", "belief.json"
FORMAT = "samloc-checkpoint/1"


class CheckpointError(ValueError):
    """A checkpoint that is missing, truncated, corrupt or made for another engine (one-line reason)."""


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


@dataclass(frozen=True)
class Table:
    """One (rule set, player count) pair a network was trained for."""

    rules: RuleSet
    players: int

    def to_json(self) -> dict[str, Any]:
        return {"rules": self.rules.to_record(), "players": self.players}

    def key(self) -> tuple[str, int]:
        return json.dumps(self.rules.to_record(), sort_keys=True), self.players


def parse_tables(raw: Mapping[str, Any], where: str) -> tuple[Table, ...]:
    """The tables an artifact says it was trained for: ``tables`` ([{rules, players}]), or, as
    written before that field existed, every allowed pair of ``rules`` x ``players``."""
    try:
        if raw.get("tables"):
            return tuple(Table(RuleSet.parse(t["rules"]), int(t["players"])) for t in raw["tables"])
        rules = raw.get("rules") or ["hoi_quan_bai"]
        players = raw.get("players") or [4]
        rules = rules if isinstance(rules, list) else [rules]
        players = players if isinstance(players, list) else [players]
        out = []
        for r in rules:
            rs = RuleSet.parse(r)
            out += [Table(rs, int(p)) for p in sorted(set(players)) if 2 <= int(p) <= rs.max_players]
        return tuple(out)
    except (RulesError, KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{where}: the tables it was trained for are unreadable ({exc})") from None


@dataclass(frozen=True)
class CheckpointMeta:
    """What ``metadata.json`` says, typed: the fields players and tools rely on.

    ``raw`` keeps the whole document (the training config, the last evaluation)
    for reports; nothing outside training reads the config through it."""

    name: str
    model: dict[str, int]
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
        if not isinstance(model, dict) or not all(isinstance(model.get(k), int) for k in
                                                  ("obs_size", "num_actions", "hidden", "layers")):
            raise CheckpointError(f"{where}: metadata lacks the model shape (obs_size, num_actions, hidden, layers)")
        cfg = raw.get("config") if isinstance(raw.get("config"), dict) else {}
        roll = cfg.get("rollout") or {}
        env = cfg.get("env") or {}
        try:  # written by the trainer since the typed record; older checkpoints: from their config
            scale = float(raw.get("reward_scale", env.get("reward_scale", LA_SCALE)))
            share = float(raw.get("heuristic_share",
                                  float(roll.get("opponent_fraction", 0.0)) * float(roll.get("heuristic_share", 0.0))))
            counts = {k: int(raw.get(k) or 0) for k in ("updates", "games", "decisions", "decisions_trained")}
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: unreadable metadata ({exc})") from None
        return cls(name=str(raw.get("name") or ""), model=dict(model), tables=parse_tables(raw, where),
                   reward_scale=scale, heuristic_share=share, obs_version=raw.get("obs_version"),
                   action_table_version=raw.get("action_table_version"), **counts,
                   command=str(raw.get("command") or ""), resumes=tuple(raw.get("resumes") or ()),
                   wall_time_s=float(raw.get("wall_time_s") or 0.0), git_commit=str(raw.get("git_commit") or ""),
                   raw=raw)


def read_metadata(ckpt_dir: str | Path) -> CheckpointMeta:
    """The typed metadata of a checkpoint folder (versions not yet checked)."""
    path = Path(ckpt_dir) / META_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{ckpt_dir}: no {META_FILE} (not a checkpoint folder)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable or truncated metadata ({exc})") from None
    return CheckpointMeta.from_json(raw, str(path))


def verify(ckpt_dir: str | Path, trainer: bool = False) -> CheckpointMeta:
    """The metadata, after checking the versions and the hash of the weights (and of the trainer
    files when asked)."""
    ckpt_dir = Path(ckpt_dir)
    meta = read_metadata(ckpt_dir)
    check_versions({**meta.raw, **meta.model}, str(ckpt_dir))
    hashes = meta.raw.get("sha256") or {}
    for name in [MODEL_FILE] + ([TRAINER_TENSORS, TRAINER_JSON] if trainer else []):
        if name not in hashes:
            raise CheckpointError(f"{ckpt_dir}: {name} is not part of this checkpoint")
        p = ckpt_dir / name
        if not p.is_file():
            raise CheckpointError(f"{ckpt_dir}: {name} is missing")
        if file_sha256(p) != hashes[name]:
            raise CheckpointError(f"{ckpt_dir}: {name} is truncated or corrupt (hash mismatch)")
    return meta


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoint folders of a run, oldest first (temporary folders excluded)."""
    d = Path(run_dir) / "checkpoints"
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_dir() and p.name.startswith("ckpt_") and "." not in p.name)


def latest_good(run_dir: str | Path, trainer: bool = True, warn: Any = None) -> Path:
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
