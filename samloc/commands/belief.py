"""`samloc belief` (moving here from training.belief)."""

from training.belief import main  # noqa: F401
