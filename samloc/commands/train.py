"""`samloc train` (moving here from training.cli)."""

from training.cli import main  # noqa: F401
