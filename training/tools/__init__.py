"""Tools around runs: the pipeline, exploitability, strength, benchmarks, belief, sweeps, curves."""
