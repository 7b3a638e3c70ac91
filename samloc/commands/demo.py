"""`samloc demo` (moving here from sam_env.demo)."""

from sam_env.demo import main  # noqa: F401
