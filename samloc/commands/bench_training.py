"""`samloc bench --learner|--rollout|--search` (moving here from training.bench)."""

from training.bench import main  # noqa: F401
