"""A real Ray cluster as a user starts one, on this machine: a head and a second node, each
``ray start --block`` in its own process group, on loopback, every port above 20000 (outside Ray's
default worker ports, 10002-19999), their own temp dirs, Ray's token authentication on.  ``samloc train
--ray-address`` joins it with the token in RAY_AUTH_TOKEN (RAY_AUTH_MODE unset, as a user has it), places
one rollout worker on each node, and trains on after the second node is killed mid-run: its worker's
failure is logged once and the head's worker carries the run to its budget and checkpoint.  Only the
process groups this test started are ended (never ``ray stop``, which ends every Ray on the machine).
It takes two to three minutes on a busy 2-core machine."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from agents.nets import format as ckfmt

pytestmark = pytest.mark.slow  # a Ray cluster trains

REPO = Path(__file__).resolve().parent.parent
RAY = Path(sys.executable).with_name("ray")
SMALL = ["warm_start.decisions=0", "eval.every_minutes=0", "model.hidden=64", "model.layers=1",
         "rollout.envs_per_worker=64", "rollout.steps_per_rollout=16",
         "ppo.batch_decisions=800", "ppo.minibatch=256", "ppo.epochs=1", "eval.every_updates=1000",
         "eval.final_deals=0", "belief.deals=0", "checkpoint.every_updates=10", "display=plain",
         "log_every_s=2", "rollout.num_workers=2", "rollout.cpus_per_worker=1"]


def _free_base(span: int) -> int:
    """A port P in 20000-60000 with P..P+span-1 free here now."""
    for _ in range(200):
        base = 20000 + secrets.randbelow(400) * 100
        try:
            for p in range(base, base + span):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no free run of ports above 20000")


class Node:
    """One ``ray start --block`` in its own process group, its output in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([str(RAY), "start", "--block", *args], env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def started(self, timeout: float = 180) -> bool:
        """Whether it started; False when ``ray start`` gave up (Ray allows a raylet 30 s to register,
        which a busy machine can exceed)."""
        t0 = time.monotonic()
        while b"Ray runtime started" not in self.log.read_bytes():
            if self.proc.poll() is not None:
                return False
            assert time.monotonic() - t0 < timeout, self.log.read_text()[-3000:]
            time.sleep(0.5)
        return True

    def kill(self) -> None:
        """SIGKILL to the node's whole process group: the raylet, its workers, its agents."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        """SIGTERM to the group (Ray's --block ends its processes), SIGKILL to whatever is left."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _node_args(base: int, tmp: str, name: str) -> list[str]:
    return ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--num-gpus", "0",
            "--object-store-memory", str(100 * 2**20), "--temp-dir", f"{tmp}/{name}",
            "--node-manager-port", str(base + 1), "--object-manager-port", str(base + 2),
            "--dashboard-agent-listen-port", str(base + 3), "--dashboard-agent-grpc-port", str(base + 4),
            "--runtime-env-agent-port", str(base + 5), "--metrics-export-port", str(base + 6),
            "--min-worker-port", str(base + 10), "--max-worker-port", str(base + 49)]


@pytest.fixture()
def cluster() -> Iterator[tuple[str, dict[str, str], Node]]:
    """(address, the environment a user's shell has: the token, no RAY_AUTH_MODE, the second node)."""
    if not RAY.exists():
        pytest.skip("no ray command next to this Python")
    tmp = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's unix socket paths must stay < 108 bytes
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {"RAY_AUTH_TOKEN": secrets.token_hex(32), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONPATH": str(REPO)}
    head_env = env | {"RAY_AUTH_MODE": "token"}  # the head's token auth on, whatever ~/.ray holds
    base = _free_base(400)
    nodes: list[Node] = []

    def start(args: list[str], name: str) -> Node:
        for attempt in range(3):
            node = Node([*args, *_node_args(base + 50 * len(nodes) + 100 * attempt, tmp, f"{name}{attempt}")],
                        head_env, Path(tmp, f"{name}{attempt}.log"))
            if node.started():
                return node
            node.stop()
        raise AssertionError(node.log.read_text()[-3000:])

    try:
        nodes.append(start(["--head", "--port", str(base), "--ray-client-server-port", str(base + 7),
                            "--include-dashboard=false"], "head"))
        nodes.append(start(["--address", f"127.0.0.1:{base}"], "node"))
        yield f"127.0.0.1:{base}", env, nodes[1]
    finally:
        for n in reversed(nodes):
            n.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _last_update(lines: list[str]) -> int:
    """The newest update number in the run's plain progress lines (-1: none yet)."""
    ups = [int(ln.split("] update ")[1].split()[0]) for ln in list(lines) if "] update " in ln]
    return max(ups, default=-1)


def _train(address: str, env: dict[str, str], run: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "samloc", "train", "--config", "quick", "--ray-address",
                             address,
                             "--run-dir", str(run), *SMALL, *extra], env=env, cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def test_a_token_cluster_of_ray_start_nodes_trains_on_both_and_survives_losing_one(
        tmp_path: Path, cluster: tuple[str, dict[str, str], Node]) -> None:
    address, env, second = cluster
    wrong = subprocess.run([sys.executable, "-m", "samloc", "train", "--config", "quick", "--ray-address",
                            address,
                            "--run-dir", str(tmp_path / "no"), *SMALL, "max_minutes=1"],
                           env=env | {"RAY_AUTH_TOKEN": "0" * 64}, cwd=REPO, text=True, capture_output=True,
                           timeout=300)
    assert wrong.returncode == 1, wrong.stderr[-2000:]
    last = wrong.stderr.strip().splitlines()[-1]
    assert last.startswith(f"samloc train: --ray-address {address}: the Ray cluster there asks for its"
                           " authentication token and this machine has a token that is not"
                           " the cluster's"), last

    run = tmp_path / "run"
    proc = _train(address, env, run, "max_minutes=1")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        t0 = time.monotonic()
        while _last_update(lines) < 3:
            assert proc.poll() is None, "".join(lines)[-3000:]
            assert time.monotonic() - t0 < 300, "".join(lines)[-3000:]
            time.sleep(0.5)
        second.kill()  # mid-run: the second node's raylet and its worker, at once
        at_kill = _last_update(lines)
        rc = proc.wait(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    reader.join(timeout=30)
    out = "".join(lines)
    assert rc == 0, out[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert len({w["node_id"] for w in summary["workers"]}) == 2, summary["workers"]  # one worker on each node
    assert summary["stop_reason"] == "max_minutes reached", summary
    assert summary["worker_failures"] >= 1 and "rollout worker" in out and "failed" in out, out[-3000:]
    assert summary["updates"] > at_kill + 2, (at_kill, out[-3000:])  # it trained on after the kill
    ckfmt.verify(Path(summary["checkpoint"]), trainer=True)
    assert Path(summary["checkpoint"]).name == f"ckpt_{summary['updates']:08d}"
