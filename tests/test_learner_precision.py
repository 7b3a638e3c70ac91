"""``learner.precision: auto``: what it resolves to on a CPU (the faster of the two it measured), on CUDA and
in
a reproducible run, that a named precision is left alone, the measure's side effects (none), and the run
folder's record of the choice, which a resume keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from agents.nets.policy import build_net
from agents.nets.sparse import SparseRows
from training.config import ConfigError
from training.config_load import load_config
from training.run import precision, workers
from training.launch import read_run_config
from training.run.learner import Learner
from training.launch import new_loop
from training.run.precision import learner_rates, settle_precision, synthetic_batch


def _learner(*overrides: str) -> Learner:
    cfg = load_config("quick", list(overrides))
    return Learner(cfg.model, cfg.learner, 1e-3)


def test_auto_is_the_default_and_anything_else_is_one_line_naming_the_key() -> None:
    assert load_config("quick", []).learner.precision == "auto"
    with pytest.raises(ConfigError, match="learner.precision must be auto, fp32 or bf16, not 'fp16'"):
        load_config("quick", ["learner.precision=fp16"])


@pytest.mark.parametrize("named", ["fp32", "bf16"])
def test_a_named_precision_is_kept_without_measuring(named: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "learner_rates", lambda *a: pytest.fail("measured"))
    learner = _learner(f"learner.precision={named}")
    assert settle_precision(learner, False) == ("", {}) and learner.settings.precision == named


@pytest.mark.parametrize("rates, chosen", [({"fp32": 1000.0, "bf16": 1650.0}, "bf16"),
                                           ({"fp32": 1000.0, "bf16": 770.0}, "fp32")])
def test_auto_on_a_cpu_takes_the_faster_it_measured(rates: dict, chosen: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []
    monkeypatch.setattr(precision, "learner_rates", lambda net, sparse: asked.append(sparse) or dict(rates))
    learner = _learner()
    line, measured = settle_precision(learner, False)
    assert learner.settings.precision == chosen and measured == rates
    assert asked == [True]  # timed as its updates run: on the nonzero cells
    assert line == (f"learner.precision=auto → {chosen} (measured 1,000 rows/s in fp32,"
                    f" {rates['bf16']:,.0f} in bf16, forward+backward)")
    assert settle_precision(learner, False) == ("", {})  # settled once


def test_auto_on_cuda_and_in_a_reproducible_run_is_fp32_unmeasured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "learner_rates", lambda *a: pytest.fail("measured"))
    gpu = _learner()
    gpu.device = torch.device("cuda")  # what settle_precision reads (no GPU is needed to ask)
    assert settle_precision(gpu, False)[0].startswith("learner.precision=auto → fp32 (on cuda:")
    assert gpu.settings.precision == "fp32"
    fixed = _learner("rollout.deterministic=true")
    assert settle_precision(fixed, True)[0].startswith("learner.precision=auto → fp32"
                                                       " (rollout.deterministic:")
    assert fixed.settings.precision == "fp32"


def test_the_synthetic_batch_has_real_plays_counts_of_cells() -> None:
    obs, mask, hid = synthetic_batch(64, 260, sparse=False)
    assert obs.shape == (64, 993) and mask.shape == (64, 201) and hid.shape == (64, 260)
    assert (obs.sum(1) == 130).all() and (mask.sum(1) == 3).all() and (hid.sum(1) == 28).all()
    sobs, smask, shid = synthetic_batch(64, 260, sparse=True)
    assert isinstance(sobs, SparseRows) and torch.equal(sobs.dense(), obs)
    assert torch.equal(smask, mask) and torch.equal(shid.dense(), hid.float())


@pytest.mark.parametrize("sparse", [False, True])
def test_the_measure_leaves_the_network_as_it_was(sparse: bool) -> None:
    torch.manual_seed(0)
    net = build_net(32, 2, "full").eval()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    rng = torch.get_rng_state()
    rates = learner_rates(net, sparse, rows=64, repeats=1)
    assert set(rates) == {"fp32", "bf16"} and min(rates.values()) > 0
    assert not net.training and all(p.grad is None for p in net.parameters())
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng)  # the run's random stream is not drawn from


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_run_says_what_auto_chose_and_records_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A tiny run on an embedded Ray faked to 2 CPUs, with the measure faked to find bf16 the faster."""
    monkeypatch.setattr(workers, "embedded_cpus", lambda: 2)
    monkeypatch.setattr(precision, "learner_rates", lambda net, sparse: {"fp32": 100.0, "bf16": 150.0})
    cfg = load_config("quick", [
        "learner.device=cpu", "warm_start.decisions=0", "eval.every_minutes=0", "eval.every_updates=0",
        "eval.final_deals=0", "model.hidden=32", "model.layers=1", "rollout.envs_per_worker=32",
        "rollout.steps_per_rollout=8", "ppo.batch_decisions=200", "ppo.minibatch=128", "ppo.epochs=1",
        "total_decisions=400", "display=none", "max_minutes=0", "rollout.num_workers=1"])
    said: list[str] = []
    summary = new_loop(cfg, tmp_path / "run", log=said.append).run()
    assert "learner.precision=auto → bf16 (measured 100 rows/s in fp32, 150 in bf16, forward+backward)" \
        in said
    assert summary["decisions_trained"] >= 400
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["learner"]["precision"] == "bf16"
    assert read_run_config(tmp_path / "run").learner.precision == "bf16"  # what --resume reads
    assert read_run_config(tmp_path / "run", ["learner.precision=auto"]).learner.precision == "auto"
