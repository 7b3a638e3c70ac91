"""A training config as text: the docstring of each field (:func:`field_docs`, read from the source of
each dataclass: :mod:`training.config`'s, and each section's in its algorithm's or stage's module), the
resolved config as commented YAML (``--print-config``), and the keys for ``--help``."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
from pathlib import Path
from typing import Any

import yaml

from . import config
from .algorithms import sections
from .config import TrainConfig, core_fields
from .config_load import unread_note, unread_sections

#: The width of the help's key list.
WIDTH = 100


def field_docs() -> dict[str, dict[str, str]]:
    """``{class: {field: doc}}``: the docstring under each field of the config's dataclasses and of every
    registered section's (:func:`docs_of`)."""
    out = dict(_module_docs(config.__file__))
    for cls in sections(TrainConfig.algorithm).values():
        out[cls.__name__] = docs_of(cls)
    return out


def docs_of(cls: type) -> dict[str, str]:
    """``{field: doc}`` of a config dataclass, its bases' fields included."""
    out: dict[str, str] = {}
    for c in reversed(cls.__mro__):
        if dataclasses.is_dataclass(c):
            out |= _module_docs(inspect.getsourcefile(c) or "").get(c.__name__, {})
    return out


@functools.lru_cache(maxsize=None)
def _module_docs(path: str) -> dict[str, dict[str, str]]:
    """``{class: {field: doc}}``: the docstring under each field of the classes in the source file ``path``,
    on one line (read from the source: Python keeps no attribute docstrings)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = out.setdefault(node.name, {})
        for a, b in zip(node.body, node.body[1:]):
            if (isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr)
                    and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)):
                docs[a.target.id] = " ".join(b.value.value.split()).replace("``", "")  # as --help shows it
    return out


def _summary_line(obj: Any) -> str:
    """The first paragraph of ``obj``'s class docstring on one line (whole sentences), without its ``."""
    paragraph = (type(obj).__doc__ or "").strip().split("\n\n")[0]
    module = type(obj).__module__.replace(".", "/") + ".py"  # what "this module" is, out of its source
    return " ".join(paragraph.split()).replace("``", "").replace("this module's", f"{module}'s")


def _is_records(value: Any) -> bool:
    """A non-empty list of tables (``stages``, ``env.tables``): printed as block YAML, a line per key."""
    return isinstance(value, list) and bool(value) and all(
        dataclasses.is_dataclass(v) or isinstance(v, dict) for v in value)


def _block(value: list[Any], indent: str) -> list[str]:
    """A list of tables as block YAML lines under ``indent``."""
    plain = [dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for v in value]
    text = yaml.safe_dump(plain, default_flow_style=None, sort_keys=False, allow_unicode=True, width=10**6)
    return [indent + line for line in text.splitlines()]


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
    unread = unread_sections(cfg)  # another algorithm's section: said at its head, and at the top

    def walk(obj: Any, keys: list[tuple[str, Any]], indent: str) -> None:
        docs = docs_of(type(obj))
        for name, value in keys:
            if dataclasses.is_dataclass(value):
                note = "NOT READ in this run (not its algorithm's): " if not indent and name in unread else ""
                rows.append((f"{indent}{name}:", note + _summary_line(value)))
                inner = [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
                walk(value, inner, indent + "  ")
            elif _is_records(value):
                rows.append((f"{indent}{name}:", docs.get(name, "")))
                rows.extend((line, "") for line in _block(value, indent + "  "))
            else:
                rows.append((f"{indent}{name}: {_flow(value)}", docs.get(name, "")))

    walk(cfg, [(f.name, getattr(cfg, f.name)) for f in core_fields(cfg)] + list(cfg.sections.items()), "")
    width = min(44, max(len(code) for code, _ in rows))
    head = [f"# samloc train config{' from ' + source if source else ''}, resolved"
            " (defaults <- file <- key=value).",
            "# Any key can be given as key=value (env.players=3, ppo.lr=1e-4); this is a --config file."]
    head += [f"# Sections {unread_note(cfg)}."] if unread else []
    return "\n".join(head + [f"{code:<{width}}  # {doc}" if doc else code for code, doc in rows]) + "\n"


def keys_help() -> str:
    """The keys ``samloc train`` takes, a line per section, for ``--help`` (their docs: --print-config)."""
    cfg = TrainConfig(sections={name: cls() for name, cls in sections(TrainConfig.algorithm).items()})
    keys = [(f.name, getattr(cfg, f.name)) for f in core_fields(cfg)] + list(cfg.sections.items())
    lines = [textwrap.fill(", ".join(name for name, value in keys if not dataclasses.is_dataclass(value)),
                           WIDTH, initial_indent="  ", subsequent_indent="  ")]
    for name, value in keys:
        if dataclasses.is_dataclass(value):
            inner = ", ".join(g.name for g in dataclasses.fields(value))
            lines.append(textwrap.fill(f"{name}.*: {inner}", WIDTH, initial_indent="  ",
                                       subsequent_indent="      "))
            lines.append(textwrap.fill(_summary_line(value), WIDTH, initial_indent="      ",
                                       subsequent_indent="      "))
    return "\n".join(lines)
