"""The Stable-Baselines3 and CleanRL-style examples run end to end at tiny sizes, and the SB3
benchmark prints its figures.  (Examples are a user's view: they import sam_env and agents only.)"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

pytestmark = pytest.mark.slow  # the examples trained end to end

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ("examples/sb3_maskable_ppo.py", "examples/cleanrl_ppo_masked.py")


@pytest.fixture(autouse=True)
def _sb3_logs_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """SB3 makes a log folder on every learn() (``/tmp/SB3-<time>`` unless ``SB3_LOGDIR`` says where):
    the tests' stay with their temporary files."""
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3_logs")))


def load(rel: str) -> ModuleType:
    """The file as a module (registered, as dataclasses need) without putting its folder on sys.path."""
    name = "example_" + Path(rel).stem
    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def check_scores(out: dict) -> None:
    for when in ("before", "after"):
        s = out[when]
        assert math.isfinite(s["mean_la"]) and s["ci95"][0] <= s["mean_la"] <= s["ci95"][1]


@pytest.mark.parametrize("rel", EXAMPLES)
def test_examples_import_only_the_user_facing_packages(rel):
    tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not names & {"training", "samloc"}, names


def test_sb3_maskable_ppo_example_trains_and_reports(capsys):
    out = load(EXAMPLES[0]).main(["--timesteps", "256", "--num-envs", "4", "--n-steps", "32",
                                  "--batch-size", "64", "--rules", "online", "--players", "3",
                                  "--eval-deals", "6", "--quiet"])
    assert out["timesteps"] >= 256 and out["players"] == 3 and out["opponents"] == "heuristic"
    assert out["before"]["games"] == out["after"]["games"] == 18   # every deal once per seat
    check_scores(out)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == out


def test_cleanrl_example_trains_logs_tensorboard_tags_and_reports(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    out = load(EXAMPLES[1]).main(["--total-timesteps", "512", "--num-envs", "8", "--num-steps", "32",
                                  "--hidden", "16", "--update-epochs", "1", "--players", "3",
                                  "--eval-deals", "6", "--log-dir", str(tmp_path), "--anneal-lr", "false"])
    assert out["timesteps"] == 512 and out["games"] > 0
    check_scores(out)
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == out
    acc = EventAccumulator(out["log_dir"])
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"charts/episodic_return", "charts/SPS", "losses/policy_loss", "losses/value_loss",
            "losses/entropy", "losses/approx_kl"} <= tags
    assert all(t.startswith(("charts/", "losses/")) for t in tags)
    assert acc.Scalars("charts/learning_rate")[0].value == pytest.approx(2.5e-4)   # --anneal-lr false
    mod = sys.modules["example_cleanrl_ppo_masked"]
    net = mod.MaskedAgent(16)
    net.load_state_dict(torch.load(out["model"]))  # the network it learned, saved in its run folder
    assert Path(out["model"]).parent == Path(out["log_dir"])


def test_cleanrl_example_flags_are_the_config_fields():
    mod = load(EXAMPLES[1])
    args = mod.parse_args(["--num-envs", "4", "--num-steps", "8", "--total-timesteps", "64",
                           "--target-kl", "0.02", "--norm-adv", "no"])
    assert (args.batch_size, args.minibatch_size, args.num_iterations) == (32, 8, 2)
    assert args.target_kl == 0.02 and args.norm_adv is False and args.cuda is False
    with pytest.raises(SystemExit):
        mod.parse_args(["--total-timesteps", "10"])   # less than one rollout


def test_sb3_benchmark_prints_both_envs_figures(capsys):
    assert load("scripts/bench_sb3.py").main(["--num-envs", "2", "--steps", "200", "--learn-steps", "64",
                                               "--n-steps", "16"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for what, key in (("env", "steps_per_s"), ("learn", "timesteps_per_s")):
        assert res[what]["SamLocVecEnv"][key] > 0 and res[what]["DummyVecEnv"][key] > 0
        assert res[what]["speedup"] > 0
    assert res["num_envs"] == 2 and "load_avg_1m" in res
