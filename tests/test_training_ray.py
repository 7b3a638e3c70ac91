"""The whole training pipeline on Ray, at a tiny scale: smoke run, worker death, kill + resume, two nodes,
placement (workers that do not fit, a GPU that is not there), the policy lag bound, a private local Ray,
and one-line errors for a read-only run folder and a full disk."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from agents.nets import format as ckfmt
from training.config_load import load_config
from training.errors import TrainError
from training.launch import new_loop
from training.run.loop import RunLoop as Trainer

REPO = Path(__file__).resolve().parent.parent
TINY = ["warm_start.decisions=0", "eval.every_minutes=0", "rollout.num_workers=1", "model.hidden=32",
        "model.layers=1", "rollout.envs_per_worker=32", "rollout.steps_per_rollout=8",
        "ppo.batch_decisions=200", "ppo.minibatch=128", "ppo.epochs=1", "rollout.snapshot_every=20",
        "rollout.pool_size=3", "eval.every_updates=100", "eval.deals=16", "eval.final_deals=0",
        "checkpoint.every_updates=50", "display=none", "log_every_s=1", "max_minutes=0"]

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"), pytest.mark.slow]  # training runs


def _scalars(run_dir: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_smoke_run_of_the_whole_pipeline(tmp_path: Path) -> None:
    """A few hundred updates through `samloc train`: checkpoints, TensorBoard, evaluations, export."""
    from samloc.commands.train import main

    run = tmp_path / "run"
    rc = main(["--config", "quick", "--run-dir", str(run), *TINY, "total_decisions=75000",
               "eval.opponents=[random,heuristic,snapshot]", "eval.final_deals=16",
               f"checkpoint.export_to={tmp_path / 'bot'}",
               "belief.deals=40", "belief.hidden=16", "belief.epochs=1"])
    assert rc == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["updates"] >= 300 and summary["decisions_trained"] >= 75000
    assert summary["worker_failures"] == 0
    # the final checkpoint verifies and holds exactly the counters of the summary
    meta = ckfmt.verify(Path(summary["checkpoint"]), trainer=True)
    assert meta.updates == summary["updates"] and meta.decisions_trained == summary["decisions_trained"]
    assert meta.obs_version >= 1 and meta.action_table_version >= 1 and meta.git_commit
    assert len(ckfmt.list_checkpoints(run)) == 3  # keep=3
    tags = _scalars(run)
    for tag in ("charts/games", "charts/decisions_per_s", "charts/updates_per_s", "losses/policy",
                "losses/value", "losses/entropy", "eval/random/mean_la", "eval/heuristic/win_rate",
                "charts/SPS", "charts/episodic_return", "charts/episodic_length", "losses/policy_loss",
                "losses/value_loss", "losses/approx_kl", "losses/clipfrac", "losses/explained_variance"):
        assert tag in tags, tag  # the trainer's own, and CleanRL's
    assert max(tags["charts/games"]) == summary["games"]
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    ups = [e["updates"] for e in evals]  # one evaluation at a time: a due one is skipped while one runs
    assert ups and ups == sorted(set(ups)) and all(u % 100 == 0 for u in ups)
    assert ups[0] == 0 and evals[0]["decisions_trained"] == 0  # the curve starts at step 0
    assert _points(run)["eval/random/mean_la"][0][0] == 0
    assert set(evals[-1]["results"]) == {"random", "heuristic", "snapshot"}
    assert (run / "config.yaml").is_file() and json.loads((run / "run.json").read_text())["git_commit"]
    report = json.loads((tmp_path / "bot" / "eval_report.json").read_text())
    assert report["deals"] == 16 and report["results"]["random"]["zero_sum"]
    from agents import make_agent
    assert make_agent(str(tmp_path / "bot")).act_batch  # the exported bot loads as an agent
    # the hand belief was learned on the final checkpoint and travels with the bot to its search
    assert summary["belief"]["decisions"] > 0 and summary["belief"]["holdout_nll"] > 0
    belief = json.loads((tmp_path / "bot" / "belief.json").read_text())
    assert belief["deals"] == 40 and belief["hidden"] == 16 and belief["command"].startswith("samloc train")
    assert (make_agent(f"{tmp_path / 'bot'}+search:candidates=2,worlds=2,horizon=1,critic=0").belief
            is not None)


def _points(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the run's own event files as (step, value), as TensorBoard shows them (after its
    purges of out-of-date points)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_a_run_and_its_resume_log_cleanly_and_leave_the_served_bot_and_its_curve(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Two sittings: each ends with ONNX in the final checkpoint (and in export_to), curve.png and the final
    evaluation in TensorBoard; the second appends to the first's scalars without losing or reordering any."""
    from agents.players.onnx_agent import OnnxAgent
    from samloc.commands.train import main

    run, bot = tmp_path / "run", tmp_path / "bot"
    assert main(["--config", "quick", "--run-dir", str(run), *TINY, "total_decisions=2500",
                 "eval.every_updates=4", "eval.final_deals=8", "learner.max_policy_lag=2",
                 f"checkpoint.export_to={bot}"]) == 0
    out = capsys.readouterr().out
    summary = json.loads((run / "summary.json").read_text())
    ckpt = Path(summary["checkpoint"])
    for label, path in (("served bot (ONNX):", ckpt / "policy.onnx"), ("training curve:", run / "curve.png"),
                        ("final evaluation:", run / "eval_report.json")):
        assert re.search(rf"^{re.escape(label)} +{re.escape(str(path))}$", out, re.M), out
        assert path.is_file()
    assert (run / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    served = OnnxAgent(bot / "policy.onnx")
    served.check_exported_from(bot)  # the copy is the export of the bot's own weights
    assert (bot / "policy.onnx").read_bytes() == (ckpt / "policy.onnx").read_bytes()
    first = _points(run)
    report = json.loads((run / "eval_report.json").read_text())
    final_step = summary["decisions_trained"]
    for tag in ("charts/learning_rate", "losses/explained_variance", "losses/grad_norm",
                "eval/random/ci95_low", "eval/random/ci95_high", "eval/heuristic/mean_la"):
        assert first.get(tag), tag
    final_random = report["results"]["random"]["mean_score"]
    assert first["eval/random/final_mean_la"] == [(final_step, pytest.approx(final_random))]
    lo, hi = report["results"]["heuristic"]["ci95"]
    assert first["eval/heuristic/final_ci95_low"][0][1] == pytest.approx(lo)
    assert first["eval/heuristic/final_ci95_high"][0][1] == pytest.approx(hi)
    # the hparams metric is the final evaluation's, in the run itself (no sub-run per sitting)
    assert first["hparam/eval_random_mean_la"] == first["eval/random/final_mean_la"]
    assert not [p for p in run.iterdir() if p.is_dir() and p.name != "checkpoints"]
    # the policy lag: 0 for the first update (asked and delivered before it), never above max_policy_lag
    lags = [v for _, v in first["losses/policy_lag_max"]]
    assert lags[0] == 0 and max(lags) <= 2

    import training.tools.pipeline
    drawn: list[list[dict]] = []
    real_plot = training.tools.pipeline.plot_curve
    monkeypatch.setattr(training.tools.pipeline, "plot_curve",
                        lambda history, *a: drawn.append(history) or real_plot(history, *a))
    assert main(["--resume", str(run), "--more-decisions", "1500"]) == 0
    capsys.readouterr()
    drawn_updates = [e["updates"] for e in drawn[0]]  # the resumed sitting's curve: both sittings' points
    assert min(drawn_updates) == 0 and max(drawn_updates) > summary["updates"], drawn_updates
    second = _points(run)
    again = json.loads((run / "summary.json").read_text())
    assert again["decisions_trained"] >= final_step + 1500
    for tag, pts in second.items():
        steps = [st for st, _ in pts]
        assert steps == sorted(set(steps)), f"{tag}: steps {steps} do not rise"
        assert pts[:len(first.get(tag, []))] == first.get(tag, []), f"{tag}: points of the first sitting lost"
    for tag in ("charts/games", "losses/policy", "eval/random/final_mean_la", "hparam/eval_random_mean_la"):
        assert len(second[tag]) > len(first[tag]), tag
    assert max(st for st, _ in second["charts/games"]) == again["decisions_trained"]
    assert [st for st, _ in second["eval/random/final_mean_la"]] == [final_step, again["decisions_trained"]]


def test_a_killed_worker_is_restarted_and_nothing_is_counted_twice(tmp_path: Path) -> None:
    cfg = load_config("quick", [*TINY, "total_decisions=12000", "rollout.num_workers=2",
                                "rollout.cpus_per_worker=0.5"])
    killed: list[int] = []

    def killer(tr: Trainer) -> None:
        if tr.counters.updates in (5, 25) and len(killed) < 2:
            pid = tr.placement[len(killed) % 2]["pid"]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    tr = new_loop(cfg, tmp_path / "run", on_update=killer, log=lambda m: None)
    summary = tr.run()
    assert len(killed) == 2
    assert summary["worker_failures"] >= 2 and summary["decisions_trained"] >= 12000
    # every arrived rollout has its own request id, and was learned from, dropped, or is still queued
    assert (summary["rollouts"] + summary["dropped_rollouts"] + len(tr.scheduler.queue)
            == len(tr.scheduler.consumed))
    assert max(tr.scheduler.consumed) < tr.counters.next_request


def test_kill_and_resume_loses_at_most_one_checkpoint_interval(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "samloc", "train", "--config", "quick", "--run-dir", str(run), *TINY,
           "total_decisions=10000000", "checkpoint.every_updates=20"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while len(ckfmt.list_checkpoints(run)) < 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the trainer and the Ray processes it started
        proc.wait(timeout=60)
    cks = ckfmt.list_checkpoints(run)
    assert len(cks) == 3, "the run did not reach three checkpoints in time"
    newest, previous = cks[-1], cks[-2]
    prev_meta = ckfmt.verify(previous, trainer=True)
    # damage the newest checkpoint: the resume must refuse it and fall back to the previous one
    f = newest / ckfmt.MODEL_FILE
    f.write_bytes(f.read_bytes()[:-50])
    msgs: list[str] = []
    target = prev_meta.decisions_trained + 5000
    cfg = load_config(run / "config.yaml", [f"total_decisions={target}"])
    tr = new_loop(cfg, run, resume=True, log=msgs.append, command="samloc train --resume RUN")
    assert any("truncated or corrupt" in m and newest.name in m for m in msgs)
    assert tr.counters.updates == prev_meta.updates and tr.counters.games == prev_meta.games
    assert tr.counters.decisions_trained == prev_meta.decisions_trained
    start = tr.counters.updates
    summary = tr.run()
    assert summary["decisions_trained"] >= target and summary["updates"] > start
    meta = ckfmt.verify(Path(summary["checkpoint"]), trainer=True)
    assert meta.command == prev_meta.command and "--config quick" in meta.command  # how it began
    assert prev_meta.resumes == () and meta.resumes == ("samloc train --resume RUN",)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two nodes of one CPU each, no GPU, reached through an address like a real cluster."""
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1, "num_gpus": 0})
    try:
        c.add_node(num_cpus=1, num_gpus=0)
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()


def test_two_node_cluster_through_ray_address(tmp_path: Path, cluster: Any) -> None:
    cfg = load_config("quick",
                      [*TINY, "total_decisions=4000", "rollout.num_workers=2", "rollout.cpus_per_worker=1"])
    tr = new_loop(cfg, tmp_path / "run", ray_address=cluster.address, log=lambda m: None)
    summary = tr.run()
    nodes = {w["node_id"] for w in summary["workers"]}
    assert len(nodes) == 2, summary["workers"]
    assert summary["decisions_trained"] >= 4000 and summary["worker_failures"] == 0


def test_a_cuda_learner_on_a_cluster_without_gpus_fails_at_once_in_one_line(tmp_path: Path,
                                                                            cluster: Any) -> None:
    cfg = load_config("quick", [*TINY, "learner.device=cuda"])
    t0 = time.perf_counter()
    with pytest.raises(TrainError) as err:
        new_loop(cfg, tmp_path / "run", ray_address=cluster.address, log=lambda m: None).run()
    msg = str(err.value)
    assert "learner.device=cuda" in msg and "no GPU" in msg and "\n" not in msg, msg
    assert time.perf_counter() - t0 < 60  # refused, not waited on


def test_workers_ray_cannot_place_are_reported_then_refused(tmp_path: Path, cluster: Any) -> None:
    """Three one-CPU workers on a two-CPU cluster: said within seconds, an error after place_timeout_s."""
    cfg = load_config("quick", [*TINY, "rollout.num_workers=3", "rollout.cpus_per_worker=1",
                                "rollout.place_timeout_s=8"])
    msgs: list[str] = []
    with pytest.raises(TrainError, match="not started after .* giving up") as err:
        new_loop(cfg, tmp_path / "run", ray_address=cluster.address, log=msgs.append).run()
    assert "\n" not in str(err.value)
    assert any("need 3 CPUs, Ray has 2" in m for m in msgs), msgs
    assert any("not started after" in m and "Ray has 2 CPUs in all, the workers ask for 3" in m
               for m in msgs), msgs


def test_more_workers_than_the_embedded_ray_has_cpus_are_refused_up_front(tmp_path: Path) -> None:
    from sam_env.machine import usable_cpus

    workers = usable_cpus() + 1  # the embedded Ray has the CPUs this process may use
    r = subprocess.run([sys.executable, "-m", "samloc", "train", "--config", "quick", "--run-dir",
                        str(tmp_path / "r"),
                        *TINY, f"rollout.num_workers={workers}"], capture_output=True, text=True, cwd=REPO,
                       timeout=240)
    assert r.returncode == 1, r.stderr[-2000:]
    err = r.stderr.strip()
    assert err.startswith("samloc train:") and len(err.splitlines()) == 1, err
    assert f"rollout.num_workers={workers}" in err and "CPUs" in err


def test_the_policy_lag_is_bounded_logged_and_what_is_too_old_dropped(tmp_path: Path) -> None:
    """max_policy_lag=0: only rollouts made with the newest weights are learned from; the rest are dropped
    and counted."""
    cfg = load_config("quick", [*TINY, "total_decisions=3000", "learner.max_policy_lag=0"])
    summary = new_loop(cfg, tmp_path / "run", log=lambda m: None).run()
    assert summary["decisions_trained"] >= 3000 and summary["dropped_rollouts"] > 0
    tags = _scalars(tmp_path / "run")
    assert tags["losses/policy_lag_max"] and max(tags["losses/policy_lag_max"]) == 0
    assert max(tags["charts/dropped_rollouts"]) == summary["dropped_rollouts"]


def _listening(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket held by these processes, from /proc."""
    inodes: set[int] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(int(link[8:-1]))
        except OSError:
            continue
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and int(f[9]) in inodes:  # state LISTEN
                addr, port = f[1].split(":")
                out.append((addr, int(port, 16)))
    return out


def _stat(path: Path) -> list[str]:
    """The fields of a /proc stat file after the command name (which may hold spaces): state, ppid, ..."""
    return path.read_text().rsplit(")", 1)[1].split()


def _descendants(roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(_stat(Path(f"/proc/{p}/stat"))[1])
            except (OSError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(p))
    out, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        out.add(p)
        todo += children.get(p, [])
    return out


LOOPBACK = {"0100007F", "00000000000000000000000001000000",
            "0000000000000000FFFF00000100007F"}  # 127.0.0.1, ::1


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc (Linux)")
def test_the_embedded_ray_listens_on_loopback_only(tmp_path: Path) -> None:
    seen: list[tuple[str, int]] = []
    others = _descendants({os.getpid()}) - {os.getpid()}  # another Ray's processes (this module's cluster)

    def look(tr: Trainer) -> None:
        if tr.counters.updates == 3:
            seen.extend(_listening(_descendants({os.getpid()}) - _descendants(others)))

    cfg = load_config("quick", [*TINY, "total_decisions=1500"])
    new_loop(cfg, tmp_path / "run", log=lambda m: None, on_update=look).run()
    assert len(seen) >= 4, seen  # the driver, GCS, raylet, the worker: each serves gRPC
    assert all(addr in LOOPBACK for addr, _ in seen), seen


def _worker_niceness(pids: set[int]) -> list[int]:
    """The nice value of every thread of the Ray workers among ``pids`` (Ray sets it per thread)."""
    out = []
    for pid in pids:
        try:
            if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
                continue
            for task in Path(f"/proc/{pid}/task").iterdir():
                out.append(int(_stat(task / "stat")[16]))
        except OSError:  # a process or thread that ended meanwhile
            continue
    return out


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_the_embedded_rays_workers_run_at_the_learners_priority(tmp_path: Path, monkeypatch) -> None:
    """Ray's default nice 15 would let any other load on the machine starve the workers the learner
    waits on."""
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    seen: list[int] = []
    others = _descendants({os.getpid()}) - {os.getpid()}  # another Ray's processes (this module's cluster)

    def look(tr: Trainer) -> None:
        if tr.counters.updates == 2 and not seen:
            seen.extend(_worker_niceness(_descendants({os.getpid()}) - _descendants(others)))

    cfg = load_config("quick", [*TINY, "total_decisions=1000"])
    new_loop(cfg, tmp_path / "run", log=lambda m: None, on_update=look).run()
    assert seen and max(seen) <= os.nice(0), (seen, os.nice(0))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_the_sitting_with_a_checkpoint_of_that_moment(tmp_path: Path, sig: int) -> None:
    """Ctrl-C or a scheduler's SIGTERM: the run stops at the next step, writes a checkpoint of where it
    was (not the last periodic one) and ends as a sitting does, so a resume goes on from there."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "samloc", "train", "--config", "quick", "--run-dir", str(run), *TINY,
           "total_decisions=10000000", "checkpoint.every_updates=30"]
    log = tmp_path / "stderr.txt"
    with open(log, "w") as f:  # a file, not a pipe nobody reads until the end
        proc = subprocess.Popen(cmd, cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS="1"),
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=f)
    try:
        deadline = time.time() + 240
        while not ckfmt.list_checkpoints(run) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert ckfmt.list_checkpoints(run), "no checkpoint in time"
        time.sleep(1.0)  # a few updates past the periodic checkpoint
        proc.send_signal(sig)
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    name, err = signal.Signals(sig).name, log.read_text()
    assert proc.returncode == 0, err
    assert f"{name}: stopping after this step with a checkpoint" in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stop_reason"] == f"stopped by {name}"
    final = ckfmt.verify(Path(summary["checkpoint"]), trainer=True)
    # the moment's checkpoint, not the last periodic one: the count it holds is where the sitting ended
    # (equal to a periodic one's only when the stop fell on one, which a fast machine can make happen)
    assert final.updates == summary["updates"] >= 30
    assert (Path(summary["checkpoint"]) / "policy.onnx").is_file()  # the sitting's end ran: the export
    msgs: list[str] = []
    cfg = load_config(run / "config.yaml", ["total_decisions=10000000"])
    tr = new_loop(cfg, run, resume=True, log=msgs.append)
    assert tr.counters.updates == final.updates


def _without_root_overrides() -> None:
    """In the child: root loses the capabilities that ignore file permissions (a plain user has none)."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, dropped before exec
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _train(args: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "samloc", "train", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=300, **kw)


def test_a_read_only_run_folder_is_one_line_for_a_new_run_and_a_resume(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert _train(["--config", "quick", "--run-dir", str(run), *TINY, "total_decisions=400"]).returncode == 0
    parent = tmp_path / "ro"
    parent.mkdir()
    try:
        for p in (parent, run, run / "checkpoints"):
            p.chmod(0o555)
        for args in (["--config", "quick", "--run-dir", str(parent / "new"), *TINY],
                     ["--resume", str(run), "total_decisions=800"]):
            r = _train(args, preexec_fn=_without_root_overrides)
            err = r.stderr.strip().splitlines()
            # refused up front (sam_env.atomic.check_place), as a usage error: before any work
            assert r.returncode == 2 and "Traceback" not in r.stderr and len(err) == 1, r.stderr[-3000:]
            assert err[0].startswith("samloc train: the run folder: refusing to write into ") \
                and "cannot be written (permission denied or a read-only file system)" in err[0]
    finally:
        for p in (parent, run, run / "checkpoints"):
            p.chmod(0o755)


def test_a_full_disk_during_a_checkpoint_is_one_line_and_the_last_good_one_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from agents.nets import checkpoint as ckpt_mod
    from samloc.commands.train import main

    real = ckpt_mod.write_atomic
    calls = {"n": 0}

    def fill_up(path: Path, data: Any) -> None:
        calls["n"] += str(path).endswith(".safetensors")
        if calls["n"] > 4:  # two checkpoints (weights + trainer state each), then the disk is full
            with open(path, "wb") as f:
                f.write(b"x" * 100)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data)

    monkeypatch.setattr(ckpt_mod, "write_atomic", fill_up)
    run = tmp_path / "run"
    rc = main(["--config", "quick", "--run-dir", str(run), *TINY, "checkpoint.every_updates=5",
               "total_decisions=10000000"])
    # progress notes (a slow worker start) may come first
    lines = capsys.readouterr().err.strip().splitlines()
    err = lines[-1]
    assert rc == 1 and "Traceback" not in "".join(lines), lines
    assert [ln for ln in lines if ln.startswith("samloc train:")] == [err], lines
    assert "No space left on device" in err and "the last good one stays" in err, err
    good = ckfmt.list_checkpoints(run)
    assert [p.name for p in good] == ["ckpt_00000005", "ckpt_00000010"] and good[-1].name in err
    ckfmt.verify(good[-1], trainer=True)
    # the half-written one is gone
    assert not [p for p in (run / "checkpoints").iterdir() if ".tmp" in p.name]


def test_house_rules_train_and_serve(tmp_path: Path) -> None:
    """A site's own rule set (a preset plus overrides) trains with the same command and is served for it."""
    from fastapi.testclient import TestClient

    from agents.serving.app import create_app
    from sam_env.cards import card_str
    from sam_env.game import Game
    from samloc.commands.train import main

    house = {"preset": "hoi_quan_bai", "passed_can_chop": False, "chop_two": 15}
    cfg = tmp_path / "house.yaml"
    cfg.write_text("name: house\nenv:\n  tables:\n    - {rules: " + json.dumps(house) + ", players: [3]}\n")
    run, bot = tmp_path / "run", tmp_path / "bot"
    assert main(["--config", str(cfg), "--run-dir", str(run), *TINY, "total_decisions=3000",
                 "eval.every_updates=0", f"checkpoint.export_to={bot}"]) == 0
    meta = ckfmt.read_metadata(bot)
    assert [t.to_record() for t in meta.tables] == [{"rules": house, "players": 3}]
    with TestClient(create_app(str(bot))) as c:
        assert c.get("/v1/info").json()["supports"] == [{"rules": house, "players": [3]}]
        for rules, status in ((house, 200), ("hoi_quan_bai", 422)):
            g = Game.new(rules, 3, seed=1)
            s = g.to_act
            r = c.post("/v1/act", json={"format": "samloc/1", "rules": rules, "players": 3,
                                        "opener": g.opener,
                                        "seat": s, "hand": [card_str(x) for x in g.hand(s)], "events": []})
            assert r.status_code == status, r.text


def test_an_evaluation_an_error_leaves_in_flight_is_cancelled_and_settled_before_ray_stops() -> None:
    """A run that stops on an error drops the evaluation in flight: cancelled, and waited for until Ray has
    settled it, so its worker's death does not reach the driver after ``ray.shutdown()`` (Ray then ends the
    whole process: the suite once vanished so)."""
    import ray

    from training.run.evaluation import PeriodicEval

    @ray.remote(num_cpus=0)
    def slow() -> int:
        time.sleep(60)
        return 1

    class Target:
        def launch(self, *args: Any) -> tuple[Any, dict[str, Any]]:
            return slow.remote(), {"decisions_trained": 0}

    from training.run.workers import WorkerPool

    pool = WorkerPool(load_config("quick", TINY), None, False, print)
    pool.start()  # an embedded Ray, as a run starts it: never a cluster another test left running
    try:
        state = type("S", (), {"stage_starts": []})()
        ev = PeriodicEval(Target(), state, None, lambda at: None)  # type: ignore[arg-type]
        ev.launch({}, {}, 1)
        ref = ev.in_flight[0]  # type: ignore[index]
        t0 = time.perf_counter()
        ev.abandon()
        assert ev.in_flight is None and time.perf_counter() - t0 < 30
        assert ray.wait([ref], timeout=0)[0] == [ref]  # settled: cancelled, not left running
        with pytest.raises(ray.exceptions.TaskCancelledError):
            ray.get(ref)
        ev.abandon()  # nothing in flight: nothing to do
    finally:
        pool.stop()
