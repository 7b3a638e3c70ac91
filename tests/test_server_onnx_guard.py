"""Hostile ONNX models (issue 62), built with onnx's helper API: each is refused at load in one
line, within a bounded time, and never reaches play time; the same policy without the trap loads
and serves."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from agents.players.onnx_agent import OnnxAgent  # noqa: E402
from agents.players.onnx_check import MAX_ELEMENTS, check_graph  # noqa: E402
from sam_env.actions import ACTION_TABLE_VERSION, NUM_ACTIONS  # noqa: E402
from sam_env.obs import OBS_SIZE, OBS_VERSION  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BOUND_S = 20.0   # a refusal comes well within this, on a busy machine


def _policy(batch: Any = "batch", extra: list[Any] | None = None, value_from: str = "v0",
            inits: list[Any] | None = None) -> Any:
    """A uniform policy over the legal moves with value 0: obs [batch, 993], mask [batch, 201] ->
    probs, value.  ``extra`` nodes may compute a tensor that replaces ``v0`` as the value."""
    zeros = numpy_helper.from_array(np.zeros((OBS_SIZE, NUM_ACTIONS), np.float32), "w")
    wv = numpy_helper.from_array(np.zeros((OBS_SIZE, 1), np.float32), "wv")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [
        helper.make_node("MatMul", ["obs", "w"], ["logits"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.float32))),
        helper.make_node("Greater", ["mask", "zero"], ["legal"]),
        helper.make_node("Constant", [], ["low"], value=numpy_helper.from_array(np.array(-1e9, np.float32))),
        helper.make_node("Where", ["legal", "logits", "low"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["soft"], axis=-1),
        helper.make_node("Cast", ["legal"], ["legalf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["soft", "legalf"], ["probs"]),
        helper.make_node("MatMul", ["obs", "wv"], ["v2"]),
        helper.make_node("Squeeze", ["v2", "axes"], ["v0"]),
        *(extra or []),
    ]
    if value_from != "v0":
        nodes.append(helper.make_node("Identity", [value_from], ["value"]))
    else:
        nodes[-1 - len(extra or [])].output[0] = "value"  # the Squeeze writes the value itself
    graph = helper.make_graph(
        nodes, "policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [batch, OBS_SIZE]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [batch, NUM_ACTIONS])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, NUM_ACTIONS]),
         helper.make_tensor_value_info("value", TensorProto.FLOAT, [batch])],
        [zeros, wv, axes, *(inits or [])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _constant_of_shape_2_40() -> Any:
    """The value plus the sum of a ConstantOfShape of 2^40 zeros (onnxruntime folds it at load)."""
    shape = numpy_helper.from_array(np.array([1 << 40], np.int64), "big_shape")
    extra = [helper.make_node("ConstantOfShape", ["big_shape"], ["big"]),
             helper.make_node("ReduceSum", ["big"], ["big_sum"], keepdims=0),
             helper.make_node("Add", ["v0", "big_sum"], ["v1"])]
    return _policy(extra=extra, value_from="v1", inits=[shape])


def _loop_10_13() -> Any:
    """The value plus a counter a Loop of 10^13 iterations adds up (it hung the load)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "one"], ["acc_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    inits = [numpy_helper.from_array(np.array(10**13, np.int64), "trips"),
             numpy_helper.from_array(np.array(True), "cond"),
             numpy_helper.from_array(np.array(0.0, np.float32), "acc0")]
    extra = [helper.make_node("Loop", ["trips", "cond", "acc0"], ["acc"], body=body),
             helper.make_node("Mul", ["acc", "acc0"], ["nothing"]),
             helper.make_node("Add", ["v0", "nothing"], ["v1"])]
    return _policy(extra=extra, value_from="v1", inits=inits)


HOSTILE = {
    "batch_10_15": (lambda: _policy(batch=10**15), "obs has a fixed batch dimension of 1000000000000000"),
    "constant_of_shape_2_40": (_constant_of_shape_2_40,
                               "big (ConstantOfShape) would hold 1099511627776 numbers,"
                               f" more than {MAX_ELEMENTS}"),
    "fixed_batch_16": (lambda: _policy(batch=16), "obs has a fixed batch dimension of 16"),
    "loop_10_13": (_loop_10_13, "operator Loop (unnamed) is not one a feed-forward policy uses"),
}


def _write(model: Any, folder: Path, name: str) -> Path:
    """``name``.onnx with its sidecar (versions and the file's hash, as ``samloc export`` writes)."""
    path = folder / f"{name}.onnx"
    blob = model.SerializeToString()
    path.write_bytes(blob)
    (folder / f"{name}.json").write_text(json.dumps({
        "name": name, "obs_version": OBS_VERSION, "obs_size": OBS_SIZE, "num_actions": NUM_ACTIONS,
        "action_table_version": ACTION_TABLE_VERSION, "onnx_sha256": hashlib.sha256(blob).hexdigest()}))
    return path


def test_the_policy_without_a_trap_loads_and_plays(tmp_path: Path) -> None:
    """The base of every hostile model is sound: what refuses them is the trap."""
    agent = OnnxAgent(_write(_policy(), tmp_path, "plain"))
    from sam_env.game import Game
    g = Game.new("hoi_quan_bai", 4, seed=1)
    probs, value, mask = agent.policy(g, g.to_act)
    assert value == 0.0 and abs(probs[mask > 0].sum() - 1) < 1e-5
    assert agent.act(g, g.to_act) in g.legal_actions()


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_model_is_refused_at_load_in_one_line_and_in_time(tmp_path: Path, name: str) -> None:
    build, reason = HOSTILE[name]
    path = _write(build(), tmp_path, name)
    t0 = time.monotonic()
    with pytest.raises(ValueError) as err:
        OnnxAgent(path)
    assert time.monotonic() - t0 < BOUND_S
    assert str(err.value) == f"{path} is refused: {reason}" + (
        " (no loops, branches or generators)" if name == "loop_10_13" else
        "; an exported policy's is symbolic (any batch size)" if "batch" in name else "")


def test_the_run_at_load_is_stopped_at_its_time_bound(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A model within the graph's bounds that still runs too long is stopped by onnxruntime's
    terminate flag (here after 1 ms; eight products of 2048 x 2048 per position take far longer)."""
    import agents.players.onnx_agent as onnx_agent
    monkeypatch.setattr(onnx_agent, "LOAD_CHECK_S", 0.001)
    inits = [numpy_helper.from_array(np.zeros((OBS_SIZE, 2048), np.float32), "up"),
             numpy_helper.from_array(np.zeros((2048, 2048), np.float32), "sq")]
    extra = [helper.make_node("MatMul", ["obs", "up"], ["h0"])]
    extra += [helper.make_node("MatMul", [f"h{i}", "sq"], [f"h{i + 1}"]) for i in range(8)]
    extra += [helper.make_node("ReduceSum", ["h8"], ["h_sum"], keepdims=0),
              helper.make_node("Add", ["v0", "h_sum"], ["v1"])]
    path = _write(_policy(extra=extra, value_from="v1", inits=inits), tmp_path, "slow")
    with pytest.raises(ValueError) as err:
        OnnxAgent(path)
    assert str(err.value) == f"{path}: its run on known positions did not end within 0.001 s"


def test_the_shipped_and_exported_graphs_pass_the_check() -> None:
    """The bounds leave room for every shipped bot (the exporter's dozen operators)."""
    for onnx_file in sorted((ROOT / "checkpoints").glob("*/policy.onnx")):
        check_graph(onnx_file.read_bytes(), str(onnx_file))


@pytest.mark.parametrize("model,reason", [
    (lambda: _policy(extra=[helper.make_node("Relu", ["v0"], ["v1"], domain="com.microsoft")],
                     value_from="v1"), "operator Relu of domain 'com.microsoft' is not a standard one"),
    (lambda: _policy(extra=[helper.make_node("ArgMax", ["mask"], ["am"], axis=1, keepdims=0),
                            helper.make_node("ConstantOfShape", ["am"], ["dyn"]),
                            helper.make_node("ReduceSum", ["dyn"], ["dyn_sum"], keepdims=0),
                            helper.make_node("Add", ["v0", "dyn_sum"], ["v1"])], value_from="v1"),
     "the size of dyn (ConstantOfShape) cannot be known before it runs"),
    (lambda: _policy(batch=None, extra=[helper.make_node("Relu", ["v0"], ["v1"])], value_from="v1"), None),
])
def test_custom_domains_and_unknown_sizes_are_refused(model: Any, reason: str | None) -> None:
    """A size that only running would show is refused; an unset batch dimension is a symbolic one."""
    if reason is None:
        check_graph(model().SerializeToString(), "x.onnx")
        return
    with pytest.raises(ValueError, match="^x.onnx is refused: " + re.escape(reason)):
        check_graph(model().SerializeToString(), "x.onnx")


def test_bytes_that_are_not_onnx_are_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"^cannot load ONNX model x.onnx: Error parsing message"):
        check_graph(b"\xff" * 64, "x.onnx")


def test_serve_refuses_the_hanging_loop_model_in_one_line(tmp_path: Path) -> None:
    """``samloc serve`` with the Loop that hung the load: exit 2 and one line, before any port."""
    path = _write(_loop_10_13(), tmp_path, "loop")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "samloc", "serve", "--agent", str(path), "--port", "0"],
                       capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert time.monotonic() - t0 < 180
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"samloc serve: {path} is refused: operator Loop (unnamed) is not one a"
                        " feed-forward policy uses (no loops, branches or generators)\n")


def test_a_failing_run_at_play_time_is_a_503_naming_the_model_not_a_500(tmp_path: Path) -> None:
    """Should onnxruntime still fail on a request, the answer is the model's 503, never a bug's 500."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from agents.serving.app import create_app
    from sam_env.cards import card_str
    from sam_env.game import Game

    path = _write(_policy(), tmp_path, "plain")
    with TestClient(create_app(str(path)), raise_server_exceptions=False) as c:
        bot = c.app.state.bots.bots[0]

        def broken(*_: Any, **__: Any) -> Any:
            raise RuntimeError("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions")
        bot.onnx._infer = broken
        g = Game.new("hoi_quan_bai", 4, seed=2)
        s = g.to_act
        r = c.post("/v1/act", json={"format": "samloc/1", "rules": "hoi_quan_bai", "players": 4,
                                    "opener": g.opener, "seat": s, "hand": [card_str(x) for x in g.hand(s)],
                                    "events": []})
    assert r.status_code == 503
    assert r.json() == {"error": "the model plain cannot run: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT :"
                                 " Got invalid dimensions"}
