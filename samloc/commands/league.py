"""`samloc league` (moving here from agents.league)."""

from agents.league import main  # noqa: F401
