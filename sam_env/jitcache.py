"""Keep numba's on-disk caches in step with the sources they were compiled from.

Numba checks a cached kernel only against the file the kernel is written in,
yet a kernel compiles in the constants and the kernels it uses from other
files: edit ``core.O_HAND`` and every cached kernel of ``obs.py`` or
``vector.py`` would go on running with the old layout.  So each package with
``cache=True`` kernels calls :func:`refresh` when it is imported.  It hashes
the package's ``*.py`` files, its subpackages' included (and those of the
packages its kernels use) and, when that fingerprint differs from the one
stamped beside the caches, deletes the ``*.nbi``/``*.nbc`` files of the package
and its subpackages: numba compiles afresh and caches the new code.

Safe with many processes starting at once (Ray workers): each may delete and
stamp (the stamp is written to a temporary file, then renamed over the old
one), a cache file gone missing is skipped, and numba reads a cache whose file
was deleted under it as a miss.  It costs one hash of a few files per package
and process.  A process still running old code that compiles a kernel after
the edit can cache old code again: restart long runs after editing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path
from typing import Iterable

from .atomic import write_atomic

STAMP = "numba-sources.sha256"
_done: set[str] = set()


def package_dir(name: str) -> Path:
    """The folder of package ``name``, found without importing it (as numba names it: not resolved)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"no package named {name!r}")
    return Path(os.path.abspath(next(iter(spec.submodule_search_locations))))


def source_dirs(folder: Path) -> list[Path]:
    """``folder`` and each folder under it that holds ``*.py`` files (its subpackages)."""
    return sorted({folder} | {p.parent for p in folder.rglob("*.py") if "__pycache__" not in p.parts})


def fingerprint(folders: Iterable[Path]) -> str:
    """SHA-256 over the names and bytes of every ``*.py`` file in ``folders`` and their subfolders."""
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts):
            h.update(f"{folder.name}/{path.relative_to(folder).as_posix()}\0".encode())
            h.update(path.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def cache_dirs(folder: Path) -> list[tuple[Path, bool]]:
    """``(dir, numba's first choice)`` for each place numba may cache kernels of ``folder``."""
    in_tree = folder / "__pycache__"
    try:  # numba's own locators: NUMBA_CACHE_DIR, else in tree, else the user-wide cache
        from numba.core import config
        from numba.core.caching import _CacheLocator
        from numba.misc.appdirs import AppDirs
    except ImportError:  # a numba without them: the in-tree cache at least
        return [(in_tree, True)]
    sub = _CacheLocator.get_suitable_cache_subpath(str(folder / "x.py"))
    if config.CACHE_DIR:
        return [(Path(config.CACHE_DIR) / sub, True)]
    return [(in_tree, True), (Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / sub, False)]


def refresh(package: str, uses: Iterable[str] = ()) -> bool:
    """Delete package ``package``'s numba caches (its subpackages' too) if its sources, or those of
    the packages named in ``uses``, changed since they were cached.  Returns whether a cache file was deleted.
    Does its work once per process."""
    if package in _done or os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return False
    _done.add(package)
    try:
        folder = package_dir(package)
        fp = fingerprint([folder, *(package_dir(u) for u in uses)])
    except (OSError, ImportError):
        return False
    cleared = False
    for d, first in (c for sub in source_dirs(folder) for c in cache_dirs(sub)):
        stamp = d / STAMP
        try:
            if first:
                d.mkdir(parents=True, exist_ok=True)  # stamped before numba caches anything there
            elif not d.is_dir():
                continue
            if stamp.is_file() and stamp.read_text().strip() == fp:
                continue
            for f in [*d.glob("*.nbi"), *d.glob("*.nbc")]:
                f.unlink(missing_ok=True)
                cleared = True
            write_atomic(stamp, fp + "\n")
        except OSError:
            continue  # a folder we may not write: numba cannot cache there either
    return cleared
