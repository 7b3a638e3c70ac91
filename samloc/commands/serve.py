"""`samloc serve` (moving here from agents.server)."""

from agents.server import main  # noqa: F401
