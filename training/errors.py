"""The one error a training run stops with."""


class TrainError(RuntimeError):
    """Training cannot go on (one-line reason)."""
