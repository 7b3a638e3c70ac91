"""League ratings: the fit recovers known ratings, the bootstrap covers the truth, the command runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents.evaluation.evaluate import evaluate
from agents.evaluation.league import expand
from samloc.commands.league import main
from agents.evaluation.ratings import design, fit, fit_matrix, rate
from sam_env.rules import RuleSet
from sam_env.table import Table

NAMES = ["a", "b", "c", "d"]
ORDERED = [(i, j) for i in range(4) for j in range(4) if i != j]


def _deals(r: np.ndarray, pairs, deals: int, noise: float, rng: np.random.Generator,
           lone: float = 0.0) -> np.ndarray:
    """Per-deal scores of ``score(i vs j) = r_i − r_j + lone·|r_i − r_j|`` plus noise, with a part of
    the noise shared by every pair in the same deal (a hard deal is hard for everyone)."""
    mean = np.array([r[i] - r[j] + lone * abs(r[i] - r[j]) for i, j in pairs])
    shared = rng.normal(0, noise / 2, deals)
    return mean[:, None] + rng.normal(0, noise, (len(pairs), deals)) + shared[None, :]


def test_fit_recovers_ratings_exactly_from_noiseless_scores_with_any_pin():
    r = np.array([0.0, 2.5, -1.0, 4.0])
    scores = [r[i] - r[j] for i, j in ORDERED]
    var = np.linspace(0.5, 3.0, len(ORDERED))
    assert np.allclose(fit(4, ORDERED, scores, var, pin=0), r, atol=1e-10)
    assert np.allclose(fit(4, ORDERED, scores, var, pin=2), r - r[2], atol=1e-10)
    some = [(0, 1), (1, 2), (3, 2)]  # a spanning tree is enough
    assert np.allclose(fit(4, some, [r[i] - r[j] for i, j in some], [1, 1, 1], pin=1), r - r[1], atol=1e-10)


def test_fit_weights_each_pair_by_its_variance():
    # two measures of r_0 − r_1: 2 (variance 1) and 0 (variance 3): the weighted mean is 1.5
    assert fit(2, [(0, 1), (1, 0)], [2.0, 0.0], [1.0, 3.0], pin=1) == pytest.approx([1.5, 0.0])
    # inconsistent scores on a triangle: the normal equations of the weighted problem
    rng = np.random.default_rng(0)
    s, var = rng.normal(0, 3, len(ORDERED)), rng.uniform(0.2, 4.0, len(ORDERED))
    x = design(4, ORDERED)[:, 1:]
    w = np.diag(1 / var)
    want = np.linalg.solve(x.T @ w @ x, x.T @ w @ s)
    assert np.allclose(fit(4, ORDERED, s, var, pin=0)[1:], want)


def test_fit_refuses_ratings_the_pairs_do_not_determine():
    with pytest.raises(ValueError, match="do not connect every agent"):
        fit_matrix(4, [(0, 1), (2, 3)], [1, 1], pin=0)
    with pytest.raises(ValueError, match="two different agents"):
        fit_matrix(3, [(0, 0)], [1], pin=0)


def test_the_lone_seat_asymmetry_is_reported_not_fitted():
    # score(A vs B) = 1.4·Δ for the stronger alone, −0.6·Δ for the weaker alone (k = 0.6/1.4)
    r = np.array([0.0, 3.0, -2.0, 5.0])
    ds = _deals(r, ORDERED, 50, 0.0, np.random.default_rng(1), lone=0.4)
    out = rate(NAMES, ORDERED, ds, pin=0, reps=200, seed=0)
    assert [out["ratings"][n]["rating"] for n in NAMES] == pytest.approx(r, abs=1e-9)
    assert out["misfits"] == [] and out["cycles"] == []
    assert out["lone_seat_k"] == pytest.approx(0.6 / 1.4, abs=1e-4)
    assert all(m["k"] == pytest.approx(0.6 / 1.4, abs=1e-4) for m in out["matchups"])
    top = next(m for m in out["matchups"] if {m["a"], m["b"]} == {"d", "c"})
    assert (top["a"], top["a_alone"], top["b_alone"], top["sum"]) == ("d", 9.8, -4.2, 5.6)


def test_a_rock_paper_scissors_cycle_is_named_as_misfits_and_as_a_cycle():
    # a beats b, b beats c, c beats a by 1 lá each; d loses 5 to each of them (that part fits)
    cyc = {(0, 1): 1.0, (1, 2): 1.0, (2, 0): 1.0}
    mean = {}
    for i in range(3):
        mean[i, 3], mean[3, i] = 5.0, -5.0
    for (i, j), v in cyc.items():
        mean[i, j], mean[j, i] = v, -v
    rng = np.random.default_rng(2)
    ds = np.array([[mean[p]] * 400 for p in ORDERED]) + rng.normal(0, 2.0, (len(ORDERED), 400))
    out = rate(NAMES, ORDERED, ds, pin=3, reps=500, seed=1)
    assert {frozenset((m["a"], m["b"])) for m in out["misfits"]} == {frozenset(p) for p in
                                                                     (("a", "b"), ("b", "c"), ("c", "a"))}
    assert out["cycles"] == [["a", "b", "c"]]
    for n in "abc":  # the cycle averages out: the three are level, 5 above d
        assert out["ratings"][n]["rating"] == pytest.approx(5.0, abs=0.3)
    assert out["fit"]["chi2_per_dof"] > 10


def test_bootstrap_intervals_cover_the_truth_and_are_reproducible_by_seed():
    r = np.array([0.0, 1.0, 3.0, -2.0])
    rng = np.random.default_rng(3)
    hits, estimates, ses = 0, [], []
    for _ in range(40):
        out = rate(NAMES, ORDERED, _deals(r, ORDERED, 150, 4.0, rng, lone=0.3), pin=0, reps=400, seed=7)
        rt = out["ratings"]
        hits += sum(rt[n]["ci95"][0] <= r[k] <= rt[n]["ci95"][1] for k, n in enumerate(NAMES) if k)
        estimates.append([rt[n]["rating"] for n in NAMES[1:]])
        ses.append([rt[n]["se"] for n in NAMES[1:]])
    assert 0.85 <= hits / 120  # nominal 0.95
    spread = np.std(estimates, axis=0, ddof=1)  # the estimates' real spread over the 40 data sets
    assert np.all((0.7 < np.mean(ses, 0) / spread) & (np.mean(ses, 0) / spread < 1.4))
    ds = _deals(r, ORDERED, 100, 4.0, np.random.default_rng(4))
    one, two = rate(NAMES, ORDERED, ds, reps=300, seed=5), rate(NAMES, ORDERED, ds, reps=300, seed=5)
    assert one == two
    other = rate(NAMES, ORDERED, ds, reps=300, seed=6)
    assert other["ratings"]["b"]["ci95"] != one["ratings"]["b"]["ci95"]
    assert other["ratings"]["b"]["rating"] == one["ratings"]["b"]["rating"]  # the fit does not resample


def test_cli_end_to_end(tmp_path, capsys):
    out = tmp_path / "lg"
    argv = ["random", "heuristic", "heuristic:greedy", "--deals", "20", "--seed", "1", "--json",
            "--out", str(out)]
    assert main(argv) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rt = res["ratings"]
    assert set(rt) == {"random", "heuristic", "heuristic:greedy"} and res["pin"] == "random"
    assert all(len(v["ci95"]) == 2 and v["ci95"][0] <= v["rating"] <= v["ci95"][1] for v in rt.values())
    assert rt["random"] == {"rating": 0.0, "ci95": [0.0, 0.0], "se": 0.0}
    assert rt["heuristic"]["ci95"][0] > 5 and rt["heuristic:greedy"]["ci95"][0] > 3
    assert rt["heuristic"]["rating"] > rt["heuristic:greedy"]["rating"]
    assert len(res["pairs"]) == 6 and len(res["matchups"]) == 3 and res["report_dir"] == str(out)
    # each pair is samloc eval's duplicate evaluation on the same deals
    pair = next(p for p in res["pairs"] if p["agent"] == "heuristic" and p["opponents"] == "random")
    alone = evaluate("heuristic", "random", Table(RuleSet.preset("hoi_quan_bai"), 4), 20, seed=1)
    assert pair["score"] == pytest.approx(alone["mean_score"])
    saved = json.loads((out / "league.json").read_text())
    assert saved["ratings"] == rt and len(saved["evaluations"]) == 6
    assert saved["command"] == "samloc league " + " ".join(argv)
    md = (out / "league.md").read_text()
    assert "| 1 | heuristic |" in md and "| 3 | random | +0.00 |" in md and saved["command"] in md
    assert (out / "ratings.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _fake_run(root: Path) -> Path:
    torch = pytest.importorskip("torch")
    from agents.nets.checkpoint import save_checkpoint
    from agents.nets.policy import build_net
    from sam_env.actions import ACTION_TABLE_VERSION
    from sam_env.obs import OBS_VERSION
    run = root / "fake__0__20260101-000000"
    for k, decisions in ((1, 1000), (2, 2000)):
        torch.manual_seed(k)
        save_checkpoint(run / "checkpoints" / f"ckpt_{k:08d}", build_net(16, 1, "obs"), {
            "name": "fake", "tables": [{"rules": "hoi_quan_bai", "players": 4}], "obs_version": OBS_VERSION,
            "action_table_version": ACTION_TABLE_VERSION, "updates": k, "decisions_trained": decisions})
    (run / "checkpoints" / "ckpt_00000003").mkdir()  # a checkpoint cut short: skipped, with a warning
    (run / "checkpoints" / "ckpt_00000003" / "metadata.json").write_text("{")
    return run


def test_a_run_folder_stands_for_its_last_checkpoint_unless_all_are_asked_for(tmp_path, capsys):
    """issue #60: a run folder expanded to every kept checkpoint (6 agents became 13); now its last one that
    verifies (ckpt_00000003 is cut short: skipped with a warning), every one with --all-checkpoints."""
    run = _fake_run(tmp_path)
    ckpts = [str(run / "checkpoints" / f"ckpt_{k:08d}") for k in (1, 2)]
    warned: list[str] = []
    got = expand([str(run) + "/", "random"], warned.append)
    assert [(e.name, e.run, e.decisions_trained) for e in got] == [(ckpts[1], str(run), 2000),
                                                                   ("random", None, None)]
    assert len(warned) == 1 and "ckpt_00000003" in warned[0]
    assert main([str(run), "random", "--deals", "4", "--json", "--out", str(tmp_path / "last")]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert list(res["ratings"]) == [ckpts[1], "random"] and len(res["pairs"]) == 2
    assert [(e.name, e.run, e.decisions_trained) for e in expand([str(run) + "/", "random"],
                                                                 all_checkpoints=True)] == [
        (ckpts[0], str(run), 1000), (ckpts[1], str(run), 2000), ("random", None, None)]
    out = tmp_path / "lg"
    assert main([str(run), "random", "--all-checkpoints", "--deals", "4", "--json", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert "skipping bad checkpoint" in cap.err and "ckpt_00000003" in cap.err
    res = json.loads(cap.out.strip().splitlines()[-1])
    assert list(res["ratings"]) == [*ckpts, "random"] and len(res["pairs"]) == 6
    assert [a["decisions_trained"] for a in res["agents"]] == [1000, 2000, None]
    assert (out / "ratings.png").stat().st_size > 1000
    assert main([ckpts[0], "random", "--players", "3", "--deals", "4", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert "add --off-table" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("argv, words", [
    (["random", "randm"], "unknown agent spec"),
    (["random"], "at least two agents, not 1"),
    (["random", "heuristic", "--pin", "heuristic:greedy"], "--pin heuristic:greedy: not in the league"),
    (["random", "heuristic", " random"], "random is in the league twice"),
    (["random", "heuristic", "--rules", "nope"], "unknown preset"),
    (["random", "heuristic", "--players", "6"], "players must be an integer"),
    (["random", "heuristic", "--rules", "hoi_quan_bai,s666pg"], "a league plays one table"),
    (["random", "heuristic", "--deals", "1"], "--deals: must be 2 or more, not 1"),
    (["random", "heuristic", "--bootstrap", "10"], "--bootstrap: must be from 100 to 1,000,000, not 10"),
    (["random", "checkpoints/nope"], "no such checkpoint directory")])
def test_cli_usage_errors(argv, words, capsys):
    from samloc.cli import main as samloc_main
    assert samloc_main(["league", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1, err


def test_short_names_are_the_shortest_unique_ends_of_the_paths():
    from agents.evaluation.league import short_names
    names = ["runs/quick__0__20261201/checkpoints/ckpt_00000040",
             "runs/quick__1__20261201/checkpoints/ckpt_00000040",
             "runs/quick__1__20261201/checkpoints/ckpt_00000080", "heuristic", "checkpoints/standard+search",
             "runs/quick__0__20261201"]
    assert short_names(names) == {
        names[0]: "quick__0__20261201/checkpoints/ckpt_00000040",
        names[1]: "quick__1__20261201/checkpoints/ckpt_00000040",
        names[2]: "ckpt_00000080", "heuristic": "heuristic", names[4]: "standard+search",
        names[5]: "quick__0__20261201"}
    assert short_names(["a/x", "x"]) == {"a/x": "a/x", "x": "x"}


def _res(agents: list[dict], pin: str) -> dict:
    rt = {a["name"]: {"rating": float(k), "ci95": [k - 0.5, k + 0.5], "se": 0.2}
          for k, a in enumerate(agents)}
    return {"ratings": rt, "agents": agents, "table": "hoi_quan_bai/4", "deals": 1000, "pin": pin}


def test_ratings_png_names_agents_shortly_and_its_title_fits(tmp_path):
    """issue #60: the title was clipped by long paths and the legend showed them whole."""
    import matplotlib.pyplot as plt
    from agents.evaluation.league import _figure
    deep = "/very/long/path/to/some/experiments/folder/of/a/researcher/runs"
    runs = [f"{deep}/quick__{s}__20261201-000000" for s in (0, 1)]
    agents = [{"name": f"{r}/checkpoints/ckpt_{u:08d}", "run": r, "decisions_trained": u * 1000}
              for r in runs for u in (40, 80)]
    agents.append({"name": f"{deep}/../shipped/checkpoints/standard", "run": None, "decisions_trained": None})
    fig = _figure(_res(agents, agents[0]["name"]))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["standard +4.00", "quick__0__20261201-000000", "quick__1__20261201-000000"]
    fig.canvas.draw()
    box, whole = ax.title.get_window_extent(), fig.bbox
    assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and box.y1 <= whole.y1
    assert "quick__0__20261201-000000/checkpoints/ckpt_00000040 = 0" in ax.title.get_text().replace("\n", " ")
    plt.close(fig)
    names = [f"{deep}/a/{n}" for n in ("heuristic_net", "random_net")]
    fig = _figure(_res([{"name": n, "run": None, "decisions_trained": None} for n in names] +
                       [{"name": "random", "run": None, "decisions_trained": None}], "random"))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["heuristic_net", "random_net", "random"]
    plt.close(fig)
