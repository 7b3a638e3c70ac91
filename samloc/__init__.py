"""The ``samloc`` command: one entry point above the three layers (training → agents → sam_env).

It lives in its own package so that no layer has to know about the ones
above it: ``samloc replay`` dispatches to the engine, ``samloc serve`` to the
agents, ``samloc train`` to training, each imported only when asked for.
"""
