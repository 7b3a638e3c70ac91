"""`samloc seeds`: the compute-to-strength table of docs/results.md, from run folders."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pytest

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


def test_without_opponents_the_columns_are_those_every_evaluation_has(tmp_path, capsys):
    """Runs evaluated against the heuristic and a snapshot, never random (issue #60): the default columns
    are what the runs have, in their order, and no --opponents is needed."""
    runs = []
    for k, name in enumerate(("s0", "s1")):
        d = tmp_path / name
        d.mkdir()
        res = {"heuristic": {"mean_score": -1.0 + k}, "snapshot": {"mean_score": 0.5 * k},
               "oddball": {"mean_score": 3.0}} if k == 0 else {"snapshot": {"mean_score": 0.5},
                                                                 "heuristic": {"mean_score": 0.0}}
        (d / "eval.jsonl").write_text(json.dumps({"updates": 10, "decisions_trained": 1000, "wall_s": 60.0,
                                                  "results": res}) + "\n")
        runs.append(str(d))
    assert seed_curve.main([*runs, "--by", "update"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("| updates | wall min | decisions trained | seeds | vs heuristic: mean (lowest …"
                        " highest seed) | vs snapshot: mean (lowest … highest seed) |")
    assert lines[2] == "| 10 | 1.0 | 0.00 M | 2 | -0.50 (-1.00 … +0.00) | +0.25 (+0.00 … +0.50) |"
    (tmp_path / "s1" / "eval.jsonl").write_text(json.dumps(
        {"updates": 10, "decisions_trained": 1000, "wall_s": 60.0,
         "results": {"random": {"mean_score": 9.0}}}))
    assert seed_curve.main(runs) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no opponent is in every evaluation" in err


def test_the_png_draws_the_mean_over_seeds_in_a_band_with_each_seed_faint(tmp_path):
    """openrlbenchmark's way: per opponent a mean line over the table's rows, a band from the lowest to the
    highest seed, each seed's own curve faint behind them."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    from training.tools.seed_curve import SEED_ALPHA, align, figure, load_run
    runs = [load_run(_run(tmp_path, "fast", FAST, (-0.5, 12.0))),
            load_run(_run(tmp_path, "slow", SLOW, (-1.5, 11.0)))]
    fig = figure(runs, ["fast", "slow"], ["heuristic", "random"], "update")
    rows = align(runs, ["heuristic", "random"], "update")
    for k, ax in enumerate(fig.axes):
        lines = {ln.get_label(): ln for ln in ax.get_lines()}
        mean = lines["mean of 2 seeds"]
        assert list(mean.get_xdata()) == [0, 34, 46, 68, 82, 102, 120]
        means = [np.mean([f[3 + k] for f in figs]) for figs, _ in rows]
        assert list(mean.get_ydata()) == pytest.approx(means)
        assert lines["fast"].get_alpha() == lines["slow"].get_alpha() == SEED_ALPHA
        assert mean.get_alpha() is None
        (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert band.get_label() == "lowest … highest seed"
        ys = band.get_paths()[0].vertices[:, 1]
        lows = [min(f[3 + k] for f in figs) for figs, _ in rows]
        highs = [max(f[3 + k] for f in figs) for figs, _ in rows]
        assert min(ys) == pytest.approx(min(lows)) and max(ys) == pytest.approx(max(highs))
    plt.close(fig)


GOOD = {"updates": 30, "decisions_trained": 300_000, "wall_s": 60.0,
        "results": {"heuristic": {"mean_score": -1.0, "ci95": [-1.3, -0.7]}, "random": {"mean_score": 12.0}}}


@pytest.mark.parametrize("name, text, words", [
    ("eval.jsonl", "[1,2]\n", "line 1: not an evaluation"),
    ("eval.jsonl", json.dumps(GOOD) + "\n"
     + json.dumps(GOOD | {"results": {"heuristic": {"mean_score": "-1"}}}),
     "line 2: results.heuristic: not an opponent's result"),
    ("eval.jsonl", json.dumps(GOOD | {"wall_s": "60"}), "line 1: not an evaluation"),
    ("eval.jsonl", json.dumps(GOOD | {"results": {"heuristic": 5}}), "line 1: results.heuristic"),
    ("eval.jsonl", json.dumps(GOOD | {"results": {"heuristic": {"mean_score": 1, "ci95": [1]}}}),
     "line 1: results.heuristic"),
    ("eval.jsonl", "{not json\n", "line 1: not JSON"),
    ("eval.jsonl", "\n\n", "no evaluation in it"),
    ("eval.jsonl", b"\xff\xfe", "not UTF-8 text"),
    ("eval_report.json", "[]", "not an evaluation"),
    ("eval_report.json", "5", "not an evaluation"),
    ("eval_report.json", json.dumps({"decisions_trained": 1, "results": []}), "not an evaluation"),
    ("eval_report.json", '{"results": {', "not JSON"),
    ("summary.json", "{", "not JSON"),
    ("summary.json", "[1]", "not a run summary"),
    ("summary.json", '{"wall_s": "480"}', "not a run summary"),
    ("summary.json", '{"wall_s": NaN}', "not a run summary"),
])
def test_a_damaged_run_file_is_one_line_naming_the_file_and_exit_2(tmp_path, capsys, name, text, words):
    """issue #62: damaged eval.jsonl lines, reports and summaries each gave a traceback."""
    run = _run(tmp_path, "s0", [(30, 60.0, -1.0, 12.0)], (0.0, 14.0))
    (run / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    assert seed_curve.main([str(run), "--png", str(tmp_path / "c.png")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith(f"samloc seeds: {run / name}: ") and words in out.err, out.err
    assert out.err.count("\n") == 1 and "Traceback" not in out.err
    assert not (tmp_path / "c.png").exists()


def test_a_png_in_a_folder_that_cannot_be_written_is_one_line(tmp_path, capsys, monkeypatch):
    """issue #62: ``--png`` into a read-only folder gave a PermissionError traceback after the table."""
    run = _run(tmp_path, "s0", [(30, 60.0, -1.0, 12.0)], (0.0, 14.0))
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.geteuid() == 0:  # root writes anyway: refuse the write as the kernel does for a user
            def refused(path, write, mode=0o644):
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            monkeypatch.setattr("training.tools.seed_curve.write_with", refused)
        code = seed_curve.main([str(run), "--png", str(ro / "c.png")])
    finally:
        ro.chmod(0o755)
    err = capsys.readouterr().err
    assert code in (1, 2) and err.count("\n") == 1 and "Traceback" not in err, err
    assert str(ro) in err and ("cannot be written" in err or "Permission denied" in err)
    assert not (ro / "c.png").exists()
