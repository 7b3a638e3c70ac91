"""training: self-play PPO on Ray (docs/training.md)."""

from sam_env import jitcache

jitcache.refresh(__name__, uses=("sam_env", "agents"))  # its kernels compile sam_env's in
