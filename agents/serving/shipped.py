"""Where the shipped bots are: the checkpoint folders ``samloc serve`` routes to without ``--agent``.

A wheel holds no checkpoints (they are the repository's ``checkpoints/`` folder, about 25 MB of weights), so
they are looked for at one documented place (docs/serving.md):
``$SAMLOC_CHECKPOINTS`` if it is set, else ``./checkpoints`` in the working directory, else the
checkout's own ``checkpoints/`` when the code runs from a checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "SAMLOC_CHECKPOINTS"
#: The checkout this code runs from, when it does (a source tree has its pyproject.toml beside the packages).
_CHECKOUT = Path(__file__).resolve().parents[2]


class NoCheckpoints(FileNotFoundError):
    """No folder of shipped checkpoints where they are looked for (the message says where to put them)."""


def checkpoints_dir() -> Path:
    """The folder of shipped checkpoints, as the module docstring says; NoCheckpoints if there is none."""
    named = os.environ.get(ENV_VAR)
    if named:
        if not Path(named).is_dir():
            raise NoCheckpoints(f"{ENV_VAR}={named} is not a folder of checkpoints")
        return Path(named).resolve()
    here, own = Path("checkpoints"), _CHECKOUT / "checkpoints"
    if here.is_dir():
        return here.resolve()
    if own.is_dir() and (_CHECKOUT / "pyproject.toml").is_file():
        return own
    raise NoCheckpoints(f"no shipped checkpoints here (a wheel holds none): they are the checkpoints/"
                        f" folder of the samloc repository; clone it and run from the clone, or set {ENV_VAR}"
                        " to that folder (standard/, all_tables/, expert/); or name a bot with --agent"
                        " (heuristic, a .onnx file, a checkpoint folder)")


def shipped_models(folder: Path | None = None) -> list[Path]:
    """The shipped bots: every checkpoint folder under ``folder`` (default :func:`checkpoints_dir`)
    with an exported ``*.onnx``."""
    root = checkpoints_dir() if folder is None else folder
    return sorted({p.parent for p in root.glob("*/*.onnx") if p.is_file()})
