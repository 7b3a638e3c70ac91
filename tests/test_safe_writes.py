"""Nothing outside the run is touched: every command that writes refuses, in one line and before any
work, a target that is not a regular file (a device node, a FIFO, a symbolic link, a folder), ``.`` and
``..``, and a ``checkpoint.export_to`` that holds anything but this run's bot; what was there stays as it
was.  A damaged newest checkpoint is skipped with one warning line by serve, eval and export alike,
whichever of its files is damaged.  A Ctrl-C during the evaluation at the end of a run leaves a
checkpoint that loads."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
from pathlib import Path
from typing import Any, Callable

import pytest

from agents.nets import format as ckfmt
from agents.nets.checkpoint import copy_checkpoint, load_checkpoint, load_trainer_state, save_checkpoint
from sam_env.atomic import (UnsafeTarget, check_dir_target, check_folder, check_target, replace_dir,
                            write_atomic)
from samloc.cli import main as samloc

REPO = Path(__file__).resolve().parent.parent
SMALL = ["warm_start.decisions=0", "eval.every_minutes=0", "model.hidden=32", "model.layers=1",
         "display=none",
         "total_decisions=10000", "max_minutes=2"]


# ---- the targets: a device node (a FIFO when not root), a link to a file, a full folder ------------------
def _snapshot(p: Path) -> Any:
    """What a path is and holds, without following a link or opening a device."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(p))
    if stat.S_ISDIR(st.st_mode):
        return ("dir", st.st_ino, sorted((c.name, _snapshot(c)) for c in p.iterdir()))
    if stat.S_ISREG(st.st_mode):
        return ("file", st.st_ino, p.read_bytes())
    return ("special", stat.S_IFMT(st.st_mode), st.st_rdev, st.st_ino)


def _device(path: Path) -> Path:
    """A character device like /dev/null when root (a container's usual user), else a FIFO: both are
    "not a regular file", the case the atomic write used to replace."""
    if os.geteuid() == 0:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    else:
        os.mkfifo(path)
    return path


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "targets"
    root.mkdir()
    victim = root / "victim.txt"
    victim.write_text("not yours\n")
    (root / "link").symlink_to(victim)
    full = root / "full"
    full.mkdir()
    (full / "keep.txt").write_text("keep me\n")
    (full / "sub").mkdir()
    _device(root / "device")
    return {"device": root / "device", "symlink": root / "link", "folder": full}


def _one_line_error(capsys: pytest.CaptureFixture[str], rc: int, codes: tuple[int, ...] = (2,)) -> str:
    """The one line on standard error, after checking the exit status (``codes``: the usage error's 2;
    ``samloc train --dry-run`` reports every problem it finds with 1)."""
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert rc in codes, (rc, out.err)
    assert "Traceback" not in out.err + out.out
    assert len(lines) == 1, out.err
    return lines[0]


def _ckpt(tmp_path: Path) -> Path:
    """A small checkpoint (no Ray): what export and belief read."""
    from training.config_load import load_config
    from training.launch import new_loop

    tr = new_loop(load_config("quick", SMALL), tmp_path / "src_run", log=lambda m: None)
    tr.counters.updates = 3
    return tr.save()


# Every command that writes a FILE the command line names: argv with the target in it.
FILE_COMMANDS: dict[str, Callable[[str, Path], list[str]]] = {
    "demo --out": lambda t, tmp: ["demo", "--games", "2", "--out", t],
    "eval --save-games": lambda t, tmp: ["eval", "--agent", "random", "--opponents", "random", "--deals", "2",
                                         "--rules", "hoi_quan_bai", "--players", "4",
                                         "--out", str(tmp / "report"), "--save-games", t],
    "export --out": lambda t, tmp: ["export", str(_ckpt(tmp)), "--out", t, "--samples", "10"],
    "seeds --png": lambda t, tmp: ["seeds", str(tmp / "no_run"), "--png", t],
}
# Every command that writes into a FOLDER the command line names (run and report folders).
FOLDER_COMMANDS: dict[str, Callable[[str, Path], list[str]]] = {
    "eval --out": lambda t, tmp: ["eval", "--agent", "random", "--opponents", "random", "--deals", "2",
                                  "--rules", "hoi_quan_bai", "--players", "4", "--out", t],
    "league --out": lambda t, tmp: ["league", "random", "heuristic", "--deals", "2", "--bootstrap", "100",
                                    "--out", t],
    "exploit --out": lambda t, tmp: ["exploit", "random", "--minutes", "1", "--out", t],
    "bench --to-strength --out": lambda t, tmp: ["bench", "--to-strength", "--minutes", "1", "--seeds", "1",
                                                 "--out", t],
    "train --run-dir": lambda t, tmp: ["train", "--config", "quick", "--run-dir", t, *SMALL],
    "train --run-dir --dry-run": lambda t, tmp: ["train", "--config", "quick", "--run-dir", t,
                                                 "--dry-run", *SMALL],
    "train checkpoint.export_to": lambda t, tmp: ["train", "--config", "quick", "--run-dir", str(tmp / "run"),
                                                  f"checkpoint.export_to={t}", *SMALL],
    "train checkpoint.export_to --dry-run": lambda t, tmp: ["train", "--config", "quick", "--dry-run",
                                                            "--run-dir",
                                                            str(tmp / "run"),
                                                            f"checkpoint.export_to={t}", *SMALL],
}
# A folder that holds something else is refused where the folder is replaced whole (or must be new).
REPLACED_WHOLE = {"bench --to-strength --out", "train checkpoint.export_to",
                  "train checkpoint.export_to --dry-run"}


def _codes(argv: list[str]) -> tuple[int, ...]:
    return (1,) if "--dry-run" in argv else (2,)


def _no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused target must be refused before Ray starts or anything trains."""
    import ray

    from training.run import loop

    def refuse(*a: object, **kw: object) -> None:
        raise AssertionError("started work before refusing the target")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(loop.RunLoop, "run", refuse)


@pytest.mark.parametrize("kind", ["device", "symlink", "folder"])
@pytest.mark.parametrize("name", list(FILE_COMMANDS))
def test_a_file_target_that_is_not_a_regular_file_is_refused_and_left_alone(
        name: str, kind: str, places: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    target = places[kind]
    argv = FILE_COMMANDS[name](str(target), tmp_path)
    capsys.readouterr()
    before = _snapshot(target.parent)
    line = _one_line_error(capsys, samloc(argv))
    assert str(target) in line and "refusing" in line
    assert _snapshot(target.parent) == before  # the device, the link, its file and the folder: untouched


@pytest.mark.parametrize("name,kind", [(n, k) for n in FOLDER_COMMANDS for k in ("device",
                                                                                 "symlink", "folder")
                                       if k != "folder" or n in REPLACED_WHOLE])  # the others: the test below
def test_a_folder_target_that_is_not_a_folder_of_its_own_is_refused_and_left_alone(
        name: str, kind: str, places: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _no_training(monkeypatch)
    target = places[kind]
    argv = FOLDER_COMMANDS[name](str(target), tmp_path)
    before = _snapshot(target.parent)
    line = _one_line_error(capsys, samloc(argv), _codes(argv))
    assert str(target) in line and "refusing" in line
    assert _snapshot(target.parent) == before


@pytest.mark.parametrize("dots", [".", ".."])
@pytest.mark.parametrize("name", [*FILE_COMMANDS, *FOLDER_COMMANDS])
def test_dot_and_dot_dot_are_refused_and_nothing_there_changes(
        name: str, dots: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _no_training(monkeypatch)
    here = tmp_path / "top" / "here"
    here.mkdir(parents=True)
    (here / "mine.txt").write_text("x")
    argv = {**FILE_COMMANDS, **FOLDER_COMMANDS}[name](dots, tmp_path)
    monkeypatch.chdir(here)
    before = _snapshot(tmp_path / "top")
    line = _one_line_error(capsys, samloc(argv), _codes(argv))
    assert "refusing" in line and repr(dots) in line
    assert _snapshot(tmp_path / "top") == before


def test_a_report_folder_that_holds_other_files_keeps_them(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "full"
    out.mkdir()
    (out / "keep.txt").write_text("keep me\n")
    assert samloc(FOLDER_COMMANDS["eval --out"](str(out), tmp_path)) == 0
    assert (out / "keep.txt").read_text() == "keep me\n"
    assert {"result.json", "report.md", "scores.png", "keep.txt"} <= {p.name for p in out.iterdir()}


def test_belief_refuses_its_files_when_they_are_not_regular_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = _ckpt(tmp_path)
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    for make in (lambda p: p.symlink_to(victim), _device, lambda p: p.mkdir()):
        make(ckpt / ckfmt.BELIEF_META)
        before = _snapshot(ckpt)
        line = _one_line_error(capsys, samloc(["belief", str(ckpt), "--deals", "10"]))
        assert ckfmt.BELIEF_META in line and "refusing" in line
        assert _snapshot(ckpt) == before and victim.read_text() == "{}"
        p = ckpt / ckfmt.BELIEF_META
        p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()


# ---- the one atomic write ----------------------------------------------------------------------------
def test_the_atomic_write_refuses_every_target_but_a_regular_file(places: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    for bad in [*places.values(), "", ".", "..", "/", str(tmp_path) + "/.", str(tmp_path) + "/.."]:
        with pytest.raises(UnsafeTarget) as exc:
            write_atomic(bad, "x")
        assert "\n" not in str(exc.value) and isinstance(exc.value, OSError) \
            and isinstance(exc.value, ValueError)
    assert (tmp_path / "targets" / "victim.txt").read_text() == "not yours\n"
    assert stat.S_ISLNK(os.lstat(places["symlink"]).st_mode)
    assert sorted(p.name for p in tmp_path.joinpath("targets").iterdir()) == ["device", "full", "link",
                                                                              "victim.txt"]
    ok = tmp_path / "new.txt"
    write_atomic(ok, "one")
    write_atomic(ok, "two")  # a regular file is replaced
    assert ok.read_text() == "two" and check_target(ok) == ok
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_folder_checks(places: dict[str, Path], tmp_path: Path) -> None:
    assert check_folder(places["folder"]) == places["folder"]  # files go into an existing folder
    for bad in (places["device"], places["symlink"], ".", "..", ""):
        with pytest.raises(UnsafeTarget):
            check_folder(bad)
    with pytest.raises(UnsafeTarget, match="refusing to use the folder .*: it holds files"):
        check_dir_target(places["folder"])
    (tmp_path / "empty").mkdir()
    assert check_dir_target(tmp_path / "empty") == tmp_path / "empty"
    tmp = tmp_path / "made"
    tmp.mkdir()
    (tmp / "a").write_text("a")
    with pytest.raises(UnsafeTarget):
        replace_dir(tmp, places["folder"])
    assert not tmp.exists() and (places["folder"] / "keep.txt").read_text() == "keep me\n"


# ---- checkpoint.export_to ------------------------------------------------------------------------------
def test_export_to_replaces_only_a_bot_of_this_run(tmp_path: Path) -> None:
    ckpt = _ckpt(tmp_path)
    bot = tmp_path / "bot"
    copy_checkpoint(ckpt, bot, {"eval_report.json": {"x": 1}})
    load_checkpoint(bot)
    copy_checkpoint(ckpt, bot)  # its own bot again: replaced
    assert sorted(p.name for p in bot.iterdir()) == [ckfmt.META_FILE, ckfmt.MODEL_FILE]
    (bot / "notes.txt").write_text("mine")
    with pytest.raises(UnsafeTarget, match="holds files that are not a bot of the run"):
        copy_checkpoint(ckpt, bot)
    assert (bot / "notes.txt").read_text() == "mine"
    other = tmp_path / "other"
    shutil.copytree(bot, other)
    (other / "notes.txt").unlink()
    meta = json.loads((other / ckfmt.META_FILE).read_text())
    meta["name"] = "another run"
    (other / ckfmt.META_FILE).write_text(json.dumps(meta))
    with pytest.raises(UnsafeTarget):  # another run's bot is not this one's to replace
        copy_checkpoint(ckpt, other)
    for dots in (".", ".."):
        with pytest.raises(UnsafeTarget):
            copy_checkpoint(ckpt, dots)
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp" in p.name or ".old" in p.name) == []


def test_the_dry_run_refuses_export_to_as_the_run_would(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _no_training(monkeypatch)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("keep")
    for dry in (["--dry-run"], []):
        argv = ["train", "--config", "quick", "--run-dir", str(tmp_path / "run"), *dry,
                f"checkpoint.export_to={full}", *SMALL]
        line = _one_line_error(capsys, samloc(argv), _codes(argv))
        assert line.startswith("samloc train: checkpoint.export_to: refusing to use the folder") \
            and str(full) in line
    assert (full / "keep.txt").read_text() == "keep" and not (tmp_path / "run").exists()


# ---- metadata.json under the checkpoint's hashes -----------------------------------------------------
def test_metadata_is_covered_by_the_hashes_and_old_checkpoints_still_verify(tmp_path: Path) -> None:
    ckpt = _ckpt(tmp_path)
    raw = json.loads((ckpt / ckfmt.META_FILE).read_text())
    assert raw["sha256"][ckfmt.META_FILE] == ckfmt.metadata_digest(raw)
    ckfmt.verify(ckpt, trainer=True)
    raw["games"] = 12345  # still valid JSON, still a plausible checkpoint: only the hash can tell
    (ckpt / ckfmt.META_FILE).write_text(json.dumps(raw))
    with pytest.raises(ckfmt.CheckpointError, match="metadata.json is damaged"):
        ckfmt.verify(ckpt)
    for shipped in ("checkpoints/standard", "checkpoints/expert", "checkpoints/all_tables",
                    "docs/to_strength/compare_120/ppo", "docs/to_strength/compare_120/dmc"):
        assert ckfmt.META_FILE not in json.loads((REPO / shipped / ckfmt.META_FILE).read_text())["sha256"]
        load_checkpoint(REPO / shipped)  # written before the metadata's own hash: read as before


# ---- a damaged newest checkpoint: serve, eval and export fall back alike, with one warning line --------
@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder with two checkpoints, each with its exported policy.onnx."""
    from agents.nets.export import export
    from training.config_load import load_config
    from training.launch import new_loop

    run = tmp_path_factory.mktemp("damaged") / "run"
    tr = new_loop(load_config("quick", SMALL), run, log=lambda m: None)
    for updates in (10, 20):
        tr.counters.updates = updates
        export(tr.save(), samples=10)
    return run


def _damage(ckpt: Path, name: str) -> None:
    p = ckpt / name
    if name == ckfmt.META_FILE:  # valid JSON that says something else
        raw = json.loads(p.read_text())
        raw["decisions_trained"] = 999
        p.write_text(json.dumps(raw, indent=2))
    else:  # one byte flipped in the middle
        blob = bytearray(p.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        p.write_bytes(bytes(blob))


def _serve_loads(run: Path) -> str:
    from agents.serving.bots import Bots

    return str(Bots.load([str(run)]).bots[0].checkpoint)


@pytest.mark.parametrize("damaged", [ckfmt.MODEL_FILE, ckfmt.META_FILE, ckfmt.ONNX_FILE])
@pytest.mark.parametrize("command", ["serve", "eval", "export"])
def test_a_damaged_newest_checkpoint_is_skipped_with_one_warning_line(
        command: str, damaged: str, two_checkpoints: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    older, newest = ckfmt.list_checkpoints(run)
    _damage(newest, damaged)
    capsys.readouterr()
    if command == "serve":
        used = _serve_loads(run)
        assert Path(used).parent == older  # its policy.onnx, as for an undamaged run
    elif command == "eval":
        assert samloc(["eval", "--agent", str(run), "--opponents", "random", "--deals", "2",
                       "--out", str(tmp_path / "rep")]) == 0
        used = json.loads((tmp_path / "rep" / "result.json").read_text())["agent"]
    else:
        assert samloc(["export", str(run), "--out", str(tmp_path / "x.onnx"), "--samples", "10"]) == 0
        used = json.loads((tmp_path / "x.json").read_text())["checkpoint"]
        assert Path(used) == older
    err = [ln for ln in capsys.readouterr().err.splitlines() if "skipping" in ln]
    assert len(err) == 1 and str(newest) in err[0] and damaged in err[0], err
    assert "Traceback" not in err[0]


def test_an_undamaged_run_folder_warns_of_nothing(two_checkpoints: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert ckfmt.resolve(two_checkpoints) == ckfmt.list_checkpoints(two_checkpoints)[-1]
    assert Path(_serve_loads(two_checkpoints)).parent == ckfmt.list_checkpoints(two_checkpoints)[-1]
    assert "skipping" not in capsys.readouterr().err


# ---- Ctrl-C at the end of a run ----------------------------------------------------------------------------
TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "rollout.num_workers=1", "model.hidden=32",
        "model.layers=1", "rollout.envs_per_worker=32", "rollout.steps_per_rollout=8",
        "ppo.batch_decisions=200",
        "ppo.minibatch=128", "ppo.epochs=1", "rollout.snapshot_every=20", "rollout.pool_size=3",
        "eval.every_updates=1", "eval.deals=16", "eval.final_deals=16", "checkpoint.every_updates=100000",
        "checkpoint.every_minutes=0", "display=none", "log_every_s=1", "max_minutes=0",
        "total_decisions=2000",
        "belief.deals=0"]


@pytest.mark.slow
def test_ctrl_c_during_the_evaluation_at_the_end_leaves_a_checkpoint_that_loads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """No checkpoint is due during the loop; the evaluation launched at step 0 is still in flight when it
    ends (never polled), and two Ctrl-C's arrive while it is waited for: the second stops at once."""
    from training.run.evaluation import PeriodicEval

    finish = PeriodicEval.finish
    seen: dict[str, Any] = {}

    def interrupted(self: PeriodicEval) -> None:
        seen["in_flight"] = self.in_flight is not None
        seen["checkpoints"] = list(ckfmt.list_checkpoints(run))
        os.kill(os.getpid(), signal.SIGINT)   # the first: the run ends as it would anyway
        os.kill(os.getpid(), signal.SIGINT)   # the second: at once
        finish(self)

    monkeypatch.setattr(PeriodicEval, "poll", lambda self: None)
    monkeypatch.setattr(PeriodicEval, "finish", interrupted)
    run = tmp_path / "run"
    rc = samloc(["train", "--config", "quick", "--run-dir", str(run), *TINY])
    err = capsys.readouterr().err
    assert rc == 130 and "interrupted; the checkpoints written stay" in err, err
    assert seen["in_flight"] and len(seen["checkpoints"]) == 1  # written before the evaluation was waited for
    (ckpt,) = ckfmt.list_checkpoints(run)
    net, meta = load_checkpoint(ckpt)
    load_trainer_state(ckpt)
    assert meta.updates >= 1 and meta.decisions_trained >= 2000


@pytest.mark.slow
def test_ctrl_c_during_the_final_evaluation_leaves_the_final_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from training.tools import pipeline

    def interrupted(*a: object, **kw: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # outside the loop's handling: a KeyboardInterrupt
        raise AssertionError("the signal did not stop the final evaluation")

    monkeypatch.setattr(pipeline, "evaluate_weights", interrupted)
    run = tmp_path / "run"
    # Ctrl-C's own handler, also when pytest was started in the background (SIGINT ignored there)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rc = samloc(["train", "--config", "quick", "--run-dir", str(run), *TINY, "eval.every_updates=0"])
    finally:
        signal.signal(signal.SIGINT, before)
    assert rc == 130, capsys.readouterr().err
    ckpts = ckfmt.list_checkpoints(run)
    assert ckpts and load_checkpoint(ckpts[-1])[1].decisions_trained >= 2000
    load_trainer_state(ckpts[-1])


def test_save_checkpoint_never_replaces_a_folder_that_is_not_its_runs(tmp_path: Path) -> None:
    ckpt = _ckpt(tmp_path)
    net, meta = load_checkpoint(ckpt)
    dest = tmp_path / "x" / "ckpt_00000003"
    dest.mkdir(parents=True)
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(UnsafeTarget):
        save_checkpoint(dest, net, meta.raw)
    assert [p.name for p in dest.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in dest.parent.iterdir()) == ["ckpt_00000003"]  # no temporary left
