"""`samloc seeds`: the compute-to-strength table of docs/training.md, from run folders."""

from __future__ import annotations

import json
from pathlib import Path

from samloc.commands import seeds as seed_curve


def _run(tmp: Path, name: str, points: list[tuple[int, float, float, float]], final: tuple[float, float]) -> Path:
    """A run folder with periodic evaluations (updates, wall s, vs heuristic, vs random) and a final one."""
    d = tmp / name
    d.mkdir()
    res = lambda h, r: {"heuristic": {"mean_score": h, "ci95": [h - 0.3, h + 0.3]},  # noqa: E731
                        "random": {"mean_score": r, "ci95": [r - 0.5, r + 0.5]}}
    (d / "eval.jsonl").write_text("".join(
        json.dumps({"updates": u, "decisions_trained": u * 10_000, "wall_s": w, "results": res(h, r)}) + "\n"
        for u, w, h, r in points))
    (d / "eval_report.json").write_text(json.dumps(
        {"deals": 1000, "decisions_trained": 1_000_000, "results": res(*final)}))
    (d / "summary.json").write_text(json.dumps({"wall_s": 480.0}))
    return d


def test_the_table_gives_the_mean_and_the_extreme_seeds_at_the_updates_every_run_reached(tmp_path, capsys):
    a = _run(tmp_path, "s0", [(30, 60.0, -1.0, 12.0), (60, 120.0, -0.5, 14.0)], (-0.1, 14.5))
    b = _run(tmp_path, "s1", [(30, 180.0, -2.0, 10.0)], (0.3, 13.5))  # stopped before update 60
    assert seed_curve.main([str(a), str(b), "--png", str(tmp_path / "c.png")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| 30 | 2.0 | 0.30 M | -1.50 (-2.00 … -1.00) | +11.00 (+10.00 … +12.00) |"
    assert lines[3] == "| final (1000 deals) | 8.0 | 1.00 M | +0.10 (-0.10 … +0.30) | +14.00 (+13.50 … +14.50) |"
    assert len(lines) == 5 and (tmp_path / "c.png").stat().st_size > 0


def test_a_folder_that_is_not_a_run_or_lacks_an_opponent_is_one_line_and_exit_2(tmp_path, capsys):
    assert seed_curve.main([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == f"samloc seeds: {tmp_path / 'nowhere'}: not a run folder (no config.yaml, no eval.jsonl)\n"
    run = _run(tmp_path, "s0", [(30, 60.0, -1.0, 12.0)], (0.0, 14.0))
    assert seed_curve.main([str(run), "--opponents", "snapshot"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'snapshot'" in err


def test_a_seed_run_too_short_for_an_evaluation_is_said_as_such(tmp_path, capsys):
    short = tmp_path / "s2"
    short.mkdir()
    (short / "config.yaml").write_text("name: quick\n")  # a run that stopped before its first evaluation
    assert seed_curve.main([str(short)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"samloc seeds: {short}: a run with no evaluation yet: it stopped before its first"), err
    assert err.count("\n") == 1
