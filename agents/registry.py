"""Agents by name: ``make_agent("heuristic")``, a checkpoint, an ONNX file, a URL.

The spec grammar lives here and only here: :func:`parse_spec` reads a spec
into an :class:`AgentSpec`, :func:`make_agent` builds it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from .base import Agent
from .players.heuristic import HeuristicAgent
from .players.heuristic_params import VARIANTS
from .nets.format import DEFAULT_KIND, read_metadata, resolve
from .players.random_agent import RandomAgent
from .players.search_settings import parse_search_spec
from .serving.shipped import ENV_VAR, NoCheckpoints, checkpoints_dir

SPEC_HELP = ("random, random:uniform, heuristic, heuristic:" + "|".join(v for v in VARIANTS if v)
             + ", a checkpoint directory (DIR+search for play-time search), a .onnx file,"
               " or http://host:port")

SpecKind = Literal["http", "onnx", "search", "random", "heuristic", "checkpoint"]


@dataclass(frozen=True)
class AgentSpec:
    """A checked spec: its ``kind``, the ``target`` it names (a URL, an ONNX file, a
    checkpoint folder, or the built-in name) and its ``option`` (a variant, or the
    settings after ``+search``)."""

    kind: SpecKind
    target: str
    option: str = ""


def parse_spec(spec: str) -> AgentSpec:
    """Read a spec string (see :data:`SPEC_HELP`).

    Raises ValueError with a one-line message for an unknown spec or variant, or a
    missing file or folder, so a bad spec fails before anything is loaded.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"an agent spec must be a non-empty string ({SPEC_HELP}), not {spec!r}")
    s = spec.strip()
    low = s.lower()
    if low.startswith(("http://", "https://")):
        return AgentSpec("http", _checked_url(s))
    if low.endswith(".onnx"):
        if not os.path.isfile(s):
            raise ValueError(f"no such ONNX file: {s}")
        return AgentSpec("onnx", s)
    if "+search" in s:
        path, _, settings = s.partition("+search")
        if not os.path.isdir(path):
            raise ValueError(f"{missing_checkpoint(path)} (in {s!r})")
        parse_search_spec(settings)  # bounded before anything is loaded
        return AgentSpec("search", path, settings)
    name, _, variant = s.partition(":")
    if name == "random":
        if variant not in ("", "uniform"):
            raise ValueError(f"unknown random variant {variant!r} (known: random, random:uniform)")
        return AgentSpec("random", name, variant)
    if name == "heuristic":
        if variant not in VARIANTS:
            raise ValueError(f"unknown heuristic variant {variant!r} (known: "
                             + ", ".join("heuristic:" + v for v in VARIANTS if v) + ")")
        return AgentSpec("heuristic", name, variant)
    if os.path.isdir(s):
        return AgentSpec("checkpoint", s)
    if os.sep in s or "/" in s or s.startswith("."):
        raise ValueError(missing_checkpoint(s))
    raise ValueError(f"unknown agent spec {spec!r} (expected {SPEC_HELP})")


def missing_checkpoint(path: str) -> str:
    """The line for a checkpoint folder that is not there; for ``checkpoints/NAME``, where the shipped ones
    are: a wheel holds none (``agents/serving/shipped.py``)."""
    msg, parts = f"no such checkpoint directory: {path}", Path(path).parts
    if not parts or parts[0] != "checkpoints":
        return msg
    try:
        root = checkpoints_dir()
    except NoCheckpoints:
        return (f"{msg} (a wheel holds no checkpoints: the shipped ones are the checkpoints/ folder of the"
                f" samloc repository; run from a clone of it, or set {ENV_VAR} to that folder)")
    there = root.joinpath(*parts[1:])
    return f"{msg} (the shipped checkpoints are in {root}: {there})" if there.is_dir() else msg


def shown_spec(spec: str) -> str:
    """``spec`` as it may be shown (logs, ``/v1/info``, the play page, errors): an ``http://`` URL's
    password as ``***`` (``user:***@host``), a user name alone (a token) too.  Everything before
    the last ``@`` counts as the credentials, even a ``/`` a careless password holds."""
    scheme, sep, rest = spec.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return spec
    userinfo, at, host = rest.rpartition("@")
    if not at:
        return spec
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user.split('/')[0] + ':***' if colon else '***'}@{host}"


def _checked_url(url: str) -> str:
    """``url`` if it names a bot: ``http(s)://host[:port][/path]``, without query, fragment or
    spaces; else ValueError naming what is wrong (an ``http://`` without a host once served 503s)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError: not a number, or not 0 to 65535
    except ValueError as exc:
        raise ValueError(f"bad agent URL {shown_spec(url)[:80]!r}: {exc}") from None
    if not parts.hostname:
        raise ValueError(f"the agent URL {shown_spec(url)[:80]!r} has no host (expected http://host:port)")
    if any(c.isspace() or not c.isprintable() for c in url) or parts.query or parts.fragment or port == 0:
        raise ValueError(f"bad agent URL {shown_spec(url)[:80]!r} (expected http://host:port[/path], without"
                         " spaces, a query or a fragment, and a port from 1 to 65535)")
    return url


def make_agent(spec: "str | AgentSpec | Agent", *, seed: int = 0, **kw: Any) -> Agent:
    """Build the agent a spec names (an Agent passes through unchanged).

    Raises ValueError with a one-line message for a bad spec (:func:`parse_spec`)
    or a kind of agent whose module is not installed.
    """
    if isinstance(spec, Agent):
        return spec
    p = spec if isinstance(spec, AgentSpec) else parse_spec(spec)
    if p.kind == "http":
        from .players.http_agent import HttpAgent  # httpx (the serve extra)
        return HttpAgent(p.target, seed=seed, **kw)
    if p.kind == "onnx":
        try:
            from .players.onnx_agent import OnnxAgent  # onnxruntime (the serve extra)
        except ImportError as exc:
            raise ValueError(f"cannot load ONNX agents here ({exc})") from None
        return OnnxAgent(p.target, seed=seed, **kw)
    if p.kind == "random":
        return RandomAgent(seed=seed, sam_prob=0.5 if p.option == "uniform" else 0.0, **kw)
    if p.kind == "heuristic":
        return HeuristicAgent(seed=seed, variant=p.option, **kw)
    if p.kind == "search":
        try:
            from .players.search import load_search_agent  # torch (the train extra)
        except ImportError as exc:
            raise ValueError(f"cannot load checkpoint agents here ({exc})") from None
        return load_search_agent(p.target, p.option, seed=seed, **kw)
    try:
        from .nets.factory import NetworkError, network_class  # torch (the train extra)
        from .players.policy_agent import load_policy_agent  # torch (the train extra)
    except ImportError as exc:
        raise ValueError(f"cannot load checkpoint agents here ({exc})") from None
    folder = resolve(p.target)  # a run folder: its newest good checkpoint
    try:
        network_class(str(read_metadata(folder).model.get("kind", DEFAULT_KIND)))
    except NetworkError:  # a user's network whose module is not importable here: its export stands in
        stand_in = exported_agent(folder, seed=seed, **kw)
        if stand_in is not None:
            return stand_in
    return load_policy_agent(folder, seed=seed, **kw)


def exported_agent(folder: str | Path, *, seed: int = 0, **kw: Any) -> Agent | None:
    """A checkpoint folder's exported ONNX model (``samloc export``, a run's last step) as its player,
    refused when it was not exported from the folder's weights; None when the folder holds none.
    ``samloc serve`` plays a folder so (no PyTorch), and ``make_agent`` one whose network's module is not
    importable here (a user's ``model.kind`` without its PYTHONPATH)."""
    models = sorted(Path(folder).glob("*.onnx"))
    if not models:
        return None
    agent = make_agent(AgentSpec("onnx", str(models[0])), seed=seed, **kw)
    agent.check_exported_from(Path(folder))  # type: ignore[attr-defined]
    return agent
