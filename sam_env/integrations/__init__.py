"""Adapters for third-party RL libraries, each imported only on demand (it imports its library)."""
