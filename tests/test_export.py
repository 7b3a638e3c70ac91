"""``samloc export`` and the ONNX agent: the exported policy is the PyTorch policy.

A small untrained network (random weights, so its outputs are far from
uniform) stands in for a trained checkpoint; the check does not depend on
what the network learned.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from agents import make_agent  # noqa: E402
from agents.nets.export import RANDOM_TOLERANCE, TOLERANCE, export  # noqa: E402
from agents.players.onnx_agent import OnnxAgent, choose_action  # noqa: E402
from agents.serving.app import create_app  # noqa: E402
from sam_env import obs as obs_mod  # noqa: E402
from sam_env.actions import ACTION_TABLE_VERSION, NO_SAM, NUM_ACTIONS  # noqa: E402
from sam_env.cards import card_str  # noqa: E402
from sam_env.game import Game  # noqa: E402
from agents.nets.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from agents.nets.policy import PolicyNet  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def tiny_checkpoint(path: Path, rules=("hoi_quan_bai",), players=(4,)) -> Path:
    torch.manual_seed(0)
    net = PolicyNet(obs_mod.OBS_SIZE, hidden=64, layers=2)
    for p in net.parameters():
        torch.nn.init.normal_(p, 0.0, 0.1)
    return save_checkpoint(path, net, {"name": "tiny", "rules": list(rules), "players": list(players),
                                       "obs_version": obs_mod.OBS_VERSION,
                                       "action_table_version": ACTION_TABLE_VERSION})


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    ckpt = tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "ckpt_1")
    side = export(ckpt)
    return ckpt, side


def test_export_matches_pytorch_and_writes_the_sidecar(exported: tuple[Path, dict]) -> None:
    ckpt, side = exported
    model, sidecar = ckpt / "policy.onnx", ckpt / "policy.json"
    assert model.is_file() and sidecar.is_file()
    assert not [p for p in ckpt.iterdir() if p.name.startswith(".tmp")]
    meta = json.loads(sidecar.read_text())
    assert meta["obs_version"] == obs_mod.OBS_VERSION and meta["obs_size"] == obs_mod.OBS_SIZE
    assert meta["action_table_version"] == ACTION_TABLE_VERSION and meta["num_actions"] == NUM_ACTIONS
    assert meta["rules"] == ["hoi_quan_bai"] and meta["players"] == [4]
    check = meta["check"]
    assert check["samples"] == 2000 and check["positions"]["n"] == 1000 and check["random"]["n"] == 1000
    assert max(check["positions"]["max_abs_diff_probs"], check["positions"]["max_abs_diff_value"]) < TOLERANCE
    assert check["max_abs_diff"] < RANDOM_TOLERANCE and check["random_tolerance"] == RANDOM_TOLERANCE
    assert check["positions"]["same_argmax"] == 1.0


def test_onnx_agent_agrees_with_pytorch_on_fresh_positions(exported: tuple[Path, dict]) -> None:
    """Independent of the export's own check: new positions, our own comparison."""
    ckpt, _ = exported
    net, _ = load_checkpoint(ckpt)
    agent = OnnxAgent(ckpt / "policy.onnx")
    rng = random.Random(5)
    worst = 0.0
    for seed in range(30):
        g = Game.new("hoi_quan_bai", 4, seed=1000 + seed)
        while not g.finished:
            s = g.to_act
            probs, value, mask = agent.policy(g, s)
            with torch.no_grad():
                logits, v = net(torch.from_numpy(obs_mod.encode(g, s)[None]), torch.from_numpy(mask[None]))
            expect = torch.softmax(logits, -1)[0].numpy()
            worst = max(worst, float(np.abs(probs - expect).max()), abs(value - float(v[0])))
            assert probs[mask == 0].max() == 0.0 and abs(probs.sum() - 1) < 1e-5
            a = agent.act(g, s)
            assert a == int(np.argmax(expect)) and mask[a] == 1
            legal = g.legal_actions()
            g.apply(NO_SAM if NO_SAM in legal else rng.choice(legal))
    assert worst < TOLERANCE


def test_act_batch_matches_act_and_make_agent_loads_onnx(exported: tuple[Path, dict]) -> None:
    ckpt, _ = exported
    agent = make_agent(str(ckpt / "policy.onnx"), seed=3)
    assert isinstance(agent, OnnxAgent) and agent.name == "tiny"
    games = [Game.new("hoi_quan_bai", 4, seed=s) for s in range(40)]
    games = [g for g in games if not g.finished]
    states = np.stack([g.state for g in games])
    masks = np.stack([g.legal_mask() for g in games])
    rule_array = games[0].rules_array
    batched = agent.act_batch(states, rule_array, None, masks)
    assert list(batched) == [agent.act(g, g.to_act) for g in games]


def test_temperature_samples_reproducibly() -> None:
    probs = np.array([0.5, 0.3, 0.2] + [0.0] * (NUM_ACTIONS - 3), dtype=np.float32)
    mask = np.zeros(NUM_ACTIONS, dtype=np.int8)
    mask[:3] = 1
    assert choose_action(probs, mask, 0.0, None) == 0
    draws = [choose_action(probs, mask, 1.0, np.random.default_rng(s)) for s in range(2000)]
    freq = np.bincount(draws, minlength=3)[:3] / 2000
    assert np.allclose(freq, [0.5, 0.3, 0.2], atol=0.04) and set(draws) <= {0, 1, 2}
    hot = [choose_action(probs, mask, 0.1, np.random.default_rng(s)) for s in range(200)]
    assert hot.count(0) > 190  # a low temperature is nearly greedy
    assert draws[:50] == [choose_action(probs, mask, 1.0, np.random.default_rng(s)) for s in range(50)]


def test_server_serves_the_onnx_model_only_for_its_rules(exported: tuple[Path, dict]) -> None:
    ckpt, _ = exported
    with TestClient(create_app(str(ckpt))) as c:
        info = c.get("/v1/info").json()
        assert info["name"] == "tiny" and info["checkpoint"].endswith("policy.onnx")
        assert info["rules"] == ["hoi_quan_bai"] and info["players"] == [4]
        g = Game.new("hoi_quan_bai", 4, seed=2)
        rng = random.Random(0)
        while not g.finished:
            s = g.to_act
            req = {"format": "samloc/1", "rules": "hoi_quan_bai", "players": 4, "opener": g.opener, "seat": s,
                   "hand": [card_str(x) for x in g.hand(s)], "events": list(g.events)}
            r = c.post("/v1/act", json=req)
            assert r.status_code == 200, r.text
            body = r.json()
            assert 0 < len(body["info"]["top"]) <= 3 and isinstance(body["info"]["value"], float)
            assert c.post("/v1/act", json=req).json() == body  # deterministic
            g.apply(body["event"])
            legal = g.legal_actions() if not g.finished else []
            if NO_SAM in legal:
                g.apply(NO_SAM)
            elif legal and rng.random() < 0.5:
                g.apply(rng.choice(legal))
        bad = dict(req, rules="s666pg")
        r = c.post("/v1/act", json=bad)
        assert r.status_code == 422 and "no bot here plays s666pg with 4 players" in r.json()["error"]
        r = c.post("/v1/act", json=dict(req, players=3))
        assert r.status_code == 422 and ("plays hoi_quan_bai with 3 players; "
                                         "this server plays hoi_quan_bai with 4" in r.json()["error"])


def test_sampling_server_is_reproducible_per_request(exported: tuple[Path, dict]) -> None:
    ckpt, _ = exported
    g = Game.new("hoi_quan_bai", 4, seed=9)
    reqs = []
    while not g.finished and len(reqs) < 40:
        s = g.to_act
        reqs.append({"format": "samloc/1", "rules": "hoi_quan_bai", "players": 4, "opener": g.opener,
                     "seat": s, "hand": [card_str(x) for x in g.hand(s)], "events": list(g.events)})
        legal = g.legal_actions()
        g.apply(NO_SAM if NO_SAM in legal else legal[-1])
    runs = []
    for _ in range(2):
        with TestClient(create_app(str(ckpt / "policy.onnx"), temperature=2.0, seed=1)) as c:
            runs.append([c.post("/v1/act", json=r).json()["event"] for r in reqs])
    assert runs[0] == runs[1]
    with TestClient(create_app(str(ckpt / "policy.onnx"))) as c:
        greedy = [c.post("/v1/act", json=r).json()["event"] for r in reqs]
    assert greedy != runs[0]  # a hot temperature changes some choices


@pytest.mark.slow
def test_export_cli_errors_and_custom_output(tmp_path: Path, exported: tuple[Path, dict]) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "samloc", "export", str(tmp_path / "missing")],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 1 and "no such checkpoint" in r.stderr and "Traceback" not in r.stderr
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "metadata.json").write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "samloc", "export", str(broken)],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 1 and "metadata" in r.stderr and "Traceback" not in r.stderr
    ckpt, _ = exported
    out = tmp_path / "bot.onnx"
    r = subprocess.run([sys.executable, "-m", "samloc", "export", str(ckpt), "--out", str(out),
                        "--samples", "200", "--json"], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    side = json.loads(r.stdout.strip().splitlines()[-1])
    assert side["path"] == str(out) and (tmp_path / "bot.json").is_file()
    assert side["check"]["max_abs_diff"] < TOLERANCE
    agent = OnnxAgent(out)
    assert agent.metadata["checkpoint"] == str(ckpt)


def test_onnx_agent_refuses_mismatched_models(tmp_path: Path, exported: tuple[Path, dict]) -> None:
    ckpt, _ = exported
    model = tmp_path / "m.onnx"
    model.write_bytes((ckpt / "policy.onnx").read_bytes())
    meta = json.loads((ckpt / "policy.json").read_text())
    (tmp_path / "m.json").write_text(json.dumps(dict(meta, obs_version=meta["obs_version"] + 1)))
    with pytest.raises(ValueError, match="obs_version"):
        OnnxAgent(model)
    (tmp_path / "m.json").unlink()
    assert OnnxAgent(model).metadata["name"] == "tiny"  # the metadata embedded in the .onnx
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="cannot load ONNX model"):
        OnnxAgent(tmp_path / "junk.onnx")
