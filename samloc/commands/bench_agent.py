"""`samloc bench --agent` (moving here from agents.bench)."""

from agents.bench import main  # noqa: F401
