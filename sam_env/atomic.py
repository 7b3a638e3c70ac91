"""Atomic writes: a reader sees the old file or the new one, never half of either; and nothing but a
regular file (or a folder this program made) is ever replaced.

Every file the project writes for others to read (records, reports, plots,
checkpoints, exported models) goes through :func:`write_with`: the data goes to
a temporary file in the same folder, is flushed to disk, and is renamed over the
target (``os.replace`` is atomic on one file system).  A crash or a full disk
leaves the previous file untouched and no stray temporary behind.  Files that
belong together (an exported model and its sidecar) go through
:func:`write_together`: all written before any is renamed into place.

Before anything is written the target is checked (:func:`check_target`): an
empty path, ``.``, ``..``, a folder, a device node, a FIFO, a socket and a
symbolic link are refused with :class:`UnsafeTarget`, one line naming the path
and why.  A symbolic link is refused whatever it points to: replacing it would
cut the link, and writing through it would write somewhere the command line did
not name.  (Run as root, a rename over ``/dev/null`` would break the machine.)  What is above the
target is checked too (:func:`check_place`): a file where a folder of the path should be, a folder that
cannot be written, a name or a path longer than the file system takes are each one line, not the
``NotADirectoryError`` or ``PermissionError`` the write would end in after the work was done.
A folder (:func:`replace_dir`) replaces only a folder its caller recognises as
its own.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Sequence

__all__ = ["UnsafeTarget", "check_place", "check_target", "check_folder", "check_dir_target", "write_atomic",
           "write_json_atomic", "write_together", "write_with", "temp_dir_for", "replace_dir", "temp_owner"]

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symbolic link"), (stat.S_ISREG, "a file"))


class UnsafeTarget(OSError, ValueError):
    """A write refused before anything was touched (one line: the path and why).  Both an OSError
    (it is about the file system) and a ValueError (it is bad input: exit 2 where a command checks it
    first)."""


def _named(path: str | Path) -> Path:
    """``path`` as a Path, refused when it names no file: empty, ``.``, ``..`` or a root."""
    if str(path) == "":
        raise UnsafeTarget("refusing to write to an empty path")
    if os.path.basename(str(path).rstrip("/")) in ("", ".", ".."):
        raise UnsafeTarget(f"refusing to write {str(path)!r}: it names no file or folder of its own"
                           " (., .., /)")
    return Path(path)


def _kind(st: os.stat_result) -> str:
    return next((text for test, text in _KINDS if test(st.st_mode)), "of an unknown kind")


def _shown(p: str | Path) -> str:
    """``p`` for a one-line message: a path of thousands of bytes shortened in its middle."""
    s = str(p)
    return s if len(s) <= 120 else f"{s[:60]}…{s[-50:]} ({len(os.fsencode(s)):,} bytes)"


def _limits(near: Path) -> tuple[int, int]:
    """The longest name and the longest path the file system holding ``near`` takes."""
    try:
        return os.pathconf(near, "PC_NAME_MAX"), os.pathconf(near, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 255, 4096


def _may_write(folder: Path) -> bool:
    """Whether files may be made in ``folder`` (write and search permission, as the effective user)."""
    eff = os.access in os.supports_effective_ids
    return os.access(folder, os.W_OK | os.X_OK, effective_ids=eff)


def _nearest_folder(p: Path, doing: str) -> Path:
    """The nearest existing folder above ``p`` (what a ``mkdir(parents=True)`` would start from);
    UnsafeTarget when that is something else than a folder (a file in the path: the NotADirectoryError
    the write would end in) or when it cannot be written."""
    for above in p.parents:
        try:
            st = os.stat(above)  # a link to a folder is a folder to write into
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue  # not there (yet), or hidden by something above: that one is judged
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                continue  # the lengths are judged by the caller, with the file system's limits
            raise UnsafeTarget(f"refusing to {doing}: {_shown(above)}: {exc.strerror or exc};"
                               " nothing was written") from None
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafeTarget(f"refusing to {doing}: {_shown(above)} is {_kind(st)}, not a folder;"
                               " nothing was written")
        if not _may_write(above):
            raise UnsafeTarget(f"refusing to {doing}: the folder {_shown(above)} cannot be written"
                               " (permission denied or a read-only file system); nothing was written")
        return above
    return Path(".")  # pragma: no cover (a relative path ends in ".", an absolute one in "/")


def check_place(path: str | Path, doing: str = "") -> Path:
    """``path`` as a Path when what is above it lets it be made: every name and the whole path within
    the file system's limits, the nearest existing folder above it a folder (not a file) that may be
    written.  UnsafeTarget (one line, ``doing`` saying what was refused) otherwise.  Every check here
    calls it; a command that writes somewhere else than through them calls it on its target first."""
    p = _named(path)
    doing = doing or f"write {_shown(p)}"
    near = _nearest_folder(p, doing)
    name_max, path_max = _limits(near)
    raw = os.fsencode(str(p))
    longest = max(raw.split(b"/"), key=len)
    if len(longest) > name_max:
        raise UnsafeTarget(f"refusing to {doing}: a name in the path is {len(longest):,} bytes, over the"
                           f" file system's {name_max}; nothing was written")
    if len(os.fsencode(os.path.abspath(p))) >= path_max:
        raise UnsafeTarget(f"refusing to {doing}: the path is {len(os.fsencode(os.path.abspath(p))):,}"
                           f" bytes in full, over the system's {path_max - 1:,}; nothing was written")
    return p


def _check_kind(path: str | Path, wanted: Callable[[int], bool], refusal: str, doing: str) -> Path:
    """``path`` as a Path when it may be made (:func:`check_place`) and nothing is there (a link is
    something) or ``wanted(mode)``; else UnsafeTarget with ``refusal`` filled in (``{p}``: the path,
    ``{kind}``: what is there)."""
    p = check_place(path, doing.format(p=_shown(path)))
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    if not wanted(st.st_mode):
        raise UnsafeTarget(refusal.format(p=_shown(p), kind=_kind(st)))
    return p


def check_target(path: str | Path) -> Path:
    """``path`` as a Path, when a file may be written there: it does not exist yet, or is a regular
    file (not a link to one).  UnsafeTarget otherwise."""
    return _check_kind(path, stat.S_ISREG, "refusing to write {p}: it is {kind}, not a regular file;"
                                           " nothing was written", "write {p}")


def check_folder(path: str | Path) -> Path:
    """``path`` as a Path, when files may be written into it (a run or report folder): it does not
    exist yet, or is a folder (not a link to one; what it holds besides the files written stays).
    UnsafeTarget otherwise."""
    p = _check_kind(path, stat.S_ISDIR, "refusing to write into {p}: it is {kind}, not a folder;"
                                        " nothing was written", "write into {p}")
    if p.exists() and not _may_write(p):
        raise UnsafeTarget(f"refusing to write into {_shown(p)}: the folder cannot be written (permission"
                           " denied or a read-only file system); nothing was written")
    return p


def check_dir_target(path: str | Path, replaceable: Callable[[Path], bool] | None = None,
                     what: str = "") -> Path:
    """``path`` as a Path, when a folder may be put there: it does not exist, is an empty folder, or
    ``replaceable(path)`` recognises the folder as one the caller made (``what`` says which, for the
    message).  UnsafeTarget otherwise (a link, a file, a device, a folder holding anything else)."""
    p = _check_kind(path, stat.S_ISDIR, "refusing to write the folder {p}: it is {kind}; nothing was written",
                    "write the folder {p}")
    if p.exists() and any(p.iterdir()) and not (replaceable is not None and replaceable(p)):
        holds = f"files that are not {what}" if what else "files"
        raise UnsafeTarget(f"refusing to use the folder {p}: it holds {holds} (choose a new or empty folder);"
                           " nothing was touched")
    return p


def write_with(path: str | Path, write: Callable[[IO[bytes]], Any], mode: int = 0o644) -> Any:
    """Call ``write(f)`` on a temporary binary file next to ``path``, then rename it into place.

    Returns what ``write`` returned.  ``mode`` is the finished file's permission
    (a temporary file is private; a finished one is for everyone by default).
    UnsafeTarget, before anything is written, for a target that is not a file (:func:`check_target`)."""
    path = check_target(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            out = write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        check_target(path)  # again: what was there may have changed while the data was made
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def write_together(files: Sequence[tuple[str | Path, bytes]], mode: int = 0o644) -> None:
    """Write several files as one: every one is written to its temporary file and flushed to disk
    before the first is renamed into place, then they are renamed in the order given.  A full disk
    or any error while writing leaves every target as it was (none of the new files in place); only a
    crash between two renames could leave the first ones new, so a file that vouches for another (an
    exported model's sidecar, holding the model's hash) goes first.  UnsafeTarget before anything is
    written for a target that is not a file (:func:`check_target`)."""
    paths = [check_target(p) for p, _ in files]
    temps: list[str] = []
    try:
        for path, (_, data) in zip(paths, files):
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps.append(tmp)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
        for path in paths:
            check_target(path)  # again: what was there may have changed while the data was made
        for path, tmp in zip(paths, temps):
            os.replace(tmp, path)
    finally:
        for tmp in temps:
            Path(tmp).unlink(missing_ok=True)  # those not renamed (an error before or between renames)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` atomically."""
    blob = data.encode("utf-8") if isinstance(data, str) else data
    write_with(path, lambda f: f.write(blob))


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """``obj`` as indented JSON (UTF-8, non-ASCII kept), atomically."""
    write_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


#: the names :func:`write_with`, :func:`temp_dir_for` and :func:`replace_dir` give what they make beside
#: a target ``NAME``: ``.NAME.`` + mkstemp's/mkdtemp's eight characters + ``.tmp`` or ``.old``
_TEMP_NAME = re.compile(r"\.(?P<dest>.+)\.[a-z0-9_]{8}\.(?:tmp|old)")


def temp_owner(name: str) -> str | None:
    """The target a temporary file or folder of this module's was made for (``.ckpt_00000004.k2j_x9ab.tmp``
    → ``ckpt_00000004``), None for any other name: what a cleanup may delete, by exact names, and
    nothing a user named ``notes.old`` or ``keep.tmp.d``."""
    m = _TEMP_NAME.fullmatch(name)
    return m.group("dest") if m else None


def temp_dir_for(dest: str | Path) -> Path:
    """A new private folder next to ``dest`` (``.NAME.*.tmp``), to fill and then :func:`replace_dir`."""
    dest = _named(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))


def replace_dir(tmp: str | Path, dest: str | Path, replaceable: Callable[[Path], bool] | None = None,
                what: str = "") -> Path:
    """Move the finished folder ``tmp`` to ``dest``, replacing an older one there only when it is empty
    or ``replaceable`` recognises it (:func:`check_dir_target`; UnsafeTarget otherwise, and ``tmp``
    is removed).

    Two renames: the old folder steps aside, the new one takes its name; only
    then is the old one deleted, so a crash between them leaves a complete
    folder under one of the two names."""
    tmp = Path(tmp)
    try:
        dest = check_dir_target(dest, replaceable, what)
    except UnsafeTarget:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if dest.exists() and any(dest.iterdir()):
        old = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".old"))
        os.replace(dest, old)  # onto the empty folder just made
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)  # a rename onto an empty folder replaces it
    return dest
