"""Agent benchmarks: match throughput through the evaluation harness (``samloc bench --agent``)."""

from __future__ import annotations

import time
from typing import Any

from sam_env.table import Table

from .evaluate import evaluate


def bench_agent(spec: str, table: Table, deals: int, seed: int) -> dict[str, Any]:
    """Agent-only matches (``spec`` in every seat) over ``deals`` duplicate deals, batched engine."""
    evaluate(spec, spec, table, 20, seed=seed + 1)  # compile / warm up
    t0, c0 = time.perf_counter(), time.process_time()
    r = evaluate(spec, spec, table, deals, seed=seed)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"agent": spec, "games": r["games"], "seconds": round(dt, 4),
            "games_per_s": round(r["games"] / dt), "games_per_cpu_s": round(r["games"] / cpu)}
