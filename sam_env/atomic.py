"""Atomic writes: a reader sees the old file or the new one, never half of either.

Every file the project writes for others to read (records, reports,
checkpoints, exported models) goes through here: the data goes to a
temporary file in the same folder, is flushed to disk, and is renamed over
the target (``os.replace`` is atomic on one file system).  A crash or a full
disk leaves the previous file untouched and no stray temporary behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Callable

__all__ = ["write_atomic", "write_json_atomic", "write_with", "replace_dir"]


def write_with(path: str | Path, write: Callable[[IO[bytes]], Any], mode: int = 0o644) -> Any:
    """Call ``write(f)`` on a temporary binary file next to ``path``, then rename it into place.

    Returns what ``write`` returned.  ``mode`` is the finished file's permission
    (a temporary file is private; a finished one is for everyone by default)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            out = write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically."""
    blob = data.encode("utf-8") if isinstance(data, str) else data
    write_with(path, lambda f: f.write(blob))


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """``obj`` as indented JSON (UTF-8, non-ASCII kept), atomically."""
    write_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def replace_dir(tmp: str | Path, dest: str | Path) -> Path:
    """Move the finished folder ``tmp`` to ``dest``, replacing an older one there.

    Two renames: the old folder steps aside, the new one takes its name; only
    then is the old one deleted, so a crash between them leaves a complete
    folder under one of the two names."""
    tmp, dest = Path(tmp), Path(dest)
    if dest.exists():
        old = dest.with_name(dest.name + f".old{os.getpid()}")
        os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)
    return dest
