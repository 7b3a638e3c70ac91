"""`samloc rules` (moving here from sam_env.rules_cli)."""

from sam_env.rules_cli import main  # noqa: F401
