"""`samloc eval` (moving here from agents.evaluate)."""

from agents.evaluate import main  # noqa: F401
