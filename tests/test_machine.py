"""The benchmark record (sam_env.machine): every bench JSON line says which commit ran on which CPU
under what load."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from sam_env import machine

FIELDS = {"commit", "cpu_model", "cpus", "load_1min_before", "load_1min_after"}


def test_measured_adds_the_record_around_the_measure():
    calls = []
    res = machine.measured(lambda: calls.append(1) or {"steps_per_s": 5})
    assert calls == [1] and res["steps_per_s"] == 5 and set(res["machine"]) == FIELDS
    m = res["machine"]
    assert m["cpus"] == os.cpu_count() and m["cpu_model"] and m["cpu_model"] != "unknown"
    assert all(isinstance(m[k], float) and m[k] >= 0 for k in ("load_1min_before", "load_1min_after"))


def test_commit_is_the_checkout_head_or_the_package_version(tmp_path, monkeypatch):
    head = subprocess.run(["git", "-C", str(machine.REPO), "rev-parse", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert machine.git_commit().removesuffix("-dirty") == head.stdout.strip()
    # installed from a wheel (no checkout at the package's root): the version
    monkeypatch.setattr(machine, "REPO", tmp_path)
    assert machine.git_commit() == "samloc 0.1.0"


def test_env_bench_json_carries_the_record(capsys):
    from samloc.commands.bench import main
    assert main(["--env", "--num-envs", "16", "--steps", "320", "--json"]) == 0
    m = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["machine"]
    assert set(m) == FIELDS and m["commit"] == machine.git_commit()


@pytest.mark.parametrize("form", ["--learner", "--rollout"])
def test_training_bench_json_carries_the_record(form, capsys, monkeypatch):
    from samloc.commands import bench_training
    stub = {"bench": form[2:], "decisions_per_s": 1, "learner_decisions_per_s": 1, "bytes_per_decision": 1,
            "float32_bytes_per_decision": 4, "device_name": "cpu", "device": "cpu", "model": "m",
            "precision": "fp32", "seconds_per_update": 1.0, "decisions_per_update": 1}
    monkeypatch.setattr(bench_training, "bench_learner", lambda *a: dict(stub))
    monkeypatch.setattr(bench_training, "bench_rollout", lambda *a: dict(stub))
    assert bench_training.main([form, "--config", "quick", "--device", "cpu", "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["bench"] == form[2:] and set(last["machine"]) == FIELDS
