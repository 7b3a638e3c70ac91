"""Every Python file keeps the line length pyproject.toml gives ruff ([tool.ruff] line-length), checked by
ruff itself (ruff is not run by CI otherwise)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
LINE_LENGTH: int = PYPROJECT["tool"]["ruff"]["line-length"]


def _ruff_line_length(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``ruff check --select E501`` with the project's settings (ruff's default excludes: .venv, build, …)."""
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "E501", "--no-cache",
                           "--config", str(ROOT / "pyproject.toml"), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_line_keeps_ruffs_line_length() -> None:
    run = _ruff_line_length("--output-format", "concise", ".", cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_check_finds_a_long_line(tmp_path: Path) -> None:
    """The check above can fail: ruff, with the project's settings, flags a line one character too long."""
    line = "x = '" + "a" * (LINE_LENGTH - 5) + "'"  # one character over pyproject.toml's line-length
    (tmp_path / "long.py").write_text(line + "\n", encoding="utf-8")
    run = _ruff_line_length("long.py", cwd=tmp_path)
    assert run.returncode == 1 and "E501" in run.stdout, run.stdout + run.stderr
