"""Files and run folders (issue 62): a path whose parent is a file, a folder that cannot be written and a
path too long are one line from every command that writes; a resume takes nothing damaged; pruning
deletes only what the run made; ``eval --resume`` is keyed on the agent's files; an export is a pair or
nothing; deep ``rules --set`` values, the CPUs this process may use and the memory its workers need."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import sam_env.atomic as atomic
from sam_env.atomic import (UnsafeTarget, check_dir_target, check_folder, check_place, check_target,
                            write_atomic)
from samloc.cli import main as samloc
from tests.test_safe_writes import _one_line_error

DRY = ["--config", "quick", "--dry-run"]


# ---- parent folders ------------------------------------------------------------------------------------
@pytest.fixture
def a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A regular file ``afile`` in the working directory, where the commands' paths want a folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine\n")
    return tmp_path / "afile"


def test_the_checks_refuse_a_file_above_the_target(a_file: Path) -> None:
    for check in (check_target, check_folder, check_dir_target, check_place):
        for below in ("afile/x", "afile/deeper/x"):
            with pytest.raises(UnsafeTarget, match=r"afile is a file, not a folder; nothing was written$"):
                check(below)
    with pytest.raises(UnsafeTarget):
        write_atomic("afile/x.json", "{}")
    assert a_file.read_text() == "mine\n" and sorted(os.listdir(".")) == ["afile"]
    assert check_target("new/deeper/x.json") == Path("new/deeper/x.json")  # folders to be made: fine


def test_the_checks_refuse_names_and_paths_longer_than_the_file_system_takes(a_file: Path) -> None:
    with pytest.raises(UnsafeTarget, match=r"a name in the path is 4,096 bytes, over the file system's 255"):
        check_folder("a" * 4096)
    with pytest.raises(UnsafeTarget, match=r"the path is [\d,]+ bytes in full, over the system's 4,095"):
        check_target("ab/" * 1365 + "x")
    with pytest.raises(UnsafeTarget) as exc:
        check_folder("b" * 300)
    assert len(str(exc.value)) < 400  # the path is shortened in the line, not printed whole


def test_a_folder_that_cannot_be_written_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root may write anywhere, so the permission is what os.access answers (as a user would get it)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(atomic.os, "access",
                        lambda p, mode, **kw: False if Path(p) == ro else real(p, mode, **kw))
    for check, target in ((check_target, ro / "g.jsonl"), (check_folder, ro / "new" / "out"),
                          (check_folder, ro), (check_dir_target, ro / "bot")):
        with pytest.raises(UnsafeTarget, match="cannot be written"):
            check(target)
    assert check_target(tmp_path / "g.jsonl") == tmp_path / "g.jsonl"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_refused_for_real(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    with pytest.raises(UnsafeTarget, match="cannot be written"):
        check_target(ro / "g.jsonl")


@pytest.mark.parametrize("argv, codes", [
    (["demo", "--games", "2", "--out", "afile/g.jsonl"], (2,)),
    (["eval", "--agent", "random", "--opponents", "random", "--deals", "2", "--out", "afile/o"], (2,)),
    (["eval", "--agent", "random", "--opponents", "random", "--deals", "2", "--save-games", "afile/g.jsonl"],
     (2,)),
    (["league", "random", "heuristic", "--deals", "2", "--out", "afile/l"], (2,)),
    (["exploit", "heuristic", "--out", "afile/x"], (2,)),
    (["export", "checkpoints/standard", "--out", "afile/x.onnx"], (2,)),
    (["train", *DRY, "--run-dir", "afile/r"], (1,)),
    (["train", *DRY, "out_dir=afile/r"], (1,)),
    (["train", "--config", "quick", "out_dir=afile/r"], (2,)),
])
def test_every_command_refuses_a_file_above_its_output_in_one_line_error(
        a_file: Path, capsys: pytest.CaptureFixture[str], argv: list[str], codes: tuple[int, ...]) -> None:
    if argv[0] == "export":
        argv = [argv[0], str(Path(__file__).resolve().parent.parent / argv[1]), *argv[2:]]
    line = _one_line_error(capsys, samloc(argv), codes)
    assert "afile is a file, not a folder" in line and line.startswith(f"samloc {argv[0]}: ")
    assert a_file.read_text() == "mine\n" and sorted(os.listdir(".")) == ["afile"]


def test_a_4096_byte_out_dir_is_one_line_error(a_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for value in ("a" * 4096, "ab/" * 1365):
        line = _one_line_error(capsys, samloc(["train", *DRY, f"out_dir={value}"]), (1,))
        assert "over the" in line and len(line) < 600
    assert sorted(os.listdir(".")) == ["afile"]


def test_demo_refuses_a_read_only_folder_in_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(atomic.os, "access",
                        lambda p, mode, **kw: False if Path(p) == ro else real(p, mode, **kw))
    line = _one_line_error(capsys, samloc(["demo", "--games", "2", "--out", str(ro / "g.jsonl")]))
    assert line == (f"samloc demo: refusing to write {ro / 'g.jsonl'}: the folder {ro} cannot be written"
                    " (permission denied or a read-only file system); nothing was written")
    assert list(ro.iterdir()) == []


# ---- resume: config.yaml, eval.jsonl, counters -------------------------------------------------------
SMALL = ["warm_start.decisions=0", "eval.every_minutes=0", "model.hidden=32", "model.layers=1",
         "display=none", "total_decisions=10000", "max_minutes=2"]


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder with one checkpoint (update 4) of a small network, written by the trainer without Ray."""
    from training.config_load import load_config
    from training.launch import new_loop

    run = tmp_path_factory.mktemp("saved") / "run"
    tr = new_loop(load_config("quick", SMALL), run, log=lambda m: None)
    tr.counters.updates, tr.counters.decisions_trained = 4, 400
    tr.save()
    return run


@pytest.fixture
def run(saved_run: Path, tmp_path: Path) -> Path:
    """A copy of :func:`saved_run` to damage."""
    import shutil

    return Path(shutil.copytree(saved_run, tmp_path / "run", symlinks=True))


@pytest.mark.parametrize("damage", ["empty", "cut", "list"])
def test_a_damaged_config_yaml_resumes_with_the_checkpoints_config(
        run: Path, damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    from training.launch import resolve_launch

    cfg_file = run / "config.yaml"
    whole = cfg_file.read_text()
    damaged = {"empty": "", "cut": whole[:len(whole) // 3].rsplit("\n", 1)[0] + "\n", "list": "- 1\n"}[damage]
    cfg_file.write_text(damaged)
    launch = resolve_launch(None, str(run), ["max_minutes=3"], None, None)
    assert (launch.cfg.model.hidden, launch.cfg.model.layers, launch.cfg.max_minutes) == (32, 1, 3)
    err = capsys.readouterr().err
    assert err.startswith(f"samloc: {cfg_file}: ") and "resuming with the config in" in err
    assert "ckpt_00000004's metadata" in err and len(err.splitlines()) == 1
    assert samloc(["train", "--resume", str(run), "--dry-run"]) == 0
    assert cfg_file.read_text() == damaged  # the dry run writes nothing; the run writes the config back


def test_a_damaged_config_yaml_without_a_checkpoint_is_refused(run: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from training.config import ConfigError
    from training.launch import read_run_config

    shutil.rmtree(run / "checkpoints")
    (run / "config.yaml").write_text("")
    with pytest.raises(ConfigError, match=r"config.yaml: it is empty, and the run has no good checkpoint"):
        read_run_config(run)
    assert (run / "config.yaml").read_text() == ""


def _entry(updates: int) -> str:
    import json

    r = {"mean_score": 0.5, "ci95": [0.1, 0.9], "win_rate": 0.3}
    return json.dumps({"updates": updates, "decisions_trained": updates * 100, "wall_s": 1.0,
                       "results": {"random": r}}) + "\n"


@pytest.mark.parametrize("bad, why", [
    ("[1,2]\n", "it is [1, 2], not an evaluation"),
    ('{"updates": "x", "decisions_trained": 1, "results": {}}\n', 'updates is "x", not a count'),
    ('{"updates": 2, "decisions_trained": 1, "results": {"random": {"mean_score": "1.5"}}}\n',
     'results.random.mean_score is "1.5", not a number'),
    ('{"updates": 2, "decisions_trained": 1, "results": {"random": {"ci95": [1]}}}\n',
     "results.random.ci95 is [1], not two numbers"),
    ('{"updates": 2, "decisions_trained": 1, "results": 5}\n', "results is 5, not an object"),
    ('{"updates": 2, "decisi\n', "not JSON"),
])
def test_a_damaged_eval_jsonl_line_is_refused_at_the_dry_run_naming_it(
        run: Path, bad: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    log = run / "eval.jsonl"
    log.write_text(_entry(1) + bad + _entry(3))
    line = _one_line_error(capsys, samloc(["train", "--resume", str(run), "--dry-run"]))
    assert line.startswith(f"samloc train: {log} line 2: {why}") and line.endswith("fix or remove the line")
    assert log.read_text() == _entry(1) + bad + _entry(3)


def test_an_eval_jsonl_cut_short_at_its_end_still_resumes(run: Path) -> None:
    from training.run.runstate import read_eval_log

    (run / "eval.jsonl").write_text(_entry(1) + _entry(3)[:20])
    assert samloc(["train", "--resume", str(run), "--dry-run"]) == 0
    entries, cut = read_eval_log(run / "eval.jsonl")
    assert [e["updates"] for e in entries] == [1] and cut == 1


def _edit_counters(run: Path, **counters: object) -> Path:
    """The newest checkpoint's trainer.json with these counters, its hash made to match (a hand edit)."""
    import json

    from agents.nets.format import file_sha256, sealed

    trainer = run / "checkpoints" / "ckpt_00000004" / "trainer.json"
    state = json.loads(trainer.read_text())
    state["counters"] |= counters
    trainer.write_text(json.dumps(state))
    meta_file = trainer.with_name("metadata.json")
    meta = json.loads(meta_file.read_text())
    meta["sha256"]["trainer.json"] = file_sha256(trainer)
    meta_file.write_text(json.dumps(sealed(meta)))
    return trainer


@pytest.mark.parametrize("key", ["updates", "decisions_trained", "wall_s"])
def test_negative_counters_are_refused(run: Path, key: str, capsys: pytest.CaptureFixture[str]) -> None:
    trainer = _edit_counters(run, **{key: -4})
    for extra in (["--dry-run"], ["--more-minutes", "1"]):
        line = _one_line_error(capsys, samloc(["train", "--resume", str(run), *extra]))
        assert line == f"samloc train: {trainer}: counters.{key} is -4: a count is never negative"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["ckpt_00000004"]


def test_a_checkpoint_is_never_written_for_negative_counters(tmp_path: Path) -> None:
    from training.config_load import load_config
    from training.errors import TrainError
    from training.launch import new_loop

    tr = new_loop(load_config("quick", SMALL), tmp_path / "run", log=lambda m: None)
    tr.counters.updates = -4
    with pytest.raises(TrainError, match="counters.updates is -4: a count is never negative"):
        tr.save()
    assert not (tmp_path / "run" / "checkpoints").exists() or \
        list((tmp_path / "run" / "checkpoints").iterdir()) == []


# ---- pruning ---------------------------------------------------------------------------------------------
def test_pruning_removes_only_what_the_run_made_by_exact_names(tmp_path: Path) -> None:
    from agents.nets.checkpoint import prune
    from agents.nets.format import list_checkpoints

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoints").symlink_to(elsewhere)
    for name in ("ckpt_00000001", "ckpt_00000002", "ckpt_00000003", "ckpt_100000000"):
        (elsewhere / name).mkdir()
        (elsewhere / name / "metadata.json").write_text("{}")
        (elsewhere / name / ".model.safetensors.ab12_xyz.tmp").write_text("")  # a write cut short
    (elsewhere / "ckpt_00000002" / "notes.txt").write_text("mine")  # a user's file in a checkpoint
    users = ["notes.old", "keep.tmp.d", "ckpt_old", "ckpt_00000001.bak", ".ckpt_00000001.tmp",
             ".notes.abcdefgh.tmp"]
    for name in users:
        (elsewhere / name).mkdir()
        (elsewhere / name / "x").write_text("mine")
    (elsewhere / ".ckpt_00000007.k2j_x9ab.tmp").mkdir()  # a checkpoint the run was writing when killed
    (elsewhere / ".ckpt_00000003.abcdefgh.old").mkdir()
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == [
        "ckpt_00000001", "ckpt_00000002", "ckpt_00000003", "ckpt_100000000"]  # by update, not text
    prune(tmp_path / "run", keep=2)
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted(
        [*users, "ckpt_00000002", "ckpt_00000003", "ckpt_100000000"])
    assert all((elsewhere / name / "x").read_text() == "mine" for name in users)


# ---- eval --resume: keyed on the agent's files ----------------------------------------------------------
REPO = Path(__file__).resolve().parent.parent


def _bot(src: Path, dest: Path) -> Path:
    """``dest`` holding the weights and metadata of the shipped bot ``src`` (replacing what it held)."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for name in ("model.safetensors", "metadata.json"):
        shutil.copy(src / name, dest / name)
    return dest


def test_eval_resume_is_keyed_on_the_agents_files(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from agents.evaluation.evaluate import evaluate
    from agents.registry import make_agent

    bot, store = _bot(REPO / "checkpoints" / "standard", tmp_path / "bot"), tmp_path / "chunks"

    def stop(done: float, total: int) -> None:
        if done >= 8:
            raise KeyboardInterrupt

    run = dict(deals=24, seed=5, chunk=8, store=store, agent_spec=str(bot))
    with pytest.raises(KeyboardInterrupt):
        evaluate(make_agent(str(bot), seed=5), "heuristic", progress=stop, **run)
    key = json.loads((store / "key.json").read_text())
    assert sorted(key["agent_files"]) == [str(bot / "metadata.json"), str(bot / "model.safetensors")]
    assert all(len(h) == 64 for h in key["agent_files"].values())
    _bot(REPO / "checkpoints" / "expert", bot)  # another model in the same folder
    with pytest.raises(ValueError, match=r"holds chunks of another evaluation \(it differs in .*agent_files"):
        evaluate(make_agent(str(bot), seed=5), "heuristic", **run)
    assert len(list(store.glob("deals_*.npz"))) == 1  # nothing mixed in, nothing played
    with pytest.raises(ValueError, match="keys them on the agent's files; give the agent as its spec"):
        evaluate(make_agent(str(bot), seed=5), "heuristic", deals=8, seed=5, chunk=8, store=tmp_path / "c2")


def test_eval_command_keys_its_chunks_on_the_agents_files(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from agents.evaluation.eval_chunks import agent_files

    bot = _bot(REPO / "checkpoints" / "standard", tmp_path / "bot")
    assert samloc(["eval", "--agent", str(bot), "--opponents", "heuristic", "--deals", "8",
                   "--out", str(tmp_path / "out")]) == 0  # the command gives its spec: the chunks are keyed
    capsys.readouterr()
    run = tmp_path / "run"  # a run folder: the files of the checkpoint it resolves to
    _bot(REPO / "checkpoints" / "standard", run / "checkpoints" / "ckpt_00000001")
    files = agent_files(str(run))
    assert sorted(files) == [str(run / "checkpoints" / "ckpt_00000001" / n)
                             for n in ("metadata.json", "model.safetensors")]


# ---- export: the model and its sidecar together -----------------------------------------------------------
def _full_disk_on(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """The ``nth`` file flushed to disk from now on fails as a full disk does."""
    import errno

    real, calls = os.fsync, [0]

    def fsync(fd: int) -> None:
        calls[0] += 1
        if calls[0] == nth:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)


@pytest.mark.parametrize("nth", [1, 2])
def test_write_together_replaces_neither_file_on_a_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             nth: int) -> None:
    a, b = tmp_path / "bot.json", tmp_path / "bot.onnx"
    atomic.write_together([(a, b"old json"), (b, b"old model")])
    _full_disk_on(monkeypatch, nth)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_together([(a, b"new json"), (b, b"new model")])
    assert (a.read_bytes(), b.read_bytes()) == (b"old json", b"old model")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bot.json", "bot.onnx"]  # no temporary left


@pytest.mark.parametrize("nth", [1, 2])
def test_export_on_a_full_disk_leaves_no_lone_model(saved_run: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], nth: int) -> None:
    pytest.importorskip("onnx")
    from agents.nets import export as export_mod

    ckpt = saved_run / "checkpoints" / "ckpt_00000004"
    out = tmp_path / "bot.onnx"
    real = export_mod.write_together

    def full_disk_then_write(files: list, mode: int = 0o644) -> None:
        _full_disk_on(monkeypatch, nth)  # the export's own temporary model is not flushed through here
        real(files, mode)

    monkeypatch.setattr(export_mod, "write_together", full_disk_then_write)
    line = _one_line_error(capsys, samloc(["export", str(ckpt), "--out", str(out), "--samples", "10"]), (1,))
    assert "No space left on device" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # neither file, nor any temporary
    monkeypatch.setattr(export_mod, "write_together", real)
    monkeypatch.setattr(atomic.os, "fsync", os.fsync)
    assert samloc(["export", str(ckpt), "--out", str(out), "--samples", "10"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bot.json", "bot.onnx"]


# ---- rules --set: values nested deep ----------------------------------------------------------------------
@pytest.mark.parametrize("value", ["[" * 900 + "]" * 900, "{a: " * 900 + "1" + "}" * 900,
                                   "[" * 20 + "]" * 20])
def test_rules_set_nested_deep_is_one_line_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line_error(capsys, samloc(["rules", "hoi_quan_bai", "--set", f"chop_two={value}"]))
    assert line.startswith("samloc rules: --set chop_two: nested ") and len(line) < 300


def test_a_rule_set_refuses_values_nested_deeper_than_any_parameter() -> None:
    from sam_env.rules import MAX_NESTING, RuleSet, RulesError, nesting

    deep: list = []
    for _ in range(5000):  # deeper than Python's recursion limit: counted without recursion
        deep = [deep]
    assert nesting(deep) == MAX_NESTING + 1 and nesting([[1, 2], 3]) == 2 and nesting(7) == 0
    with pytest.raises(RulesError, match=f"rule parameter chop_two is nested more than {MAX_NESTING} levels"):
        RuleSet.parse({"preset": "hoi_quan_bai", "chop_two": deep})


# ---- rollout.num_workers: auto: the CPUs this process may use ------------------------------------------
@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cgroup file system and a machine of 8 CPUs on which this process may use 4."""
    import sam_env.machine as m

    monkeypatch.setattr(m, "CGROUP_ROOT", tmp_path / "cgroup")
    monkeypatch.setattr(m.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(m.os, "cpu_count", lambda: 8)
    (tmp_path / "cgroup").mkdir()
    return tmp_path / "cgroup"


def test_usable_cpus_are_the_affinity_capped_by_the_cgroup_quota(machine: Path) -> None:
    from sam_env.machine import cgroup_cpu_quota, usable_cpus

    assert usable_cpus() == 4 and cgroup_cpu_quota() is None  # the affinity, not the machine's 8
    (machine / "cpu").mkdir()  # cgroup v1
    (machine / "cpu" / "cpu.cfs_quota_us").write_text("250000\n")
    (machine / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota() == 2.5 and usable_cpus() == 2
    (machine / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert usable_cpus() == 4
    (machine / "cpu.max").write_text("50000 100000\n")  # cgroup v2 first: half a CPU is one process
    assert cgroup_cpu_quota() == 0.5 and usable_cpus() == 1
    (machine / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota() is None and usable_cpus() == 4


def test_auto_sizes_to_the_cpus_this_process_may_use(machine: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import sam_env.machine as m

    monkeypatch.setattr(m.os, "sched_getaffinity", lambda pid: {0})  # taskset -c 0
    assert samloc(["train", *DRY]) == 0
    out = capsys.readouterr().out
    assert "on the embedded Ray (1 CPUs)" in out, out
    assert "rollout.num_workers=auto → 1 (1 CPUs - 1 learner" in out, out
    monkeypatch.setattr(m.os, "sched_getaffinity", lambda pid: set(range(8)))
    (machine / "cpu.max").write_text("600000 100000\n")  # docker --cpus 6
    assert samloc(["train", *DRY, "eval.every_minutes=0", "eval.every_updates=0"]) == 0
    assert "rollout.num_workers=auto → 5 (6 CPUs - 1 learner" in capsys.readouterr().out


# ---- memory: a worker process each ------------------------------------------------------------------------
def test_more_worker_processes_than_memory_holds_are_refused(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from training import launch

    monkeypatch.setattr(launch, "available_memory", lambda: 8 * 2**30)
    argv = ["train", *DRY, "rollout.num_workers=500", "rollout.cpus_per_worker=0.001"]
    line = _one_line_error(capsys, samloc(argv), (1,))
    assert line.startswith("samloc train: rollout.num_workers=500: 500 worker processes need about"), line
    fit = int(re.search(r"this machine has 8\.0 GiB available \(at most (\d+) rollout workers here", line)[1])
    assert 5 < fit < 20  # about half a GiB each
    assert samloc(["train", *DRY, f"rollout.num_workers={fit}", "rollout.cpus_per_worker=0.01"]) == 0
    capsys.readouterr()
    line = _one_line_error(capsys, samloc(["train", *DRY, f"rollout.num_workers={fit + 1}",
                                     "rollout.cpus_per_worker=0.01"]), (1,))
    assert f"at most {fit} rollout workers here" in line
    monkeypatch.setattr(launch, "available_memory", lambda: 700 * 2**20)  # auto's one worker does not fit
    line = _one_line_error(capsys, samloc(["train", *DRY]), (1,))
    assert line.startswith("samloc train: rollout.num_workers=1: 1 worker processes need about"), line
