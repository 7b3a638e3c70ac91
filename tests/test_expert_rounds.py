"""scripts.expert_rounds: every round of an expert-iteration run, measured against the same opponents."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from agents.nets.checkpoint import save_checkpoint
from agents.nets.policy import build_net
from sam_env.actions import ACTION_TABLE_VERSION
from sam_env.obs import OBS_VERSION
from sam_env.rules import RuleSet
from scripts import expert_rounds

TABLE = [{"rules": "hoi_quan_bai", "players": 4}]


def _net(path: Path, seed: int, meta: dict | None = None) -> Path:
    torch.manual_seed(seed)
    return save_checkpoint(path, build_net(16, 1, "obs"), {
        "name": path.name, "tables": TABLE, "obs_version": OBS_VERSION,
        "action_table_version": ACTION_TABLE_VERSION, **(meta or {})})


def _run(tmp: Path) -> Path:
    """A run from ``start`` whose round 1 began at update 4, and whose newest checkpoint is update 6."""
    start = _net(tmp / "start", 1)
    run = tmp / "run"
    rounds = [{"round": 0, "updates": 0}, {"round": 1, "updates": 4}]
    for updates, seed in ((2, 2), (4, 3), (6, 4)):
        _net(run / "checkpoints" / f"ckpt_{updates:08d}", seed, {
            "updates": updates, "config": {"init_from": str(start)},
            "distill": {"round": 1 if updates >= 4 else 0, "rounds": rounds[:2 if updates >= 4 else 1]}})
    return run


def test_each_round_and_the_newest_network_meet_the_same_opponents_and_their_predecessor(tmp_path, capsys):
    run = _run(tmp_path)
    ref = _net(tmp_path / "reference", 9)
    assert expert_rounds.main([str(run), "--reference", str(ref), "--deals", "8", "--seed", "5",
                               "--json", str(tmp_path / "rounds.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("| network | vs heuristic | vs heuristic:greedy | vs random | vs previous"
                        f" | vs {ref} |")
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| round 0 (init_from)", "| round 1 (update 4)", "| update 6 (newest)"]
    rows = json.loads((tmp_path / "rounds.json").read_text())
    ckpts = run / "checkpoints"
    assert [r["network"] for r in rows] == [str(tmp_path / "start"), str(ckpts / "ckpt_00000004"),
                                            str(ckpts / "ckpt_00000006")]
    assert "previous" not in rows[0]["results"]
    assert [set(r["results"]) for r in rows[1:]] == [{*expert_rounds.FIXED, "previous", "reference"}] * 2
    for r in rows:
        res = r["results"]["heuristic"]
        assert res["deals"] == 8 and res["ci95"][0] <= res["mean_score"] <= res["ci95"][1]


def test_the_reference_is_not_played_against_itself(tmp_path):
    run = _run(tmp_path)
    nets = expert_rounds.round_networks(run)
    rows = expert_rounds.measure(nets, str(tmp_path / "start"), RuleSet.preset("hoi_quan_bai"), 4, 4, 0,
                                 0, log=print)
    assert "reference" not in rows[0]["results"] and "reference" in rows[1]["results"]
    assert rows[1]["results"]["reference"] is rows[1]["results"]["previous"]  # one evaluation, two columns


def test_what_is_not_such_a_run_is_one_line_and_exit_2(tmp_path, capsys):
    assert expert_rounds.main([str(tmp_path / "nowhere")]) == 2
    assert "no checkpoints" in capsys.readouterr().err
    plain = tmp_path / "plain"
    _net(plain / "checkpoints" / "ckpt_00000003", 1, {"updates": 3})
    assert expert_rounds.main([str(plain)]) == 2
    assert "not an expert-iteration run" in capsys.readouterr().err
    run = _run(tmp_path)
    shutil.rmtree(run / "checkpoints" / "ckpt_00000004")
    assert expert_rounds.main([str(run)]) == 2
    err = capsys.readouterr().err
    assert "round 1's checkpoint (update 4) is gone" in err and len(err.strip().splitlines()) == 1
