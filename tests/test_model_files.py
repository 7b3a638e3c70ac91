"""The files a bot is loaded from: every one checked before anyone is answered.

An exported model is checked against the SHA-256 its sidecar records and run once on
known positions; a checkpoint folder served from its ONNX file must hold the weights it
was exported from; JSON files must be small regular files, and a network's shape must be
bounded and the one its safetensors header describes, before anything is allocated.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402

from agents.base import AgentFailure  # noqa: E402
from agents.nets.export import export  # noqa: E402
from agents.nets.belief import PLACES, BeliefNet, load_belief, save_belief  # noqa: E402
from agents.nets.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from agents.nets.format import (MAX_JSON_BYTES, CheckpointError, belief_shapes, file_sha256,  # noqa: E402
                                policy_shapes, sealed)
from agents.nets.policy import PolicyNet, build_net  # noqa: E402
from agents.players.onnx_agent import OnnxAgent  # noqa: E402
from agents.registry import make_agent  # noqa: E402
from agents.serving.app import create_app  # noqa: E402
from agents.serving.bots import Bot  # noqa: E402
from sam_env import core  # noqa: E402
from sam_env import obs as obs_mod  # noqa: E402
from sam_env.actions import ACTION_TABLE_VERSION  # noqa: E402
from sam_env.cards import card_str  # noqa: E402
from sam_env.game import Game  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def _checkpoint(path: Path, hidden: int = 64, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    net = PolicyNet(obs_mod.OBS_SIZE, hidden=hidden, layers=2)
    for p in net.parameters():
        torch.nn.init.normal_(p, 0.0, 0.1)
    return save_checkpoint(path, net, {"name": "tiny", "rules": ["hoi_quan_bai"], "players": [4],
                                       "obs_version": obs_mod.OBS_VERSION,
                                       "action_table_version": ACTION_TABLE_VERSION})


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint folder with its policy.onnx and policy.json."""
    ckpt = _checkpoint(tmp_path_factory.mktemp("files") / "ckpt")
    export(ckpt, samples=50)
    return ckpt


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _serve_error(spec: str) -> str:
    """``samloc serve --agent spec`` must refuse to start: its one line on stderr."""
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--agent", spec, "--port", "1"],
                       capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


def _set_initializer(src: Path, dest: Path, name: str, values: np.ndarray) -> None:
    """``src`` with one weight tensor replaced, written alone (no sidecar) to ``dest``."""
    proto = onnx.load(str(src))
    for init in proto.graph.initializer:
        if init.name == name:
            init.CopyFrom(numpy_helper.from_array(values.astype(np.float32), name))
            break
    else:
        raise AssertionError(f"no initializer {name}: {[i.name for i in proto.graph.initializer]}")
    dest.write_bytes(proto.SerializeToString())


def _initializer(path: Path, name: str) -> np.ndarray:
    proto = onnx.load(str(path))
    return next(numpy_helper.to_array(i) for i in proto.graph.initializer if i.name == name)


# ---- the exported model ------------------------------------------------------------------------
def test_the_sidecar_records_the_onnx_files_own_hash(exported: Path) -> None:
    side = json.loads((exported / "policy.json").read_text())
    assert side["onnx_sha256"] == file_sha256(exported / "policy.onnx")
    assert side["checkpoint_sha256"] == file_sha256(exported / "model.safetensors")
    embedded = onnx.load(str(exported / "policy.onnx")).metadata_props
    assert "onnx_sha256" not in json.loads(next(p.value for p in embedded if p.key == "samloc"))


def test_flipped_bytes_are_refused_naming_the_file(exported: Path, tmp_path: Path) -> None:
    data = bytearray((exported / "policy.onnx").read_bytes())
    step = len(data) // 400
    for i in range(200):
        data[len(data) // 4 + i * step] ^= 0xFF
    (tmp_path / "m.onnx").write_bytes(bytes(data))
    shutil.copy(exported / "policy.json", tmp_path / "m.json")
    with pytest.raises(CheckpointError, match=r"m\.onnx does not match the onnx_sha256 recorded in m\.json"):
        OnnxAgent(tmp_path / "m.onnx")
    line = _serve_error(str(tmp_path / "m.onnx"))
    assert "m.onnx does not match the onnx_sha256 recorded in m.json" in line


@pytest.mark.parametrize("name,values,words", [
    ("v.bias", np.array([-1.17e34]), "its value 1.17e+34 is beyond any game's"),
    ("pi.bias", np.full(201, np.nan), "its probabilities are not finite"),
    ("v.bias", np.array([np.inf]), "its value is not finite")])
def test_a_lone_model_runs_on_known_positions_before_it_serves(exported: Path, tmp_path: Path, name: str,
                                                               values: np.ndarray, words: str) -> None:
    """No sidecar, so no hash: the known-input check is what stands between it and the players."""
    onnx_name = next(i.name for i in onnx.load(str(exported / "policy.onnx")).graph.initializer
                     if i.name.endswith(name))
    _set_initializer(exported / "policy.onnx", tmp_path / "bad.onnx", onnx_name, values)
    with pytest.raises(CheckpointError, match=re.escape(f"bad.onnx: on known positions {words}")):
        OnnxAgent(tmp_path / "bad.onnx")
    with pytest.raises(ValueError, match="on known positions"):
        Bot(str(tmp_path / "bad.onnx"))


def test_a_sound_lone_model_still_serves(exported: Path, tmp_path: Path) -> None:
    shutil.copy(exported / "policy.onnx", tmp_path / "lone.onnx")
    assert OnnxAgent(tmp_path / "lone.onnx").name == "tiny"  # the metadata embedded in the .onnx


def test_a_non_finite_answer_is_a_clear_503_not_a_500(exported: Path) -> None:
    bot = Bot(str(exported))
    g = Game.new("hoi_quan_bai", 4, seed=3)
    body = {"format": "samloc/1", "rules": "hoi_quan_bai", "players": 4, "opener": g.opener, "seat": g.to_act,
            "hand": [card_str(c) for c in g.hand(g.to_act)], "events": []}
    table = {"rules": "hoi_quan_bai", "players": 4, "seed": 7}
    with TestClient(create_app(bot=bot, allow_client_seed=True), raise_server_exceptions=False) as c:
        assert c.post("/v1/act", json=body).status_code == 200
        opener = c.post("/play/api/new", json={**table, "seat": 0}).json()["opener"]
        bot.onnx._infer = lambda obs, mask: (np.full((len(obs), 201), np.nan, np.float32),  # type: ignore
                                             np.zeros(len(obs), np.float32))
        r = c.post("/v1/act", json=body)
        assert r.status_code == 503, r.text
        assert r.json()["error"] == ("the model tiny cannot answer this position:"
                                     " its probabilities are not finite")
        # the same deal, seen from the seat after the opener's: a bot moves before the human can
        r = c.post("/play/api/new", json={**table, "seat": (opener + 1) % 4})
        assert r.status_code == 503 and "not finite" in r.json()["error"]
    with pytest.raises(AgentFailure, match="not finite"):
        bot.onnx.act(g, g.to_act)


def test_a_folder_is_not_served_from_an_onnx_file_of_other_weights(exported: Path, tmp_path: Path) -> None:
    folder = _copy(exported, tmp_path / "retrained")
    other = _checkpoint(tmp_path / "other", seed=1)
    for name in ("model.safetensors", "metadata.json"):  # retrained in place, the ONNX file left stale
        shutil.copy(other / name, folder / name)
    words = f"policy.onnx was not exported from {folder}/model.safetensors"
    with pytest.raises(CheckpointError, match=words):
        Bot(str(folder))
    line = _serve_error(str(folder))
    assert words in line and f"samloc export {folder}" in line
    assert Bot(str(exported)).name == "tiny"


# ---- a network broken before it was written: every load path runs it on known positions ----------
def _nan_copy(src: Path, dest: Path) -> Path:
    """``src`` without its export, every float tensor NaN, the hashes in metadata.json recomputed: a
    checkpoint whose files are intact but whose network answers nothing."""
    folder = _copy(src, dest)
    for name in ("policy.onnx", "policy.json"):
        (folder / name).unlink(missing_ok=True)
    weights = folder / "model.safetensors"
    tensors = {k: torch.full_like(v, float("nan")) if v.is_floating_point() else v
               for k, v in load_file(str(weights)).items()}
    save_file(tensors, str(weights))
    meta = json.loads((folder / "metadata.json").read_text())
    meta["sha256"]["model.safetensors"] = file_sha256(weights)
    (folder / "metadata.json").write_text(json.dumps(sealed(meta)))
    return folder


def _one_line_failure(*argv: str) -> str:
    """``samloc ARGV`` must fail with one line on stderr and no traceback: that line."""
    r = subprocess.run([sys.executable, "-m", "samloc", *argv], capture_output=True, text=True, cwd=ROOT,
                       env=ENV, timeout=300)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


NAN_WORDS = "on known positions its probabilities are not finite: the network is damaged"


@pytest.mark.slow
def test_a_nan_network_is_refused_by_every_load_path(exported: Path, tmp_path: Path) -> None:
    folder = _nan_copy(exported, tmp_path / "nan")
    for load in (lambda: load_checkpoint(folder), lambda: make_agent(str(folder)),
                 lambda: make_agent(f"{folder}+search"), lambda: export(folder, samples=20)):
        with pytest.raises(CheckpointError, match=re.escape(f"{folder}: {NAN_WORDS}")):
            load()
    assert not (folder / "policy.onnx").exists()
    assert _serve_error(str(folder)).endswith(f"{folder}: {NAN_WORDS} (train it again, or load an earlier"
                                              " checkpoint)")
    assert NAN_WORDS in _one_line_failure("export", str(folder))
    assert NAN_WORDS in _one_line_failure("eval", "--agent", str(folder), "--opponents", "heuristic",
                                          "--deals", "2")


def test_the_shipped_standard_checkpoint_turned_nan_is_refused(tmp_path: Path) -> None:
    folder = _nan_copy(ROOT / "checkpoints" / "standard", tmp_path / "standard")
    with pytest.raises(CheckpointError, match=re.escape(NAN_WORDS)):
        load_checkpoint(folder)
    load_checkpoint(ROOT / "checkpoints" / "standard")  # the shipped one passes the same check


def test_a_run_folder_is_served_from_its_newest_good_checkpoints_export(exported: Path,
                                                                       tmp_path: Path) -> None:
    """As eval and league read it: the run folder stands for its newest checkpoint that verifies."""
    run = tmp_path / "runs" / "quick__0"
    good = _copy(exported, run / "checkpoints" / "ckpt_00000001")
    (run / "checkpoints" / "ckpt_00000002").mkdir()  # cut short: skipped
    (run / "checkpoints" / "ckpt_00000002" / "metadata.json").write_text("{")
    bot = Bot(str(run))
    assert bot.onnx is not None and bot.note == ""
    assert bot.checkpoint == str(good / "policy.onnx")
    assert Bot(f"{run}+search:worlds=1,candidates=2,critic=0").checkpoint == str(good)


# ---- sizes and shapes, before anything is allocated -------------------------------------------------
def _edit_metadata(folder: Path, **model: int) -> None:
    meta = json.loads((folder / "metadata.json").read_text())
    meta["model"].update(model)
    (folder / "metadata.json").write_text(json.dumps(sealed(meta)))  # a consistent edit: the later checks


@pytest.mark.slow
def test_an_absurd_model_shape_is_refused_before_it_is_built(exported: Path, tmp_path: Path) -> None:
    folder = _copy(exported, tmp_path / "absurd")
    for name in ("policy.onnx", "policy.json"):
        (folder / name).unlink()  # served with PyTorch
    _edit_metadata(folder, hidden=300_000)
    t0 = time.monotonic()
    with pytest.raises(CheckpointError, match=r"the network it describes has [\d,]+ parameters, more than"):
        load_checkpoint(folder)
    assert time.monotonic() - t0 < 30
    assert "parameters, more than" in _serve_error(str(folder))
    for bad, words in (({"hidden": 64, "layers": 10**9}, "layers must be an integer from 1 to 256"),
                       ({"hidden": -1}, "hidden must be an integer from 1"),
                       ({"hidden": True}, "hidden must be an integer")):
        _edit_metadata(folder, **bad)
        with pytest.raises(CheckpointError, match=words):
            load_checkpoint(folder)


def test_the_shape_must_be_the_one_the_weights_hold(exported: Path, tmp_path: Path) -> None:
    folder = _copy(exported, tmp_path / "mismatch")
    _edit_metadata(folder, hidden=128)
    with pytest.raises(CheckpointError, match=r"model.safetensors does not hold the network its metadata"
                                              r" describes \(blocks.0.bias: \[64\], expected \[128\]\)"):
        load_checkpoint(folder)


def test_a_weights_file_whose_tensors_overrun_it_is_refused(exported: Path, tmp_path: Path) -> None:
    folder = _copy(exported, tmp_path / "cut")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    meta = json.loads((folder / "metadata.json").read_text())
    meta["sha256"]["model.safetensors"] = file_sha256(weights)  # the damage recorded as if it were the file
    (folder / "metadata.json").write_text(json.dumps(sealed(meta)))
    with pytest.raises(CheckpointError, match="does not lie in the file"):
        load_checkpoint(folder)


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "huge", "directory"])
def test_json_files_must_be_small_regular_files(exported: Path, tmp_path: Path, kind: str) -> None:
    """metadata.json, the sidecar and the belief's JSON; the server's reports are optional and skipped."""
    folder = _copy(exported, tmp_path / "f")
    torch.manual_seed(0)
    save_belief(folder, BeliefNet(obs_mod.OBS_SIZE, 8), {})

    def spoil(path: Path) -> None:
        path.unlink()  # a regular file here
        if kind == "dev_zero":
            path.symlink_to("/dev/zero")
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "huge":
            path.write_text(" " * (MAX_JSON_BYTES + 1))
        else:
            path.mkdir()

    words = "bytes, more than such a file may have" if kind == "huge" else "not a regular file"
    spoil(folder / "metadata.json")
    with pytest.raises(CheckpointError, match=f"metadata.json: .*{words}"):
        load_checkpoint(folder)
    spoil(folder / "policy.json")
    with pytest.raises(CheckpointError, match=f"policy.json: .*{words}"):
        OnnxAgent(folder / "policy.onnx")
    spoil(folder / "belief.json")
    with pytest.raises(ValueError, match=f"belief.json: .*{words}"):
        load_belief(folder)
    (folder / "policy.json").rmdir() if kind == "directory" else (folder / "policy.json").unlink()
    shutil.copy(exported / "policy.json", folder / "policy.json")
    (folder / "eval_report.json").write_text("{}")
    spoil(folder / "eval_report.json")
    assert Bot(str(folder)).strength == {}


def test_the_belief_shape_must_be_the_one_its_weights_hold(tmp_path: Path) -> None:
    torch.manual_seed(0)
    save_belief(tmp_path, BeliefNet(obs_mod.OBS_SIZE, 8), {})
    meta = json.loads((tmp_path / "belief.json").read_text())
    for hidden, words in ((10**7, "parameters, more than"), (16, "does not hold the network")):
        (tmp_path / "belief.json").write_text(json.dumps({**meta, "hidden": hidden}))
        with pytest.raises(ValueError, match=words):
            load_belief(tmp_path)


def test_the_shape_tables_are_the_networks() -> None:
    """policy_shapes and belief_shapes, worked out without torch, are what the modules build."""
    for hidden, layers, critic in ((8, 1, "obs"), (16, 3, "full"), (32, 2, "obs")):
        net = build_net(hidden, layers, critic)
        assert policy_shapes(net.hparams()) == {k: tuple(v.shape) for k, v in net.state_dict().items()}
    belief = BeliefNet(obs_mod.OBS_SIZE, 24)
    assert belief_shapes(obs_mod.OBS_SIZE, 24, PLACES, core.NR) == \
        {k: tuple(v.shape) for k, v in belief.state_dict().items()}


def test_the_shipped_bot_records_and_matches_every_hash() -> None:
    folder = ROOT / "checkpoints" / "standard"
    if not (folder / "policy.onnx").is_file():
        pytest.skip("no shipped bot")
    side = json.loads((folder / "policy.json").read_text())
    assert side["onnx_sha256"] == file_sha256(folder / "policy.onnx")
    assert side["checkpoint_sha256"] == file_sha256(folder / "model.safetensors")
    assert Bot(str(folder)).name == "standard"
