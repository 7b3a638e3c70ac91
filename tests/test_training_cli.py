"""`samloc train` without Ray: the keys and their docs, --print-config, --dry-run, run names, resume budgets,
the evaluation on record after a resume, the shipped configs' comments against the measurements."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path

import pytest

from agents.nets.format import file_sha256, sealed
from samloc.commands import train as cli
from training.tools import pipeline
from training.config import ConfigError, TrainConfig
from training.config_docs import field_docs
from training.config_load import load_config, schema as load_schema
from training.launch import run_name

REPO = Path(__file__).resolve().parent.parent
SMALL = ["warm_start.decisions=0", "eval.every_minutes=0", "model.hidden=32", "model.layers=1",
         "display=none", "total_decisions=10000", "max_minutes=2"]


def _no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any step that trains, starts Ray or evaluates fails the test."""
    import ray

    from training.run import loop

    def refuse(*a: object, **kw: object) -> None:
        raise AssertionError("this command must not train, start Ray or evaluate")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(loop.RunLoop, "run", refuse)
    monkeypatch.setattr(pipeline, "final_report", refuse)


def _saved_run(tmp_path: Path, updates: int = 40, trained: int = 5000, wall_s: float = 90.0) -> Path:
    """A run folder whose newest checkpoint holds these counters (written by the trainer, without Ray)."""
    from training.launch import new_loop

    run = tmp_path / "run"
    tr = new_loop(load_config("quick", SMALL), run, log=lambda m: None)
    tr.counters.updates, tr.counters.decisions_trained, tr.counters.wall_s = updates, trained, wall_s
    tr.state.eval_history = [_entry(20)]
    tr.save()
    return run


def _entry(updates: int) -> dict:
    r = {"mean_score": updates / 10, "ci95": [updates / 10 - 1, updates / 10 + 1], "win_rate": 0.3}
    return {"updates": updates, "decisions_trained": updates * 100, "results": {"random": r}}


# ---- the keys: one source of docs, a config that reads back, free order, --help -------------------------
def test_every_config_field_has_its_doc_in_the_typed_config() -> None:
    """The run's own keys and every registered algorithm's and stage's section."""
    docs, todo, seen = field_docs(), [load_schema("ppo")], set()
    while todo:
        cls = todo.pop()
        seen.add(cls.__name__)
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            section = dataclasses.is_dataclass(hints[f.name])  # documented by its class's docstring
            doc = (hints[f.name].__doc__ or "") if section else docs[cls.__name__].get(f.name, "")
            assert doc.strip(), f"{cls.__name__}.{f.name} has no doc"
            inner = [hints[f.name], *typing.get_args(hints[f.name])]
            todo += [t for t in inner if dataclasses.is_dataclass(t) and t.__name__ not in seen]
    assert {"TableConfig", "EnvConfig", "PPOConfig", "DMCConfig", "DistillConfig", "ReinforceConfig",
            "WarmStartConfig", "BeliefConfig"} <= seen


def test_print_config_is_every_key_with_its_doc_and_reads_back(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["ppo.lr=1e-4", "--config", "quick", "env.players=3", "--print-config"]) == 0
    text = capsys.readouterr().out
    f = tmp_path / "printed.yaml"
    f.write_text(text)
    cfg = load_config(f)
    assert cfg == load_config("quick", ["ppo.lr=1e-4", "env.players=3", "name=quick-hoi_quan_bai-3"])
    keys = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    docs = {**field_docs()["TrainConfig"], **field_docs()["PPOConfig"]}
    assert all(" # " in ln for ln in keys), [ln for ln in keys if " # " not in ln]
    lr = next(ln for ln in keys if ln.strip().startswith("lr:"))
    assert "0.0001" in lr and docs["lr"] in lr
    assert "name: quick-hoi_quan_bai-3" in text  # the table changed: the name says so


def test_help_says_where_the_keys_are(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for words in ("--print-config", "--dry-run", "--more-minutes", "--more-decisions", "training/config.py",
                  "rollout.*", "num_workers", "ppo.*", "max_minutes"):
        assert words in out, words


# ---- a scalar for a list ----------------------------------------------------------------------------------
def test_a_scalar_for_a_list_is_a_list_of_one(tmp_path: Path) -> None:
    cfg = load_config("quick", ["env.players=3", "env.rules=mien_bac", "eval.opponents=random"])
    assert cfg.env.players == [3] and cfg.env.rules == ["mien_bac"] and cfg.eval.opponents == ["random"]
    cfg = load_config("quick", ["env.tables={rules: online, players: 3}"])
    assert [(t.rules, t.players) for t in cfg.env.tables] == [("online", [3])]
    f = tmp_path / "c.yaml"
    f.write_text("env:\n  players: 3\n  tables:\n    - {rules: s666pg, players: 5}\n")
    assert [t.players for t in load_config(f).env.tables] == [[5]]
    with pytest.raises(ConfigError) as err:
        load_config("quick", ["env.tables=mien_bac"])
    assert "env.tables takes a list of tables" in str(err.value) and "\n" not in str(err.value)



def test_an_older_runs_lag_correction_keys_move_to_ppo_and_an_override_names_the_new_key(
        tmp_path: Path) -> None:
    """learner.correct_from_lag and learner.is_clip are PPO's loss settings now (ppo.*): an older run's
    config.yaml still loads on --resume with its values there (a file's own ppo.* word wins); an override
    of the old key is refused in one line naming the new one."""
    import yaml

    from training.config import to_dict
    from training.launch import read_run_config

    run = tmp_path / "old-run"
    run.mkdir()
    old = to_dict(load_config("quick", ["ppo.lr=2e-4"]))  # as such a run wrote it: the keys in learner
    del old["ppo"]["correct_from_lag"], old["ppo"]["is_clip"]
    old["learner"] |= {"correct_from_lag": 5, "is_clip": 1.5}
    (run / "config.yaml").write_text(yaml.safe_dump(old))
    cfg = read_run_config(run, ["max_minutes=1"])
    ppo = cfg.section("ppo")
    assert (ppo.correct_from_lag, ppo.is_clip, ppo.lr, cfg.max_minutes) == (5, 1.5, 2e-4, 1)
    assert not hasattr(cfg.learner, "is_clip")
    f = tmp_path / "both.yaml"
    f.write_text("learner: {is_clip: 1.5, max_policy_lag: 4}\nppo: {is_clip: 2.0}\n")
    both = load_config(f)
    assert both.section("ppo").is_clip == 2.0 and both.learner.max_policy_lag == 4
    with pytest.raises(ConfigError) as err:
        load_config("quick", ["learner.is_clip=1.2"])
    assert str(err.value) == ("learner.is_clip is now ppo.is_clip (a setting of ppo's loss): "
                              "give ppo.is_clip=1.2")

# ---- run names --------------------------------------------------------------------------------------------
def test_a_run_is_named_for_the_tables_its_overrides_chose() -> None:
    def name(*o: str) -> str:
        cfg = load_config("quick", list(o))
        return run_name(cfg.name, cfg.env, list(o))

    assert name("env.rules=mien_bac", "env.players=3") == "quick-mien_bac-3"
    assert name("env.rules=[mien_bac,online]", "env.players=[3,4]") == "quick-mien_bac.online-3.4"
    house = "{rules: {preset: online, chop_two: 15}, players: [3]}"
    tables = f"env.tables=[{{rules: s666pg, players: [5]}}, {house}]"
    assert name(tables) == "quick-s666pg-5-online_chop_two_15-3"
    assert name("ppo.lr=1e-4") == "quick"
    assert name("env.players=3", "name=mine") == "mine"


def test_dry_run_checks_and_prints_the_run_folder_without_starting_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _no_training(monkeypatch)
    out_dir = tmp_path / "runs"
    assert cli.main(["--config", "quick", "env.rules=mien_bac", "env.players=3", f"out_dir={out_dir}",
                     "--dry-run"]) == 0
    out = capsys.readouterr().out
    folder = rf"{re.escape(str(out_dir))}/quick-mien_bac-3__0__\d{{8}}-\d{{6}}"
    assert re.search(rf"run folder: +{folder} \(new\)", out), out
    assert not out_dir.exists()  # nothing written
    assert cli.main(["--config", "quick", "rollout.num_workers=64", "--dry-run"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rollout.num_workers=64" in err and "CPUs" in err


# ---- resuming: budgets over every sitting, more of them, nothing left, the evaluation on record -----------
def test_more_minutes_and_decisions_count_from_what_the_run_has_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _no_training(monkeypatch)
    run = _saved_run(tmp_path, trained=5000, wall_s=90.0)
    assert cli.main(["--resume", str(run), "--more-minutes", "5", "--more-decisions", "2e3",
                     "--print-config"]) == 0
    text = capsys.readouterr().out
    assert "\nmax_minutes: 6.5 " in text  # 1.5 minutes + 5
    assert "\ntotal_decisions: 7000 " in text  # 5,000 + 2,000
    assert cli.main(["--resume", str(run), "--more-minutes", "1", "--dry-run"]) == 0
    assert "resume from ckpt_00000040: update 40, 5,000 decisions, 1.5 minutes" in capsys.readouterr().out
    for args, words in ((["--more-minutes", "5", "max_minutes=9"], "not both"),
                        (["--more-decisions", "0"], "a whole number from 1")):
        assert cli.main(["--resume", str(run), *args]) == 2
        assert words in capsys.readouterr().err.strip().splitlines()[-1]  # argparse: usage, then the error


def test_a_resume_with_nothing_left_says_so_and_starts_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _no_training(monkeypatch)
    run = _saved_run(tmp_path, trained=5000, wall_s=120.0)  # max_minutes=2: spent
    before = sorted(p.name for p in run.rglob("*"))
    assert cli.main(["--resume", str(run)]) == 0
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "nothing left to do" in out and "--more-minutes" in out, out
    assert cli.main(["--resume", str(run), "--more-minutes", "3", "total_decisions=5000"]) == 0
    out = capsys.readouterr().out.strip()
    assert "nothing left to do" in out and "5,000 decisions trained" in out and "--more-decisions" in out, out
    assert sorted(p.name for p in run.rglob("*")) == before


def test_a_resume_shows_the_last_evaluation_on_record(tmp_path: Path) -> None:
    """The checkpoint at update 40 was written while its evaluation ran; eval.jsonl got it afterwards, and
    one at update 60, whose work the kill lost."""
    from training.launch import new_loop
    from training.run.runlog import Display

    run = _saved_run(tmp_path, updates=40)
    (run / "eval.jsonl").write_text("".join(json.dumps(_entry(u)) + "\n" for u in (20, 40, 60)))
    msgs: list[str] = []
    tr = new_loop(load_config(run / "config.yaml"), run, resume=True, log=msgs.append)
    assert tr.state.last_eval is not None and tr.state.last_eval["updates"] == 40
    assert Display(tr.cfg, tr.state, tr.algo.display_rows)._eval_text().startswith("@update 40:")
    assert [json.loads(ln)["updates"] for ln in (run / "eval.jsonl").read_text().splitlines()] == [20, 40]
    assert any("1 evaluation(s) after update 40 dropped" in m for m in msgs), msgs


# ---- the shipped configs' comments quote the measured figures ------------------------------------------
def test_the_figures_in_the_shipped_configs_comments_are_the_measured_ones() -> None:
    """Every figure with a thousands separator in a config comment (12,900 decisions/s ...) is one that
    the training manual or the results log (docs/training.md, docs/results.md) records."""
    docs = "".join((REPO / "docs" / name).read_text(encoding="utf-8") for name in ("training.md",
                                                                                   "results.md"))
    for f in sorted((REPO / "configs").glob("*.yaml")):
        lines = f.read_text(encoding="utf-8").splitlines()
        comments = " ".join(ln.split("#", 1)[1] for ln in lines if "#" in ln)
        for figure in re.findall(r"\d{1,3}(?:,\d{3})+", comments):
            assert figure in docs, f"{f.name}: {figure} is in neither docs/training.md nor docs/results.md"


# ---- one line, not a traceback, for what a run could not do (issue 35, item 7) ---------------------------
def test_the_dry_run_refuses_a_network_too_big_for_memory_and_a_folder_it_cannot_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _no_training(monkeypatch)
    assert cli.main(["--config", "quick", "model.hidden=1000000", "--dry-run"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("samloc train: model: the network has "), err
    assert "GiB" in err and "model.hidden" in err, err
    assert cli.main(["--config", "quick", "--run-dir", "/proc/x", "--dry-run"]) == 1
    assert capsys.readouterr().err.strip() == "samloc train: the run folder /proc/x cannot be written here"


def test_a_resume_whose_counters_are_not_numbers_names_the_file_and_the_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _no_training(monkeypatch)
    run = _saved_run(tmp_path)
    trainer = run / "checkpoints" / "ckpt_00000040" / "trainer.json"
    state = json.loads(trainer.read_text())
    state["counters"]["decisions_trained"] = "5000"
    trainer.write_text(json.dumps(state))
    meta_file = trainer.with_name("metadata.json")  # the hash made to match, as a hand edit would
    meta = json.loads(meta_file.read_text())
    meta["sha256"]["trainer.json"] = file_sha256(trainer)
    meta_file.write_text(json.dumps(sealed(meta)))
    assert cli.main(["--resume", str(run), "--more-minutes", "1"]) == 2
    assert capsys.readouterr().err.strip() == (f"samloc train: {trainer}: counters.decisions_trained is "
                                               f"\"5000\","
                                               " not a number")


def test_print_config_alone_prints_the_defaults_that_read_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--print-config", "ppo.lr=0.001"]) == 0
    text = capsys.readouterr().out
    (tmp_path / "c.yaml").write_text(text)
    assert load_config(tmp_path / "c.yaml") == load_config(None, ["ppo.lr=0.001"])


def test_seeds_start_one_run_per_seed_each_recording_its_own_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[int, Path, str]] = []

    def fake(cfg: TrainConfig, run_dir: Path, resume: bool, command: str, *a: object) -> pipeline.TrainResult:
        calls.append((cfg.seed, run_dir, command))
        summary = {"stop_reason": "max_minutes reached", "updates": 1, "games": 2, "decisions_trained": 3,
                   "checkpoint": str(run_dir / "checkpoints" / "ckpt_00000001")}
        return pipeline.TrainResult(run_dir, summary, {"curve": str(run_dir / "curve.png")})

    monkeypatch.setattr(cli, "run_pipeline", fake)
    assert cli.main(["--config", "quick", "--seeds", "0,2", "--run-dir", str(tmp_path / "sw"),
                     "ppo.lr=1e-4"]) == 0
    assert [(s, d) for s, d, _ in calls] == [(0, tmp_path / "sw" / "s0"), (2, tmp_path / "sw" / "s2")]
    assert calls[1][2] == f"samloc train --config quick --run-dir {tmp_path / 'sw'} ppo.lr=1e-4 seed=2"
    out = capsys.readouterr().out
    assert f"seeds side by side: samloc seeds {tmp_path / 'sw' / 's0'} {tmp_path / 'sw' / 's2'}" in out
    for bad, words in (("0,0", "a seed given twice"),
                       ("1,x", "seeds like 0,1,2: each must be a whole number, not 'x'")):
        assert cli.main(["--config", "quick", "--seeds", bad]) == 2
        assert words in capsys.readouterr().err
    assert cli.main(["--resume", str(tmp_path), "--seeds", "1,2"]) == 2
    assert capsys.readouterr().err.startswith("samloc train: --seeds starts new runs")
