"""The package installs: a wheel built from this tree, installed (not editable) into a fresh virtualenv
outside the working tree with the pinned requirements, runs its commands from any directory.

Nothing of the checkout may be reached from there: the commands run in an empty temporary directory
with a clean environment, so a file found through ``__file__/..`` or the working directory fails here.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel and installs it into a fresh virtualenv

ROOT = Path(__file__).resolve().parent.parent
#: What the wheel is built from: the packages and the project files (no tests, runs, checkpoints or .venv).
SOURCES = ("pyproject.toml", "README.md", "sam_env", "agents", "training", "samloc")
EXTRAS = "train,serve,rl"


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, (f"{' '.join(cmd)} exited {out.returncode}:\n"
                                 f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(the virtualenv's bin/, an empty working directory, the environment to run in)."""
    base = tmp_path_factory.mktemp("wheel")
    src, dist, env_dir, work = base / "src", base / "dist", base / "venv", base / "work"
    src.mkdir()
    for name in SOURCES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(
            ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__", "*.pyc",
                                                                          "*.nbi", "*.nbc")}
                                        if (ROOT / name).is_dir() else {}))
    _run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
          "-w", str(dist)],
         base, dict(os.environ))
    (wheel,) = dist.glob("samloc_engine-*.whl")  # the distribution samloc-engine
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", f"{wheel}[{EXTRAS}]",
          "-c", str(ROOT / "requirements.txt")], base, dict(os.environ), timeout=1200)
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "SAMLOC"))}
    env.update(HOME=str(base), OMP_NUM_THREADS="1", PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return bin_dir, work, env


def test_the_wheel_holds_the_package_data_and_no_checkout_files(installed) -> None:
    bin_dir, work, env = installed
    out = _run([str(bin_dir / "python"), "-c",
                "import sam_env, training, agents, pathlib, json;"
                "print(json.dumps([str(pathlib.Path(m.__file__).parent) for m in (sam_env, training, "
                "agents)]))"],
               work, env)
    for where in json.loads(out.stdout):
        assert "site-packages" in where and not where.startswith(str(ROOT))


def test_rules_demo_replay_and_bench_run_from_any_directory(installed) -> None:
    bin_dir, work, env = installed
    samloc = str(bin_dir / "samloc")
    listing = _run([samloc, "rules"], work, env).stdout
    assert [line.split()[0] for line in listing.splitlines()] == ["hoi_quan_bai", "mien_bac",
                                                                  "online", "s666pg"]
    assert "sam_declaration: true" in _run([samloc, "rules", "s666pg"], work, env).stdout
    demo = json.loads(_run([samloc, "demo", "--games", "4",
                            "--seed", "3"], work, env).stdout.strip().splitlines()[-1])
    assert demo["games"] == 4 and demo["replay_mismatches"] == 0
    records = work / demo["records"]
    lines = _run([samloc, "replay", str(records)], work, env).stdout.strip().splitlines()
    assert len(lines) == 4
    bench = json.loads(_run([samloc, "bench", "--games",
                             "200", "--json"], work, env).stdout.strip().splitlines()[-1])
    assert bench["games"] == 200 and bench["decisions_per_s"] > 0
    # python -m samloc is the same command
    assert _run([str(bin_dir / "python"), "-m", "samloc", "rules"], work, env).stdout == listing


def test_train_dry_run_finds_a_config_by_name(installed) -> None:
    bin_dir, work, env = installed
    out = _run([str(bin_dir / "samloc"), "train", "--config", "quick", "--dry-run"], work, env, timeout=600)
    assert "total_decisions 1,000,000,000" in out.stdout


def test_gymnasium_makes_the_environment(installed) -> None:
    bin_dir, work, env = installed
    out = _run([str(bin_dir / "python"), "-c",
                "import gymnasium, sam_env.gym_env; e = gymnasium.make('SamLoc-v0'); o, i = e.reset(seed=1);"
                "print(o['observation'].shape, int(o['action_mask'].sum()) > 0)"], work, env)
    assert out.stdout.split() == ["(993,)", "True"]


def test_serve_without_shipped_checkpoints_says_where_to_put_them(installed) -> None:
    bin_dir, work, env = installed
    out = subprocess.run([str(bin_dir / "samloc"), "serve", "--port", str(_free_port())], cwd=work, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "SAMLOC_CHECKPOINTS" in out.stderr \
        and len(out.stderr.strip().splitlines()) == 1
    assert "checkpoints/ folder of the samloc repository; clone it" in out.stderr  # where they are to be had


def test_serve_a_heuristic_bot(installed) -> None:
    bin_dir, work, env = installed
    port = _free_port()
    proc = subprocess.Popen([str(bin_dir / "samloc"), "serve", "--agent", "heuristic", "--port", str(port)],
                            cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        deadline, health = time.monotonic() + 180, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=5) as r:
                    health = json.loads(r.read())
                break
            except OSError:
                time.sleep(0.5)
        assert health is not None, f"no answer from samloc serve: {proc.stdout.read() if proc.poll() else ''}"
        assert health["ok"] is True
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/play", timeout=5) as r:
            assert r.status == 200 and b"<html" in r.read().lower()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
