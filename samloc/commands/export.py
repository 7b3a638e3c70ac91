"""`samloc export` (moving here from agents.export)."""

from agents.export import main  # noqa: F401
