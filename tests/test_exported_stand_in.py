"""A checkpoint of a user's network whose module is not importable here (no PYTHONPATH to it) is played
from its exported ``policy.onnx`` by ``samloc eval`` as ``samloc serve`` plays it: one function
(``agents.registry.exported_agent``) finds the export and checks it was made from the folder's weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from agents.nets.export import export  # noqa: E402
from agents.nets.checkpoint import save_checkpoint  # noqa: E402
from agents.nets.format import CheckpointError  # noqa: E402
from agents.players.onnx_agent import OnnxAgent  # noqa: E402
from agents.players.policy_agent import PolicyAgent  # noqa: E402
from agents.registry import make_agent  # noqa: E402
from sam_env import obs as obs_mod  # noqa: E402
from sam_env.actions import ACTION_TABLE_VERSION, NUM_ACTIONS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODULE = "elsewhere_net"  # a copy of tests/custom_net.py, importable only from the test's own folder
META = {"name": "elsewhere", "rules": ["hoi_quan_bai"], "players": [4], "obs_version": obs_mod.OBS_VERSION,
        "action_table_version": ACTION_TABLE_VERSION}


@pytest.fixture
def exported(tmp_path: Path):
    """A checkpoint of ``elsewhere_net:TinyNet`` with its ONNX export, its module then out of reach."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "tests" / "custom_net.py", src / f"{MODULE}.py")
    sys.path.insert(0, str(src))
    try:
        torch.manual_seed(0)
        net = __import__(MODULE).TinyNet(obs_mod.OBS_SIZE, NUM_ACTIONS, obs_mod.FULL_EXTRA, width=8)
        ckpt = save_checkpoint(tmp_path / "ckpt", net, META)
        export(ckpt)
        assert isinstance(make_agent(str(ckpt)), PolicyAgent)  # importable: played with PyTorch
    finally:
        sys.path.remove(str(src))
        sys.modules.pop(MODULE, None)
    return ckpt


@pytest.mark.slow
def test_eval_plays_an_unimportable_network_from_its_export(exported: Path, tmp_path: Path) -> None:
    agent = make_agent(str(exported), seed=3)
    assert isinstance(agent, OnnxAgent) and agent.path == exported / "policy.onnx"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "samloc", "eval", "--agent", str(exported), "--opponents",
                        "random",
                        "--deals", "8", "--seed", "1", "--json", "--out", str(tmp_path / "eval")],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["deals"] == 8 and res["zero_sum"]


def test_the_export_must_be_of_the_folders_weights_and_there(exported: Path) -> None:
    weights = exported / "model.safetensors"
    blob = bytearray(weights.read_bytes())
    blob[-1] ^= 1  # retrained since the export, say
    weights.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="was not exported from"):
        make_agent(str(exported))
    weights.write_bytes(bytes(blob[:-1]) + bytes([blob[-1] ^ 1]))
    for f in exported.glob("policy.*"):
        f.unlink()
    with pytest.raises(CheckpointError,
                       match=f"its model {MODULE}:TinyNet does not build .*cannot import {MODULE}"):
        make_agent(str(exported))
