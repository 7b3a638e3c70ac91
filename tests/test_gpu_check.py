"""scripts/gpu_check.sh's CPU rehearsal at a small size: every step runs, the large-minibatch bench is
measured with the minibatch it names (its batch at least as large), and each learner figure says which
minibatch it used.  A few minutes on a busy 2-core machine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_gpu_checks_cpu_rehearsal_measures_each_figure_at_the_minibatch_it_names(tmp_path: Path) -> None:
    env = os.environ | {"DEVICE": "cpu", "TRAIN_MINUTES": "0.2", "BENCH_UPDATES": "1", "BENCH_BATCH": "2048",
                        "BIG_MINIBATCH": "1024"}
    r = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "out")], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    out = tmp_path / "out"
    assert len(list(out.iterdir())) <= 8
    big = json.loads((out / "bench_learner_standard_mb_big.json").read_text())
    assert big["minibatch"] == 1024 and big["decisions_per_update"] >= 1024, big
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["benches"]["learner_standard_mb_big"]["minibatch"] == 1024
    assert set(summary["benches"]) == {"learner_standard", "learner_standard_bf16", "learner_standard_mb_big",
                                       "learner_cluster"}
    assert all(b["minibatch"] and b["decisions_per_s"] for b in summary["benches"].values()), summary["benches"]
    assert "learner_standard_mb_big: minibatch 1024, batch " in r.stdout
