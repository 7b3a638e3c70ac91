"""`samloc seeds`: the compute-to-strength table of docs/results.md, from run folders."""

from __future__ import annotations

import json
from pathlib import Path

from samloc.commands import seeds as seed_curve


def _run(tmp: Path, name: str, points: list[tuple[int, float, float, float]],
         final: tuple[float, float]) -> Path:
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


def test_the_table_gives_the_mean_and_the_extreme_seeds_at_each_update(tmp_path, capsys):
    a = _run(tmp_path, "s0", [(30, 60.0, -1.0, 12.0), (60, 120.0, -0.5, 14.0)], (-0.1, 14.5))
    b = _run(tmp_path, "s1", [(30, 180.0, -2.0, 10.0)], (0.3, 13.5))  # stopped before update 60
    assert seed_curve.main([str(a), str(b), "--by", "update", "--png", str(tmp_path / "c.png")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == "| 30 | 2.0 | 0.30 M | 2 | -1.50 (-2.00 … -1.00) | +11.00 (+10.00 … +12.00) |"
    # s0 alone
    assert lines[3] == "| 60 | 2.0 | 0.60 M | 1 | -0.50 (-0.50 … -0.50) | +14.00 (+14.00 … +14.00) |"
    assert lines[4] == ("| final (1000 deals) | 8.0 | 1.00 M | 2 | +0.10 (-0.10 … +0.30) | "
                        "+14.00 (+13.50 … +14.50) |")
    assert len(lines) == 6 and (tmp_path / "c.png").stat().st_size > 0


# Two timed runs (eval.every_minutes=1) at different speeds: their evaluations fall a second or so apart at
# each minute, at updates 0/46/82/120 and 0/34/68/102.
FAST = [(0, 0.0, -10.0, 0.0), (46, 60.0, -4.0, 5.0), (82, 120.0, -2.0, 8.0), (120, 180.0, -1.0, 10.0)]
SLOW = [(0, 0.0, -12.0, 1.0), (34, 61.0, -6.0, 4.0), (68, 119.0, -3.0, 7.0), (102, 181.0, -2.0, 9.0)]


def _rows(tmp_path, capsys, by: str) -> list[str]:
    runs = [_run(tmp_path, "fast", FAST, (-0.5, 12.0)), _run(tmp_path, "slow", SLOW, (-1.5, 11.0))]
    assert seed_curve.main([*map(str, runs), "--by", by, "--opponents", "heuristic",
                            "--png", str(tmp_path / f"{by}.png")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"curves: {tmp_path / f'{by}.png'}" and (tmp_path / f"{by}.png").stat().st_size > 0
    assert lines[-2] == "| final (1000 deals) | 8.0 | 1.00 M | 2 | -1.00 (-1.50 … -0.50) |"
    return lines[2:-2]


def test_timed_runs_line_up_by_minutes_keeping_every_evaluation(tmp_path, capsys):
    assert _rows(tmp_path, capsys, "minutes") == [
        "| 0 | 0.0 | 0.00 M | 2 | -11.00 (-12.00 … -10.00) |",
        "| 40 | 1.0 | 0.40 M | 2 | -5.00 (-6.00 … -4.00) |",    # 46 and 34 updates, at 60 and 61 s
        "| 75 | 2.0 | 0.75 M | 2 | -2.50 (-3.00 … -2.00) |",
        "| 111 | 3.0 | 1.11 M | 2 | -1.50 (-2.00 … -1.00) |"]


def test_by_update_every_evaluation_is_a_row_the_other_run_interpolated_where_it_reaches(tmp_path, capsys):
    rows = _rows(tmp_path, capsys, "update")
    assert [r.split(" | ")[0] for r in rows] == ["| 0", "| 34", "| 46", "| 68", "| 82", "| 102", "| 120"]
    # fast at update 34: between its 0 (0 s, -10) and 46 (60 s, -4): 44.3 s, -5.57
    assert rows[1] == "| 34 | 0.9 | 0.34 M | 2 (1 interpolated) | -5.78 (-6.00 … -5.57) |"
    # slow at update 46: between its 34 (61 s, -6) and 68 (119 s, -3): 81.5 s, -4.94
    assert rows[2] == "| 46 | 1.2 | 0.46 M | 2 (1 interpolated) | -4.47 (-4.94 … -4.00) |"
    assert rows[6] == "| 120 | 3.0 | 1.20 M | 1 | -1.00 (-1.00 … -1.00) |"  # past slow's last evaluation


def test_by_decisions_evaluations_within_half_a_spacing_share_a_row(tmp_path, capsys):
    rows = _rows(tmp_path, capsys, "decisions")
    # spacings: fast 380k (median), slow 340k: rows gather evaluations within 170k of each other
    assert [r.split(" | ")[2] for r in rows] == ["0.00 M", "0.40 M", "0.75 M", "1.02 M", "1.20 M"]
    assert rows[1] == "| 40 | 1.0 | 0.40 M | 2 | -5.00 (-6.00 … -4.00) |"
    assert rows[3].startswith("| 102 | ") and "| 2 (1 interpolated) |" in rows[3]
    assert rows[4] == "| 120 | 3.0 | 1.20 M | 1 | -1.00 (-1.00 … -1.00) |"
    assert seed_curve.main([str(tmp_path / "fast"), "--by", "seconds"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_folder_that_is_not_a_run_or_lacks_an_opponent_is_one_line_and_exit_2(tmp_path, capsys):
    assert seed_curve.main([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == (f"samloc seeds: {tmp_path / 'nowhere'}: not a run folder "
                                       "(no config.yaml, no eval.jsonl)\n")
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
    assert err.startswith(f"samloc seeds: {short}: a run with no evaluation yet: "
                          "it stopped before its first"), err
    assert err.count("\n") == 1
