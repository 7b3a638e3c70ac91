"""``model.kind``: the registered MLP or a user's network by import path, built by one factory.

The shipped checkpoints (no ``kind`` in their metadata) load as the MLP they were; a config naming
a network that does not exist is refused at load in one line; a user's network
(tests/custom_net.py) trains with ``samloc train``, searches, exports and serves like the MLP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
with warnings.catch_warnings():  # Starlette's notice about httpx, at import
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from agents.nets.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from agents.nets.factory import NetworkError, build_network, network_class  # noqa: E402
from agents.nets.format import MODEL_FILE, CheckpointError, policy_shapes, read_metadata, sealed  # noqa: E402
from agents.nets.policy import PolicyNet, build_net  # noqa: E402
from agents.players.policy_agent import PolicyAgent  # noqa: E402
from agents.players.search import SearchAgent  # noqa: E402
from agents.serving.app import create_app  # noqa: E402
from sam_env import obs as obs_mod  # noqa: E402
from sam_env.actions import ACTION_TABLE_VERSION, NUM_ACTIONS  # noqa: E402
from sam_env.cards import card_str  # noqa: E402
from sam_env.game import Game  # noqa: E402
from tests.custom_net import TinyNet  # noqa: E402
from training.config import ConfigError  # noqa: E402
from training.config_load import load_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KIND = "tests.custom_net:TinyNet"
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
    [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))  # tests.custom_net, in Ray's workers too
META = {"name": "tiny", "rules": ["hoi_quan_bai"], "players": [4], "obs_version": obs_mod.OBS_VERSION,
        "action_table_version": ACTION_TABLE_VERSION}


def _tiny(critic: bool = True, width: int = 8) -> TinyNet:
    torch.manual_seed(0)
    return TinyNet(obs_mod.OBS_SIZE, NUM_ACTIONS, obs_mod.FULL_EXTRA if critic else 0, width=width)


# ---- the registered MLP: every shipped checkpoint as it was ---------------------------------------------
@pytest.mark.parametrize("name", ["standard", "expert", "all_tables"])
def test_a_checkpoint_without_kind_is_the_mlp_it_was(name: str) -> None:
    ckpt = ROOT / "checkpoints" / name
    if not (ckpt / MODEL_FILE).exists():
        pytest.skip("no shipped bot")
    raw = json.loads((ckpt / "metadata.json").read_text())
    assert "kind" not in raw["model"]
    net, meta = load_checkpoint(ckpt)
    assert type(net) is PolicyNet and meta.model == {"kind": "mlp", **raw["model"]}
    assert net.hparams() == meta.model
    from safetensors.torch import load_file
    weights = load_file(str(ckpt / MODEL_FILE))
    assert {k: tuple(v.shape) for k, v in weights.items()} == policy_shapes(raw["model"])
    assert all(torch.equal(weights[k], v) for k, v in net.state_dict().items())


def test_the_mlp_config_builds_the_network_it_always_did() -> None:
    cfg = load_config("quick", ["model.hidden=32", "model.layers=2"])
    torch.manual_seed(0)
    built = cfg.model.build()
    torch.manual_seed(0)
    direct = build_net(32, 2, "full")
    assert type(built) is PolicyNet and built.hparams() == direct.hparams() == cfg.model.hparams()
    assert all(torch.equal(a, b) for a, b in zip(built.state_dict().values(), direct.state_dict().values()))
    assert network_class("mlp") is PolicyNet


# ---- a kind that names nothing is one line at config load ------------------------------------------------
@pytest.mark.parametrize("overrides, message", [
    (["model.kind=transformer"],
     "model kind 'transformer' is neither a registered network (mlp, moves, history, shape, combined)"),
    (["model.kind=no_such_pkg.nets:Net"], "cannot import no_such_pkg.nets (ModuleNotFoundError: No module"),
    (["model.kind=tests.custom_net:Missing"], "Missing in tests.custom_net is not a subclass"),
    (["model.kind=tests.custom_net:NotANetwork"], "is not a subclass of agents.nets.interface.PolicyNetwork"),
    ([f"model.kind={KIND}", "model.kwargs.depth=3"], "unexpected keyword argument 'depth'"),
    ([f"model.kind={KIND}", "model.kwargs.obs_size=3"], "model.kwargs.obs_size"),
    (["model.kwargs.width=3"], "model.kwargs is for a user's model.kind"),
])
def test_a_bad_kind_is_refused_at_load(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=None) as err:
        load_config("quick", overrides)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow
def test_dry_run_says_it() -> None:
    r = subprocess.run([sys.executable, "-m", "samloc", "train", "--config", "quick",
                        "model.kind=transformer", "--dry-run"],
                       capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "samloc train: model kind 'transformer' is neither a registered network (mlp, moves, history, shape,"
        " combined) nor an import path"
        " package.module:Class"]


# ---- a user's network: the interface's defaults, checkpoints, search ---------------------------------------
def test_the_interface_defaults_follow_forward_and_train_forward() -> None:
    net = _tiny().eval()
    obs, hands = torch.rand(6, obs_mod.OBS_SIZE), torch.rand(6, obs_mod.FULL_EXTRA)
    ones = torch.ones(6, NUM_ACTIONS)
    with torch.no_grad():
        logits, value, critic = net.train_forward(obs, ones, hands)
        torch.testing.assert_close(net.policy_logits(obs), logits)
        torch.testing.assert_close(net.leaf_value(obs, hands, 0.0), value)
        torch.testing.assert_close(net.baseline(obs, hands), critic)
        torch.testing.assert_close(net.leaf_value(obs, hands, 0.25), 0.25 * critic + 0.75 * value)
        bare = _tiny(critic=False)
        torch.testing.assert_close(bare.baseline(obs, hands), bare(obs, ones)[1])
    with pytest.raises(ValueError, match="no critic"):
        bare.leaf_value(obs, hands, 0.5)
    assert net.hparams() == {"kind": KIND, "obs_size": obs_mod.OBS_SIZE, "num_actions": NUM_ACTIONS,
                             "critic_size": obs_mod.FULL_EXTRA, "width": 8}


def test_a_users_checkpoint_records_its_kind_and_loads_its_class(tmp_path: Path) -> None:
    net = _tiny()
    ckpt = save_checkpoint(tmp_path / "tiny", net, META)
    assert read_metadata(ckpt).model == net.hparams()
    loaded, _ = load_checkpoint(ckpt)
    assert type(loaded) is TinyNet and loaded.hparams() == net.hparams()
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), net.state_dict().values()))
    twin = build_network(net.hparams())
    assert type(twin) is TinyNet and twin.width == 8
    # weights of another shape are refused before anything is built; so is a module that is not there
    meta = json.loads((ckpt / "metadata.json").read_text())
    meta["model"]["width"] = 9
    (ckpt / "metadata.json").write_text(json.dumps(sealed(meta)))
    with pytest.raises(CheckpointError, match=r"model.safetensors does not hold the network its metadata"):
        load_checkpoint(ckpt)
    meta["model"]["kind"] = "gone_pkg.nets:TinyNet"
    (ckpt / "metadata.json").write_text(json.dumps(sealed(meta)))
    with pytest.raises(CheckpointError, match=r"its model gone_pkg.nets:TinyNet does not build \(model kind"):
        load_checkpoint(ckpt)
    with pytest.raises(NetworkError, match="neither a registered network"):
        build_network({"kind": "gone"})


def test_search_plays_a_users_network() -> None:
    agent = SearchAgent(PolicyAgent(_tiny(), name="tiny"), candidates=2, worlds=2, horizon=1, critic=50,
                        bf16=torch.ops.mkldnn._is_mkldnn_bf16_supported())
    g = Game.new("hoi_quan_bai", 4, seed=3)
    while not g.finished:
        g.apply(agent.act(g, g.to_act))
    assert g.result is not None
    with pytest.raises(ValueError, match="has no critic"):
        SearchAgent(PolicyAgent(_tiny(critic=False), name="bare"), 2, 2, 1, critic=50)


# ---- and end to end: samloc train, export, serve, eval -----------------------------------------------------
def _samloc(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "samloc", *args], capture_output=True, text=True, env=ENV,
                       cwd=ROOT, timeout=timeout)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


@pytest.mark.slow
def test_a_users_network_trains_exports_serves_and_evaluates(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _samloc("train", "--config", "quick", "--run-dir", str(run), f"model.kind={KIND}",
            "warm_start.decisions=0",
            "model.kwargs.width=12", "rollout.num_workers=1", "rollout.envs_per_worker=32",
            "rollout.steps_per_rollout=8",
            "ppo.batch_decisions=200", "ppo.minibatch=128", "ppo.epochs=1", "total_decisions=5000",
            "eval.every_updates=0", "eval.final_deals=0", "belief.deals=0", "checkpoint.every_updates=10",
            "display=none", "max_minutes=0")
    summary = json.loads((run / "summary.json").read_text())
    ckpt = Path(summary["checkpoint"])
    assert summary["updates"] >= 5
    net, meta = load_checkpoint(ckpt)
    assert type(net) is TinyNet and meta.model["kind"] == KIND and meta.model["width"] == 12
    assert (ckpt / "policy.onnx").is_file()  # the run's own export
    out = tmp_path / "tiny.onnx"
    side = json.loads(_samloc("export", str(ckpt), "--out", str(out), "--samples", "50", "--json")
                      .stdout.strip().splitlines()[-1])
    assert side["model"]["kind"] == KIND and side["check"]["max_abs_diff"] < 1e-4
    with TestClient(create_app(str(ckpt))) as client:  # the server's ONNX agent, from the checkpoint folder
        g = Game.new("hoi_quan_bai", 4, seed=5)
        for _ in range(8):
            s = g.to_act
            r = client.post("/v1/act", json={
                "format": "samloc/1", "rules": g.rules.to_record(), "players": g.players, "opener": g.opener,
                "seat": s, "hand": [card_str(c) for c in g.hand(s) or []], "events": list(g.events)})
            assert r.status_code == 200, r.text
            g.apply(r.json()["event"])  # raises if the answer were illegal
            if g.finished:
                break
    res = json.loads(_samloc("eval", "--agent", str(ckpt), "--opponents", "random", "--deals", "8",
                             "--seed", "1", "--json", "--out", str(tmp_path / "eval"))
                     .stdout.strip().splitlines()[-1])
    assert res["deals"] == 8 and res["zero_sum"] and np.isfinite(res["mean_score"])


def test_exploit_from_a_users_checkpoint_keeps_its_network(tmp_path: Path) -> None:
    """``samloc exploit --from CKPT`` starts from the checkpoint's own network, whatever its kind."""
    from training.config_load import load_config
    from training.tools.exploit import _start_model

    net = _tiny()
    ckpt = save_checkpoint(tmp_path / "tiny", net, META)
    init_from, model = _start_model(str(ckpt))
    assert init_from == str(ckpt.resolve())
    assert model == [f"model.kind={KIND}", "model.kwargs.width=8", "model.critic=full"]
    cfg = load_config("quick", model)
    assert cfg.model.kind == KIND and cfg.model.kwargs == {"width": 8}
