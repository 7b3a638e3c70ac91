"""`samloc replay` (moving here from sam_env.replay_cli)."""

from sam_env.replay_cli import main  # noqa: F401
