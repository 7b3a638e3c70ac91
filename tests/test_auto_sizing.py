"""``rollout.num_workers: auto`` and ``eval.num_workers: auto``: the choice for a faked core count and learner
device, its validation, the shipped configs that use it, the line a run and a dry run print, and the figure
the run folder records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from samloc.commands.train import main
from training import launch
from training.algorithms import resolve
from training.run import workers
from training.config import CONFIG_DIR, ConfigError
from training.config_load import load_config
from training.errors import TrainError
from training.launch import new_loop, read_run_config
from training.run.runstate import RunState
from training.run.sizing import apply_sizing, eval_workers, size_eval, size_workers

#: A config with the periodic evaluation on (quick's every_minutes) and no search workers.
QUICK = ["rollout.num_workers=auto"]
SEARCH = [*QUICK, "distill.enabled=true", "distill.num_workers=4"]


@pytest.mark.parametrize("cpus, device, overrides, workers, why", [
    (2, "cpu", QUICK, 1, "2 CPUs - 1 learner (cpu) - 1 evaluation; at least 1"),
    (2, "cuda", QUICK, 1, "2 CPUs - 1 learner (cuda) - 1 evaluation; at least 1"),
    (16, "cpu", QUICK, 14, "16 CPUs - 1 learner (cpu) - 1 evaluation"),
    (16, "cuda", QUICK, 14, "16 CPUs - 1 learner (cuda) - 1 evaluation"),
    (64, "cuda", QUICK, 61, "64 CPUs - 1 learner (cuda) - 2 evaluation"),  # quick's 2 opponents
    (64, "cuda", [*QUICK, "eval.num_workers=1"], 62, "64 CPUs - 1 learner (cuda) - 1 evaluation"),
    (64, "cpu", [*QUICK, "eval.every_minutes=0", "eval.every_updates=0"], 63, "64 CPUs - 1 learner (cpu)"),
    (16, "cpu", SEARCH, 10, "16 CPUs - 1 learner (cpu) - 1 evaluation - 4 search workers"),
    (64, "cuda", [*SEARCH, "distill.num_workers=48"], 13,
     "64 CPUs - 1 learner (cuda) - 2 evaluation - 48 search workers"),
    (2, "cpu", [*SEARCH, "distill.num_workers=1"], 1,
     "2 CPUs - 1 learner (cpu) - 1 evaluation - 1 search worker; at least 1"),
    (16, "cpu", [*QUICK, "rollout.cpus_per_worker=0.5"], 28,
     "16 CPUs - 1 learner (cpu) - 1 evaluation, 0.5 CPU each"),
    (7.5, "cpu", [*QUICK, "rollout.cpus_per_worker=2"], 2,
     "7.5 CPUs - 1 learner (cpu) - 1 evaluation, 2 CPU each"),
])
def test_the_choice_for_a_core_count_a_device_and_search_workers(cpus: float, device: str,
                                                                 overrides: list[str],
                                                                  workers: int, why: str) -> None:
    cfg = load_config("quick", overrides)
    sizing = size_workers(cfg, cpus, device, resolve(cfg.algorithm))
    assert sizing.rollout_workers == workers
    assert sizing.line == f"rollout.num_workers=auto → {workers} ({why})"


def test_only_auto_is_resolved_and_the_config_then_holds_the_number() -> None:
    fixed = load_config("quick", ["rollout.num_workers=3", "eval.num_workers=2"])
    assert apply_sizing(fixed, 64, "cpu", resolve(fixed.algorithm)) == "" and (fixed.rollout.num_workers,
                                                     fixed.eval.num_workers) == (3, 2)
    cfg = load_config("quick", QUICK)
    assert apply_sizing(cfg, 16, "cpu", resolve(cfg.algorithm)) == (
        "eval.num_workers=auto → 1 (one per 16 of 16 CPUs, at least 1, at most one per opponent: 2)\n"
        "rollout.num_workers=auto → 14 (16 CPUs - 1 learner (cpu) - 1 evaluation)")
    assert cfg.rollout.num_workers == 14 and cfg.eval.num_workers == 1
    assert (apply_sizing(cfg, 64, "cpu", resolve(cfg.algorithm)) == ""
            and cfg.rollout.num_workers == 14)  # resolved once
    assert cfg.eval.num_workers == 1


def test_a_queue_smaller_than_the_figure_is_refused_in_one_line() -> None:
    cfg = load_config("quick", [*QUICK, "learner.queue_rollouts=4"])
    assert (apply_sizing(cfg, 4, "cpu", resolve(cfg.algorithm))
            and cfg.rollout.num_workers == 2)  # 4 rollouts hold 2 workers
    cfg = load_config("quick", [*QUICK, "learner.queue_rollouts=4"])
    with pytest.raises(TrainError,
                       match=r"^rollout.num_workers=auto → 14 \(.*: learner.queue_rollouts=4 must be"
                                         r" 0 \(num_workers \+ 1\) or at least 14$"):
        apply_sizing(cfg, 16, "cpu", resolve(cfg.algorithm))


@pytest.mark.parametrize("value, message", [
    ("autox", "rollout.num_workers must be auto or a whole number from 1 to 10,000, not 'autox'"),
    ("0", "rollout.num_workers must be auto or a whole number from 1 to 10,000, not 0"),
    ("10001", "rollout.num_workers must be auto or a whole number from 1 to 10,000, not 10001"),
    ("2.5", "rollout.num_workers: Value '2.5' of type 'float' is incompatible"),
    ("true", "rollout.num_workers: Value 'True' of type 'bool' is incompatible"),
])
def test_anything_but_auto_or_a_number_in_range_is_one_line_naming_the_key(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("quick", [f"rollout.num_workers={value}"])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert load_config("quick", ["rollout.num_workers=auto"]).rollout.num_workers == "auto"
    assert load_config("quick", ["rollout.num_workers=7"]).rollout.num_workers == 7


def test_every_shipped_config_but_cluster_sizes_its_workers() -> None:
    raw = {p.stem: yaml.safe_load(p.read_text()) for p in CONFIG_DIR.glob("*.yaml")}
    shipped = {name: (c["rollout"]["num_workers"], c["eval"]["num_workers"]) for name, c in raw.items()}
    assert shipped.pop("cluster") == (62, 1)
    assert shipped and set(shipped.values()) == {("auto", "auto")}, shipped
    for name in shipped:  # each loads as auto, and on two cores it is one worker (measured best there)
        cfg = load_config(name)
        assert (cfg.rollout.num_workers == "auto"
                and size_workers(cfg, 2, "cpu", resolve(cfg.algorithm)).rollout_workers == 1)
        assert cfg.eval.num_workers == "auto" and eval_workers(cfg.eval, 2) == 1


@pytest.mark.parametrize("cpus, opponents, workers", [
    (2, ["heuristic", "random"], 1), (16, ["heuristic", "random"], 1), (31.9, ["heuristic", "random"], 1),
    (32, ["heuristic", "random"], 2), (64, ["heuristic", "random"], 2), (64, ["heuristic"], 1),
    (64, ["random", "heuristic", "snapshot"], 3), (1000, ["random", "heuristic", "snapshot"], 3),
])
def test_the_evaluations_processes_for_a_core_count(cpus: float, opponents: list[str], workers: int) -> None:
    cfg = load_config("quick", [f"eval.opponents=[{', '.join(opponents)}]"])
    assert size_eval(cfg.eval, cpus) == (workers,
                                    f"eval.num_workers=auto → {workers} (one per 16 of {cpus:g} CPUs, at"
                                             f" least 1, at most one per opponent: {len(opponents)})")
    assert eval_workers(cfg.eval, cpus) == workers
    assert eval_workers(load_config("quick", ["eval.num_workers=5"]).eval, cpus) == 5  # a number is kept


@pytest.mark.parametrize("value", ["autox", "0", "10001"])
def test_eval_workers_take_auto_or_a_number_in_range(value: str) -> None:
    with pytest.raises(ConfigError,
                       match=r"^eval.num_workers must be auto or a whole number from 1 to 10,000,"
                                          rf" not '?{value}'?$"):
        load_config("quick", [f"eval.num_workers={value}"])


@pytest.mark.slow
def test_the_opponents_side_by_side_give_the_figures_of_one_process() -> None:
    from sam_env.table import Table
    from training.run.evaluation import evaluate_weights
    from training.run.learner import Learner

    cfg = load_config("quick", ["model.hidden=32", "model.layers=1"])
    net = Learner(cfg.model, cfg.learner, 1e-3)
    args = (net.weights(), net.net.hparams(), ["heuristic", "random", "snapshot"], None,
            Table.parse("hoi_quan_bai/4"), 6, 11)
    one, two = evaluate_weights(*args), evaluate_weights(*args, workers=2)
    assert list(one) == list(two) == ["heuristic", "random"]  # no snapshot yet: none played
    assert _same(one) == _same(two) and one["heuristic"]["deals"] == 6


def _same(res: dict[str, Any]) -> str:
    """A result without its timings (the only figures that differ between processes), as text."""
    return json.dumps({k: {f: v for f, v in r.items() if f not in ("seconds", "games_per_s")}
                       for k, r in res.items()}, sort_keys=True)


def test_print_config_shows_auto(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", "quick", "--print-config"]) == 0
    assert "  num_workers: auto " in capsys.readouterr().out


@pytest.mark.parametrize("cpus, device, line", [
    (2, "cpu", "rollout.num_workers=auto → 1 (2 CPUs - 1 learner (cpu) - 1 evaluation; at least 1)"),
    (16, "cuda", "rollout.num_workers=auto → 14 (16 CPUs - 1 learner (cuda) - 1 evaluation)"),
    (64, "cuda", "rollout.num_workers=auto → 61 (64 CPUs - 1 learner (cuda) - 2 evaluation)"),
])
def test_the_dry_run_says_what_auto_chose(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path, cpus: int, device: str, line: str) -> None:
    monkeypatch.setattr(launch, "embedded_cpus", lambda: cpus)
    monkeypatch.setattr(launch, "available_memory", lambda: cpus * 2**30)  # a machine of 1 GiB a CPU
    monkeypatch.setattr(launch, "resolve_device", lambda spec: torch.device(device))
    assert main(["--config", "quick", "--run-dir", str(tmp_path / "run"), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    workers = line.split("→ ")[1].split(" ")[0]
    precision = "fp32" if device == "cuda" else "auto: the faster of fp32 and bf16, measured at its start"
    assert f"  workers:     {workers} x 1 CPU on the embedded Ray ({cpus} CPUs); learner on {device}" \
           f" ({precision})" in out
    assert f"  sizing:      {line}" in out
    evals = 2 if cpus == 64 else 1
    assert f"  sizing:      eval.num_workers=auto → {evals} (one per 16 of {cpus} CPUs, at least 1," \
           " at most one per opponent: 2)" in out


def test_a_dry_run_on_a_cluster_leaves_auto_to_the_cluster(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path) -> None:
    assert main(["--config", "quick", "--run-dir", str(tmp_path / "run"), "--dry-run",
                 "--ray-address", "10.0.0.1:6379"]) == 0
    out = capsys.readouterr().out
    assert "workers:     auto (sized to the cluster's CPUs when it is joined) x 1 CPU on the Ray cluster" \
        in out
    assert "sizing:" not in out


def test_the_run_folder_records_the_figure_and_a_resume_keeps_it(tmp_path: Path) -> None:
    cfg = load_config("quick", QUICK)
    state = RunState(cfg, tmp_path, "samloc train --config quick", log=lambda m: None)
    state.write_run_files(resume=False)
    assert read_run_config(tmp_path).rollout.num_workers == "auto"  # before the run has Ray
    apply_sizing(cfg, 16, "cpu", resolve(cfg.algorithm))
    state.write_config()
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["rollout"]["num_workers"] == 14 and saved["eval"]["num_workers"] == 1
    assert read_run_config(tmp_path).rollout.num_workers == 14  # what --resume reads
    assert read_run_config(tmp_path, ["rollout.num_workers=auto"]).rollout.num_workers == "auto"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_run_prints_the_choice_and_records_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A tiny run on an embedded Ray faked to 3 CPUs, without a periodic evaluation: 2 workers."""
    monkeypatch.setattr(workers, "embedded_cpus", lambda: 3)
    cfg = load_config("quick", [*QUICK, "learner.device=cpu", "warm_start.decisions=0",
                                "eval.every_minutes=0",
                                "eval.every_updates=0", "eval.final_deals=0", "model.hidden=32",
                                "model.layers=1",
                                "rollout.envs_per_worker=32", "rollout.steps_per_rollout=8",
                                "ppo.batch_decisions=200",
                                "ppo.minibatch=128", "ppo.epochs=1", "total_decisions=400", "display=none",
                                "max_minutes=0"])
    said: list[str] = []
    summary = new_loop(cfg, tmp_path / "run", log=said.append).run()
    assert "rollout.num_workers=auto → 2 (3 CPUs - 1 learner (cpu))" in said
    assert said.index("eval.num_workers=auto → 1 (one per 16 of 3 CPUs, at least 1, at most one per "
                      "opponent: 2)") \
        == said.index("rollout.num_workers=auto → 2 (3 CPUs - 1 learner (cpu))") - 1  # printed together
    assert summary["decisions_trained"] >= 400
    assert read_run_config(tmp_path / "run").rollout.num_workers == 2
    assert read_run_config(tmp_path / "run").eval.num_workers == 1
