"""A training config as text: the docstring of each field (:func:`field_docs`, read from
:mod:`training.config`'s source), the resolved config as commented YAML (``--print-config``), and the keys
for ``--help``."""

from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path
from typing import Any

import yaml

from . import config
from .config import TrainConfig


@functools.lru_cache(maxsize=1)
def field_docs() -> dict[str, dict[str, str]]:
    """``{class: {field: doc}}``: the docstring under each field of the config's dataclasses, on one line
    (read from the source: Python keeps no attribute docstrings)."""
    tree = ast.parse(Path(config.__file__).read_text(encoding="utf-8"))
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = out.setdefault(node.name, {})
        for a, b in zip(node.body, node.body[1:]):
            if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                    and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
                docs[a.target.id] = " ".join(b.value.value.split())
    return out


def _summary_line(obj: Any) -> str:
    return (type(obj).__doc__ or "").strip().splitlines()[0]


def _flow(value: Any) -> str:
    """One value as one line of YAML (lists and tables in flow style)."""
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    elif isinstance(value, list):
        value = [dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for v in value]
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, allow_unicode=True, width=10**6)
    return text.strip().removesuffix("...").strip()


def config_text(cfg: TrainConfig, source: str = "") -> str:
    """The config as YAML that ``--config`` reads back, every field with its doc as a comment."""
    rows: list[tuple[str, str]] = []

    def walk(obj: Any, indent: str) -> None:
        docs = field_docs().get(type(obj).__name__, {})
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                rows.append((f"{indent}{f.name}:", _summary_line(value)))
                walk(value, indent + "  ")
            else:
                rows.append((f"{indent}{f.name}: {_flow(value)}", docs.get(f.name, "")))

    walk(cfg, "")
    width = min(44, max(len(code) for code, _ in rows))
    head = [f"# samloc train config{' from ' + source if source else ''}, resolved"
            " (defaults <- file <- key=value).",
            "# Any key can be given as key=value (env.players=3, ppo.lr=1e-4); this is a --config file."]
    return "\n".join(head + [f"{code:<{width}}  # {doc}" if doc else code for code, doc in rows]) + "\n"


def keys_help() -> str:
    """The keys ``samloc train`` takes, a line per section, for ``--help`` (their docs: --print-config)."""
    cfg = TrainConfig()
    plain = [f.name for f in dataclasses.fields(cfg) if not dataclasses.is_dataclass(getattr(cfg, f.name))]
    lines = ["  " + ", ".join(plain)]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            keys = ", ".join(g.name for g in dataclasses.fields(value))
            lines.append(f"  {f.name}.*: {_summary_line(value)} ({keys})")
    return "\n".join(lines)
