"""Import this (or :mod:`sam_env.gym_env`) to register the Gymnasium env ``SamLoc-v0``.

Kept out of ``sam_env/__init__`` so that the rules core never imports gymnasium.
"""

from .gym_env import ENV_ID, SamLocEnv, SamLocVectorEnv, observation_space  # noqa: F401  (registers)

__all__ = ["ENV_ID", "SamLocEnv", "SamLocVectorEnv", "observation_space"]
