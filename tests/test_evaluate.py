"""Duplicate evaluation: unbiased, zero-sum, reproducible, strong enough to separate players."""

from __future__ import annotations

import json

import pytest

from agents import HeuristicAgent
from agents.base import Agent
from agents.evaluation.evaluate import evaluate
from agents.evaluation.matches import IllegalMoveError
from sam_env.rules import RuleSet
from sam_env.table import Table
from samloc.commands.eval import main
from sam_env.record import replay_report
from samloc.commands.replay import main as replay_main

VOLATILE = ("seconds", "games_per_s")


def _same(a: dict, b: dict) -> bool:
    def keep(r: dict) -> dict:
        return {k: v for k, v in r.items() if k not in VOLATILE}
    return keep(a) == keep(b)


@pytest.mark.slow
def test_random_vs_random_is_centred_zero_sum_and_reproducible():
    r1 = evaluate("random", "random", Table(RuleSet.preset("hoi_quan_bai"), 4), 1500, seed=3)
    r2 = evaluate("random", "random", Table(RuleSet.preset("hoi_quan_bai"), 4), 1500, seed=3)
    assert _same(r1, r2)
    assert r1["deals"] == 1500 and r1["games"] == 6000
    assert r1["ci95"][0] < 0 < r1["ci95"][1]
    assert r1["zero_sum"]
    assert abs(r1["win_rate"] - 0.25) < 0.03
    assert sum(r1["score_hist"].values()) == 6000
    r3 = evaluate("random", "random", Table(RuleSet.preset("hoi_quan_bai"), 4), 1500, seed=4)
    assert r3["mean_score"] != r1["mean_score"]


def test_heuristic_beats_three_randoms():
    r = evaluate("heuristic", "random", Table(RuleSet.preset("hoi_quan_bai"), 4), 2000, seed=0)
    assert r["ci95"][0] > 5.0  # measured: about +14 lá per game
    assert r["win_rate"] > 0.5
    assert r["zero_sum"]
    assert r["den_paid"] == 0  # never a non-highest single in front of a báo-1 seat
    assert r["sam_declared"] >= 20 and r["sam_success_rate"] >= 0.6


@pytest.mark.parametrize("rules", ["hoi_quan_bai", "s666pg"])
def test_heuristic_does_not_lose_to_the_greedy_variant(rules):
    r = evaluate("heuristic", "heuristic:greedy", Table(RuleSet.preset(rules), 4), 800, seed=2)
    assert r["ci95"][0] > 0


class _ActOnly(Agent):
    """The heuristic without its batched form: forces the one-game-at-a-time path."""

    needs_obs = False

    def __init__(self, variant: str = "") -> None:
        super().__init__(0)
        self.inner = HeuristicAgent(variant=variant)
        self.name = "act-only " + self.inner.name

    def act(self, game, seat):
        return self.inner.act(game, seat)


def test_slow_path_plays_the_same_games_as_the_batched_path(tmp_path):
    fast = evaluate(HeuristicAgent(), HeuristicAgent(variant="greedy"), Table(RuleSet.preset("online"), 3),
                    40, seed=8, save_games=str(tmp_path / "fast.jsonl"))
    slow = evaluate(_ActOnly(), _ActOnly("greedy"), Table(RuleSet.preset("online"), 3), 40, seed=8,
                    save_games=str(tmp_path / "slow.jsonl"))
    assert fast["batched"] and not slow["batched"]
    for k in ("mean_score", "ci95", "win_rate", "sam_declared", "chops_made", "ends", "score_hist"):
        assert fast[k] == slow[k]
    assert (tmp_path / "fast.jsonl").read_text() == (tmp_path / "slow.jsonl").read_text()


def test_saved_games_replay_and_match_the_scores(tmp_path):
    path = tmp_path / "games.jsonl"
    r = evaluate("heuristic", "random:uniform", Table(RuleSet.preset("mien_bac"), 4), 25, seed=1,
                 save_games=str(path))
    lines = path.read_text().splitlines()
    assert len(lines) == r["games"] == 100
    total = 0
    for i, line in enumerate(lines):
        rec = json.loads(line)
        rep = replay_report(rec)
        assert rep["ok"] and rep["finished"], rep
        assert sum(rep["result"]["scores"]) == 0
        total += rep["result"]["scores"][i % 4]  # rotation i % 4: the agent sat in that seat
    assert total / 100 == pytest.approx(r["mean_score"], abs=1e-4)
    assert replay_main([str(path), "--json"]) == 0


def test_illegal_moves_are_caught():
    class Cheat(Agent):
        name = "cheat"
        needs_obs = False

        def act(self, game, seat):
            return 0  # pass, also when leading

        def act_batch(self, states, rule_array, obs, masks):
            return masks.argmin(1) * 0

    with pytest.raises(IllegalMoveError, match="cheat"):
        evaluate(Cheat(), "random", Table(RuleSet.preset("hoi_quan_bai"), 4), 5, seed=0)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="players must be an integer from 2 to 4"):  # a Table checks it
        evaluate("random", "random", Table(RuleSet.preset("online"), 5), 10)
    with pytest.raises(ValueError, match="deals must be a positive integer"):
        evaluate("random", "random", Table(RuleSet.preset("online"), 4), 0)


def test_cli_writes_report_and_json(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["--agent", "heuristic", "--opponents", "random", "--rules", "hoi_quan_bai,s666pg",
               "--players", "3", "--deals", "60", "--seed", "5", "--json", "--out", str(out),
               "--save-games", str(tmp_path / "g.jsonl")])
    assert rc == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    res = json.loads(last)
    for key in ("mean_score", "ci95", "win_rate", "games", "deals", "sam_declared", "sam_success_rate",
                "chops_made", "chops_suffered", "den_paid", "cong", "by_table"):
        assert key in res
    assert set(res["by_table"]) == {"hoi_quan_bai/3", "s666pg/3"} and res["games"] == 360
    for f in ("result.json", "report.md", "scores.png"):
        assert (out / f).stat().st_size > 100
    assert "| hoi_quan_bai/3 |" in (out / "report.md").read_text()
    made = json.loads((out / "result.json").read_text())["command"]  # the report says how to make it again
    assert made.startswith("samloc eval --agent heuristic --opponents random --rules hoi_quan_bai,s666pg")
    assert f"Command: `{made}`" in (out / "report.md").read_text()
    assert (out / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((tmp_path / "g.hoi_quan_bai_3.jsonl").read_text().splitlines()) == 180


@pytest.mark.parametrize("argv, words", [
    (["--rules", "nope"], "unknown preset"),
    (["--agent", "randm"], "unknown agent spec"),
    (["--players", "6"], "players must be an integer"),
    (["--deals", "0"], "--deals: must be 1 or more, not 0"),
    (["--tables", "hoi_quan_bai"], "is not RULES/PLAYERS"),
    (["--tables", "mien_bac/5"], "players must be an integer from 2 to 4"),
    (["--tables", "all", "--rules", "online"], "not both"),
    (["--rules", "mien_bac", "--players", "5,6"], "no table of mien_bac allows 5,6 players"),
    (["--agent", "checkpoints/standard", "--tables", "s666pg/5"], "add --off-table")])
def test_cli_usage_errors(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


def test_observation_agents_get_the_same_vectors_on_both_paths():
    # an (untrained) policy network: the batched path hands it sam_env.obs vectors
    # built here; the one-game path builds them itself from the Game
    torch = pytest.importorskip("torch")
    from agents.players.policy_agent import PolicyAgent
    from agents.nets.policy import PolicyNet
    from sam_env.obs import OBS_SIZE

    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = PolicyNet(OBS_SIZE, hidden=32)
    fast = evaluate(PolicyAgent(net), "heuristic", Table(RuleSet.preset("hoi_quan_bai"), 4), 15, seed=3)

    class ActOnly(Agent):
        name = "policy act-only"

        def act(self, game, seat):
            return PolicyAgent(net).act(game, seat)

    slow = evaluate(ActOnly(), HeuristicAgent(seed=4), Table(RuleSet.preset("hoi_quan_bai"), 4), 15, seed=3)
    assert fast["batched"] and not slow["batched"]
    assert fast["score_hist"] == slow["score_hist"] and fast["mean_score"] == slow["mean_score"]


def test_bench_agent_reports_heuristic_match_throughput(capsys):
    """``samloc bench --agent`` goes to the agents package (``agents.evaluation.bench.main``)."""
    from samloc.cli import main
    from samloc.commands.bench import module_for
    assert module_for(["--agent=heuristic"]) == "samloc.commands.bench_agent" == module_for(["--agent", "x"])
    assert module_for(["--env"]) == "samloc.commands.bench"
    assert module_for(["--learner"]) == "samloc.commands.bench_training"
    assert main(["bench", "--agent", "heuristic", "--games", "30", "--players", "3", "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(last) == {"agent", "games", "seconds", "games_per_s", "games_per_cpu_s"}
    assert last["agent"] == "heuristic" and 0 < last["games"] <= 90 and last["games"] % 3 == 0


def test_tables_are_parsed_as_asked() -> None:
    from samloc.commands.args import parse_tables
    names = lambda ts: [t.name for t in ts]  # noqa: E731
    assert parse_tables(None, None, None) is None  # the agent's own tables, decided by main
    assert len(parse_tables("all", None, None)) == 14
    assert names(parse_tables(" s666pg/5, online/2 ", None, None)) == ["s666pg/5", "online/2"]
    assert names(parse_tables(None, "hoi_quan_bai,mien_bac", "4,5")) == ["hoi_quan_bai/4", "hoi_quan_bai/5",
                                                                         "mien_bac/4"]
    assert names(parse_tables(None, None, "3")) == ["hoi_quan_bai/3"]


def test_a_checkpoint_is_evaluated_at_its_own_tables_unless_told(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    assert main(["--agent", "checkpoints/standard", "--deals", "4", "--json", "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert list(res["by_table"]) == ["hoi_quan_bai/4"] and res["out_of_distribution"] == []
    assert main(["--agent", "checkpoints/standard", "--tables", "online/3", "--off-table", "--deals", "4",
                 "--json", "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["by_table"]["online/3"]["out_of_distribution"] and res["out_of_distribution"] == ["online/3"]
    assert "online/3 (out of training distribution)" in (out / "report.md").read_text()


# ---- resumable runs ------------------------------------------------------------------------------
class _Stop(Exception):
    pass


def _interrupted(tmp_path, agent: str, opponents: str, after: int, deals: int = 70, chunk: int = 16) -> None:
    """A run stopped (as by Ctrl-C) once ``after`` deals are done."""
    def stop(done: int, total: int) -> None:
        if done >= after:
            raise _Stop
    with pytest.raises(_Stop):
        evaluate(agent, opponents, deals=deals, seed=5, chunk=chunk, progress=stop, store=tmp_path / "chunks")


@pytest.mark.slow
@pytest.mark.parametrize("agent, opponents, deals, chunk", [
    ("heuristic", "heuristic:greedy", 70, 16),
    ("checkpoints/standard", "heuristic", 70, 16),
    ("checkpoints/standard+search:candidates=2,worlds=2", "heuristic", 20, 8)])
def test_a_resumed_run_is_the_uninterrupted_one(tmp_path, agent, opponents, deals, chunk):
    """Chunks of replayable agents play alone what they play inside the whole run."""
    if "checkpoints" in agent:
        pytest.importorskip("torch")
    run = dict(deals=deals, seed=5, chunk=chunk)
    whole = evaluate(agent, opponents, **run, deal_scores=True)
    _interrupted(tmp_path, agent, opponents, after=2 * chunk, deals=deals, chunk=chunk)
    assert len(list((tmp_path / "chunks").glob("deals_*.npz"))) == 2
    resumed = evaluate(agent, opponents, **run, deal_scores=True, store=tmp_path / "chunks")
    assert resumed.pop("resumed_chunks") == 2
    assert _same(resumed, whole)
    again = evaluate(agent, opponents, **run, store=tmp_path / "chunks")
    assert again["resumed_chunks"] == -(-deals // chunk)  # every chunk taken, none played


def test_chunks_of_another_evaluation_are_refused(tmp_path):
    _interrupted(tmp_path, "heuristic", "heuristic:greedy", after=16)
    with pytest.raises(ValueError, match=r"holds chunks of another evaluation \(it differs in seed\)"):
        evaluate("heuristic", "heuristic:greedy", deals=70, seed=6, chunk=16, store=tmp_path / "chunks")
    with pytest.raises(ValueError, match=r"it differs in deals, opponents"):
        evaluate("heuristic", "heuristic", deals=71, seed=5, chunk=16, store=tmp_path / "chunks")


def test_agents_whose_moves_depend_on_play_order_are_not_resumed(tmp_path):
    with pytest.raises(ValueError, match="cannot keep its finished chunks: random plays differently alone"):
        evaluate("heuristic", "random", deals=8, store=tmp_path / "c")
    with pytest.raises(ValueError, match="cannot keep its finished chunks: --save-games writes every game"):
        evaluate("heuristic", "heuristic", deals=8, store=tmp_path / "c",
                 save_games=str(tmp_path / "g.jsonl"))
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_cli_resumes_only_when_asked_and_then_removes_the_chunks(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    argv = ["--agent", "heuristic", "--opponents", "heuristic:greedy", "--deals", "600", "--seed", "2",
            "--json", "--out", str(out)]
    import agents.evaluation.matches as ev
    real, calls = ev._play_batched, []

    def dies_in_the_second_chunk(*a, **k):
        if len(a[3]) > 1:  # a chunk of deals (the hands), not the one deal timed before the run
            calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(ev, "_play_batched", dies_in_the_second_chunk)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "interrupted; the finished chunks are kept in" in err and "--resume continues it" in err
    monkeypatch.setattr(ev, "_play_batched", real)
    assert main(argv) == 2
    assert "holds an interrupted evaluation" in capsys.readouterr().err and not (out / "result.json").exists()
    assert main(argv + ["--resume"]) == 0
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["by_table"]["hoi_quan_bai/4"]["resumed_chunks"] == 1 and not (out / "chunks").exists()
    assert main(argv[:-2] + ["--out", str(tmp_path / "fresh")]) == 0
    fresh = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert fresh["mean_score"] == res["mean_score"] and fresh["ci95"] == res["ci95"]
    assert main(["--agent", "heuristic", "--opponents", "random", "--deals", "4", "--resume", "--out",
                 str(tmp_path / "r")]) == 2
    assert "--resume cannot continue this run: random plays differently alone" in capsys.readouterr().err
    assert main(["--agent", "heuristic", "--deals", "4", "--resume"]) == 2
    assert "give the --out folder of the interrupted run" in capsys.readouterr().err


# ---- chunks played side by side ------------------------------------------------------------------
SIDE_BY_SIDE = {"workers", "wall_seconds"}


@pytest.mark.slow
@pytest.mark.parametrize("agent, opponents, deals, chunk", [
    ("heuristic", "heuristic:greedy", 70, 16),
    ("checkpoints/standard+search:candidates=2,worlds=2", "heuristic", 12, 4)])
def test_worker_processes_give_the_one_process_result(tmp_path, agent, opponents, deals, chunk):
    """Chunks finish in any order in the workers; the result, deal by deal and game by game, is the
    one-process one."""
    if "checkpoints" in agent:
        pytest.importorskip("torch")
    run = dict(deals=deals, seed=5, chunk=chunk, deal_scores=True)
    one = evaluate(agent, opponents, **run, save_games=str(tmp_path / "one.jsonl"))
    two = evaluate(agent, opponents, **run, save_games=str(tmp_path / "two.jsonl"), workers=2)
    assert two["workers"] == 2 and two["wall_seconds"] > 0 and not SIDE_BY_SIDE & set(one)
    assert _same({k: v for k, v in two.items() if k not in SIDE_BY_SIDE | {"saved_games"}},
                 {k: v for k, v in one.items() if k != "saved_games"})
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()


@pytest.mark.slow
def test_one_pool_serves_every_table_and_keeps_resumable_chunks(tmp_path):
    from agents.evaluation.evaluate import evaluate_tables
    tables, deals = [Table(RuleSet.preset("online"), 3),
                     Table(RuleSet.preset("mien_bac"), 4)], 600  # two chunks a table: 512 and 88 deals
    one = evaluate_tables("heuristic", "heuristic:greedy", tables, deals, seed=2)
    seen: list[tuple[str, int]] = []
    two = evaluate_tables("heuristic", "heuristic:greedy", tables, deals, seed=2, workers=2,
                          store=tmp_path / "chunks", progress=lambda k, d, t: seen.append((k, d)))
    assert list(two["by_table"]) == ["online/3", "mien_bac/4"] and two["workers"] == 2
    assert _same({k: v for k, v in two.items() if k not in SIDE_BY_SIDE | {"by_table"}},
                 {k: v for k, v in one.items() if k != "by_table"})
    for name, r in two["by_table"].items():
        assert _same({k: v for k, v in r.items() if k not in SIDE_BY_SIDE}, one["by_table"][name])
        assert sorted(d for k, d in seen if k == name) in ([88, 600], [512, 600])  # as the chunks finished
    assert len(list((tmp_path / "chunks").rglob("deals_*.npz"))) == 4
    again = evaluate_tables("heuristic", "heuristic:greedy", tables, deals, seed=2, workers=2,
                            store=tmp_path / "chunks")
    assert all(r["resumed_chunks"] == 2 and "workers" not in r for r in again["by_table"].values())


def test_worker_processes_are_refused_what_they_cannot_replay(tmp_path, capsys):
    from agents.evaluation.evaluate import EvalPool
    with pytest.raises(ValueError, match="cannot be played apart by worker processes: random plays"):
        evaluate("heuristic", "random", deals=8, workers=2)
    with pytest.raises(ValueError, match="give them as specs"):
        evaluate(HeuristicAgent(), "heuristic", deals=8, chunk=4, workers=2)
    with pytest.raises(ValueError, match="workers must be a positive integer, not 0"):
        evaluate("heuristic", "heuristic", deals=8, workers=0)
    with EvalPool("heuristic", "heuristic", 1, 2) as pool:
        with pytest.raises(ValueError, match="the pool plays heuristic against heuristic with seed 1, not"
                                             " heuristic against heuristic:greedy with seed 1"):
            evaluate("heuristic", "heuristic:greedy", deals=8, seed=1, pool=pool)
    assert main(["--agent", "heuristic", "--opponents", "random", "--deals", "8", "--workers", "2",
                 "--out", str(tmp_path / "r")]) == 2
    assert "--workers plays the chunks apart, which this run cannot: random plays" in capsys.readouterr().err
    assert main(["--agent", "heuristic", "--deals", "8", "--workers", "0", "--out", str(tmp_path / "r")]) == 2
    assert "--workers: must be 1 or more, not 0" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_workers_report_the_one_process_figures(tmp_path, capsys):
    argv = ["--agent", "heuristic", "--opponents", "heuristic:greedy", "--deals", "1100", "--seed", "4",
            "--json"]
    assert main(argv + ["--out", str(tmp_path / "one")]) == 0
    one = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(argv + ["--workers", "2", "--out", str(tmp_path / "two")]) == 0
    two = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert two["by_table"]["hoi_quan_bai/4"]["workers"] == 2  # three chunks of at most 512 deals
    assert (two["mean_score"], two["ci95"], two["win_rate"]) == (one["mean_score"], one["ci95"],
                                                                 one["win_rate"])


def test_a_usage_error_is_one_line_and_help_exits_0(capsys):
    """The commands' parser (samloc/commands/args.py): one line naming the problem, exit 2."""
    from samloc.commands.bench_agent import main as bench_main
    assert main(["--deals", "many"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "samloc eval: argument --deals: must be a whole number, not 'many'"]
    assert main(["--help"]) == 0 and "--opponents" in capsys.readouterr().out
    assert bench_main(["--agent", "heuristic", "--rules", "nope", "--json"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_rules_cross_as_one_parsed_value():
    """The library takes a Table (a parsed rule set and its player count); a name is parsed where it comes
    in (a command line, a config, a request)."""
    with pytest.raises(TypeError, match="table must be a Table"):
        evaluate("random", "random", "hoi_quan_bai", 2)
    with pytest.raises(TypeError, match="table must be a Table .*, not RuleSet"):
        evaluate("random", "random", RuleSet.preset("hoi_quan_bai"), 2)
    with pytest.raises(TypeError, match="rules must be a RuleSet"):
        Table("hoi_quan_bai", 4)


@pytest.mark.slow
def test_pool_workers_play_on_one_thread(monkeypatch):
    """Workers are sized to cores: a network's worker runs torch on one thread even where the parent's
    environment does not say so (a library caller that is not the samloc command)."""
    pytest.importorskip("torch")
    from agents.evaluation.eval_chunks import EvalPool
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with EvalPool("checkpoints/standard", "heuristic", 0, 2) as pool:
        assert pool._executor.submit(eval, "__import__('torch').get_num_threads()").result() == 1


# ---- a long evaluation says what it will play, and its progress reaches a log -------------------------
def test_progress_moves_within_a_chunk():
    """A chunk of searched games took minutes with no word; the games ended within it now count."""
    seen: list[float] = []
    evaluate("heuristic", "random", Table(RuleSet.preset("hoi_quan_bai"), 4), 8, seed=1, chunk=4,
             progress=lambda done, total: seen.append(done))
    assert seen == sorted(seen) and seen[-1] == 8 and 4 in seen
    within = [d for d in seen if d not in (4, 8)]
    assert within and all(0 < d < 8 for d in within)
    assert all(d < 4 for d in seen[:seen.index(4)])  # a chunk's end is heard only once it is kept


def test_a_log_that_is_not_a_terminal_hears_the_plan_and_periodic_progress(tmp_path, capsys, monkeypatch):
    """Logged to a file, `samloc eval` said nothing for 10 minutes, then drew 14 bars at 20/20."""
    import samloc.commands.eval as eval_cmd

    monkeypatch.setattr(eval_cmd, "LINE_EVERY_S", 0.0)
    assert main(["--agent", "heuristic", "--opponents", "random", "--rules", "hoi_quan_bai,s666pg",
                 "--players", "3", "--deals", "5", "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("samloc eval: 2 tables x 5 deals, each deal in every seat: 30 games; roughly ")
    assert "(one deal of hoi_quan_bai/3: " in err[0]
    lines = [x for x in err[1:] if x.startswith("samloc eval: ")]
    assert any(" 0/5 deals (table 1 of 2)" in x or " 1/5 deals (table 1 of 2)" in x for x in lines), lines
    assert "samloc eval: hoi_quan_bai/3 5/5 deals (table 1 of 2);" in "\n".join(lines)
    assert lines[-1].startswith("samloc eval: s666pg/3 5/5 deals (table 2 of 2); ")
