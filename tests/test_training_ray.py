"""The whole training pipeline on Ray, at a tiny scale: smoke run, worker death, kill + resume, two nodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.nets import checkpoint as ckpt
from agents.nets import format as ckfmt
from training.config import load_config
from training.trainer import Trainer

REPO = Path(__file__).resolve().parent.parent
TINY = ["rollout.num_workers=1", "model.hidden=32", "model.layers=1", "rollout.envs_per_worker=32", "rollout.steps_per_rollout=8",
        "ppo.batch_decisions=200", "ppo.minibatch=128", "ppo.epochs=1", "rollout.snapshot_every=20",
        "rollout.pool_size=3", "eval.every_updates=100", "eval.deals=16", "eval.final_deals=0",
        "checkpoint.every_updates=50", "display=none", "log_every_s=1", "max_minutes=0"]

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _scalars(run_dir: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [e.value for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_smoke_run_of_the_whole_pipeline(tmp_path: Path) -> None:
    """A few hundred updates through `samloc train`: checkpoints, TensorBoard, evaluations, export."""
    from training.cli import main

    run = tmp_path / "run"
    rc = main(["--config", "quick", "--run-dir", str(run), *TINY, "total_decisions=75000",
               "eval.final_deals=16", f"checkpoint.export_to={tmp_path / 'bot'}",
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
                "losses/value", "losses/entropy", "eval/random/mean_la", "eval/heuristic/win_rate"):
        assert tag in tags, tag
    assert max(tags["charts/games"]) == summary["games"]
    evals = [json.loads(x) for x in (run / "eval.jsonl").read_text().splitlines()]
    ups = [e["updates"] for e in evals]  # one evaluation at a time: a due one is skipped while one runs
    assert ups and ups == sorted(set(ups)) and all(u % 100 == 0 for u in ups)
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
    assert make_agent(f"{tmp_path / 'bot'}+search:candidates=2,worlds=2,horizon=1,critic=0").belief is not None


def test_a_killed_worker_is_restarted_and_nothing_is_counted_twice(tmp_path: Path) -> None:
    cfg = load_config("quick", [*TINY, "total_decisions=12000", "rollout.num_workers=2",
                                "rollout.cpus_per_worker=0.5"])
    killed: list[int] = []

    def killer(tr: Trainer) -> None:
        if tr.c.updates in (5, 25) and len(killed) < 2:
            pid = tr.placement[len(killed) % 2]["pid"]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    tr = Trainer(cfg, tmp_path / "run", on_update=killer, log=lambda m: None)
    summary = tr.run()
    assert len(killed) == 2
    assert summary["worker_failures"] >= 2 and summary["decisions_trained"] >= 12000
    # every consumed rollout has its own request id, and the counters add up exactly
    assert summary["rollouts"] == len(tr.consumed)
    assert max(tr.consumed) < tr.c.next_request


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
    tr = Trainer(cfg, run, resume=True, log=msgs.append, command="samloc train --resume RUN")
    assert any("truncated or corrupt" in m and newest.name in m for m in msgs)
    assert tr.c.updates == prev_meta.updates and tr.c.games == prev_meta.games
    assert tr.c.decisions_trained == prev_meta.decisions_trained
    start = tr.c.updates
    summary = tr.run()
    assert summary["decisions_trained"] >= target and summary["updates"] > start
    meta = ckfmt.verify(Path(summary["checkpoint"]), trainer=True)
    assert meta.command == prev_meta.command and "--config quick" in meta.command  # how it began
    assert prev_meta.resumes == () and meta.resumes == ("samloc train --resume RUN",)


def test_two_node_cluster_through_ray_address(tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        cfg = load_config("quick", [*TINY, "total_decisions=4000", "rollout.num_workers=2",
                                    "rollout.cpus_per_worker=1"])
        tr = Trainer(cfg, tmp_path / "run", ray_address=cluster.address, log=lambda m: None)
        summary = tr.run()
        nodes = {w["node_id"] for w in summary["workers"]}
        assert len(nodes) == 2, summary["workers"]
        assert summary["decisions_trained"] >= 4000 and summary["worker_failures"] == 0
    finally:
        cluster.shutdown()


def test_house_rules_train_and_serve(tmp_path: Path) -> None:
    """A site's own rule set (a preset plus overrides) trains with the same command and is served for it."""
    from fastapi.testclient import TestClient

    from agents.server import create_app
    from sam_env.cards import card_str
    from sam_env.game import Game
    from training.cli import main

    house = {"preset": "hoi_quan_bai", "passed_can_chop": False, "chop_two": 15}
    cfg = tmp_path / "house.yaml"
    cfg.write_text("name: house\nenv:\n  tables:\n    - {rules: " + json.dumps(house) + ", players: [3]}\n")
    run, bot = tmp_path / "run", tmp_path / "bot"
    assert main(["--config", str(cfg), "--run-dir", str(run), *TINY, "total_decisions=3000",
                 "eval.every_updates=0", f"checkpoint.export_to={bot}"]) == 0
    meta = ckfmt.read_metadata(bot)
    assert [t.to_json() for t in meta.tables] == [{"rules": house, "players": 3}]
    with TestClient(create_app(str(bot))) as c:
        assert c.get("/v1/info").json()["supports"] == [{"rules": house, "players": [3]}]
        for rules, status in ((house, 200), ("hoi_quan_bai", 422)):
            g = Game.new(rules, 3, seed=1)
            s = g.to_act
            r = c.post("/v1/act", json={"format": "samloc/1", "rules": rules, "players": 3, "opener": g.opener,
                                        "seat": s, "hand": [card_str(x) for x in g.hand(s)], "events": []})
            assert r.status_code == status, r.text
