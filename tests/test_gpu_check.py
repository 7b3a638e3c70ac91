"""scripts/gpu_check.sh's CPU rehearsal at a small size: every step runs, the large-minibatch bench is
measured with the minibatch it names (its batch at least as large), and each learner figure says which
minibatch it used.  A few minutes on a busy 2-core machine."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the GPU check's CPU rehearsal trains

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
    assert all(b["minibatch"] and b["decisions_per_s"]
               for b in summary["benches"].values()), summary["benches"]
    assert "learner_standard_mb_big: minibatch 1024, batch " in r.stdout


def test_the_gpu_checks_strong_step_records_rates_workers_stages_and_the_minute_it_beats_the_heuristic(
        tmp_path: Path) -> None:
    """ONLY_STRONG=1: the one-command recipe (#45) alone, at a rehearsal's size on the CPU: its summary has
    the
    rates, the workers auto chose, both stages' starts and every evaluation point."""
    small = ("warm_start.decisions=20000 rollout.envs_per_worker=64 ppo.batch_decisions=2048 "
             "ppo.minibatch=1024"
             " distill.envs_per_worker=32 distill.decisions_per_request=64 distill.candidates=2 "
             "distill.worlds=2"
             " distill.horizon=1 distill.minibatch=64 distill.belief_deals=50 belief.hidden=16 "
             "belief.epochs=1"
             " eval.deals=20 rollout.cpus_per_worker=0.5 distill.cpus_per_worker=0.5")
    env = os.environ | {"DEVICE": "cpu", "ONLY_STRONG": "1", "STRONG_MINUTES": "1.5",
                        "STRONG_EVAL_MINUTES": "0.3",
                        "STRONG_ARGS": small, "MODEL_ARGS": "model.kind=shape model.hidden=64"}
    r = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "out")], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:],
                               (tmp_path / "out" / "log.txt").read_text()[-3000:])
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["device.txt", "log.txt", "strong_summary.json"]
    doc = json.loads((out / "strong_summary.json").read_text())
    assert doc["model"]["kind"] == "shape" and doc["model"]["hidden"] == 64  # MODEL_ARGS reached the run
    assert doc["decisions_trained_per_s"] > 0 \
        and doc["decisions_generated_per_s"] >= doc["decisions_trained_per_s"]
    assert doc["workers"]["rollout"] >= 1 and doc["workers"]["eval"] >= 1 and doc["workers"]["search"] == 1
    assert [s["name"] for s in doc["stages"]] == ["ppo", "expert"], doc["stages"]
    assert doc["evaluations"] and all(len(p["ci95"]) == 2 for p in doc["evaluations"])
    first = next((p["minute"] for p in doc["evaluations"] if p["ci95"][0] > 0), None)
    assert doc["minutes_to_beat_heuristic"] == first
    assert "strong: " in r.stdout
