"""What an ONNX policy may contain, read from its graph before onnxruntime builds or runs it.

onnxruntime folds constants while it builds a session and allocates what the graph declares, so a
hostile file can hang or exhaust the server at load (a ``Loop`` of 10^13 iterations), or pass the
known-position check and fail every request (a fixed batch of 16).  :func:`check_graph` refuses
such a file in one line, in time bounded by the file's size: only the operators of a feed-forward
policy (:data:`ALLOWED_OPS`; no ``Loop``, ``Scan``, ``If``, sub-graphs, functions or custom domains),
a batch dimension that is symbolic, weights of at most :data:`MAX_PARAMS` numbers stored in the file,
and, with shapes inferred at a batch of one, every tensor at most :data:`MAX_ELEMENTS` numbers and
the whole pass at most :data:`MAX_COST` operations per position.
"""

from __future__ import annotations

import math
from typing import Any

import onnx
from onnx import shape_inference

from sam_env.actions import NUM_ACTIONS
from sam_env.obs import OBS_SIZE

from ..nets.format import CheckpointError

#: The operators of a feed-forward policy, each costing about its tensors' sizes (matrix products:
#: their multiply-adds); ``samloc export`` uses a dozen of them for the MLP, about thirty for the parts of
#: agents/nets/parts.py (CumSum and OneHot among them: a hand's table index and its one-hot features).
ALLOWED_OPS = frozenset({
    "Abs", "Add", "And", "ArgMax", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat", "Constant",
    "ConstantOfShape", "CumSum", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor",
    "Gather", "Gelu", "Gemm", "Greater", "GreaterOrEqual", "HardSigmoid", "Identity", "IsInf", "IsNaN",
    "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max",
    "Min", "Mul", "Neg", "Not", "OneHot", "Or", "Pow", "Reciprocal", "ReduceMax", "ReduceMean", "ReduceMin",
    "ReduceSum", "Relu", "Reshape", "Round", "Selu", "Shape", "Sigmoid", "Sign", "Size", "Slice",
    "Softmax", "Softplus", "Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Transpose", "Unsqueeze",
    "Where", "Xor"})
MAX_NODES = 10_000          # an exported policy has about 20
MAX_PARAMS = 1 << 28        # numbers in weights and constants (the checkpoint's own shape bound)
MAX_ELEMENTS = 1 << 26      # numbers in any one tensor at a batch of one (256 MiB of float32)
MAX_COST = 1 << 30          # operations (multiply-adds, elements) per position; a policy: ~1e6
INPUTS = {"obs": OBS_SIZE, "mask": NUM_ACTIONS}
OUTPUTS = ("probs", "value")


def check_graph(blob: bytes, where: str) -> None:
    """CheckpointError (one line naming ``where`` and the problem) unless ``blob`` is an ONNX policy
    this server can build and run in bounded time and memory (the module docstring's rules)."""
    try:
        model = onnx.load_model_from_string(blob)
    except Exception as exc:  # protobuf's DecodeError, onnx's own
        raise CheckpointError(f"cannot load ONNX model {where}: {one_line(exc)}") from None
    problem = _structure_problem(model) or _io_problem(model.graph) or _size_problem(model)
    if problem:
        raise CheckpointError(f"{where} is refused: {problem}")


def one_line(exc: BaseException) -> str:
    """An exception's text as one line of at most 200 characters (onnx's and onnxruntime's span many)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _structure_problem(model: Any) -> str | None:
    """Operators, domains, sub-graphs, functions and stored weights."""
    graph = model.graph
    if model.functions:
        return f"it defines functions ({model.functions[0].name}); a policy uses only standard operators"
    if len(graph.node) > MAX_NODES:
        return f"it has {len(graph.node)} operators, more than {MAX_NODES}"
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            return f"operator {node.op_type} of domain {node.domain!r} is not a standard one"
        if node.op_type not in ALLOWED_OPS:
            return (f"operator {node.op_type} ({node.name or 'unnamed'}) is not one a feed-forward policy"
                    " uses (no loops, branches or generators)")
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            return f"operator {node.op_type} holds a sub-graph"
    if graph.sparse_initializer:
        return "it has sparse weights"
    tensors = list(graph.initializer) + [a.t for n in graph.node for a in n.attribute
                                         if a.type == onnx.AttributeProto.TENSOR]
    total = 0
    for t in tensors:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            return f"weight {t.name} is stored outside the file"
        if any(d < 0 for d in t.dims):
            return f"weight {t.name} has a negative dimension"
        total += math.prod(t.dims)
        if total > MAX_PARAMS:
            return f"its weights and constants hold more than {MAX_PARAMS} numbers"
    return None


def _dims(value: Any) -> list[Any] | None:
    """A value's declared dimensions (an int, a symbol, or None where unset); None without a shape."""
    t = value.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]


def _io_problem(graph: Any) -> str | None:
    """Inputs obs and mask, outputs probs and value, each with a symbolic batch dimension: a fixed
    one passes a check of 16 positions and then fails every request of one."""
    weights = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in weights]
    if [v.name for v in inputs] != list(INPUTS):
        return f"its inputs must be obs and mask, not {[v.name for v in inputs]}"
    for v in inputs:
        dims = _dims(v)
        if dims is None or len(dims) != 2 or dims[1] != INPUTS[v.name]:
            return f"input {v.name} must have the shape [batch, {INPUTS[v.name]}], not {dims}"
    outputs = {v.name: _dims(v) for v in graph.output}
    if sorted(outputs) != sorted(OUTPUTS):
        return f"its outputs must be probs and value, not {list(outputs)}"
    for v in [*inputs, *graph.output]:
        dims = _dims(v)
        if dims and isinstance(dims[0], int):
            return (f"{v.name} has a fixed batch dimension of {dims[0]}; an exported policy's is symbolic"
                    " (any batch size)")
    return None


def _size_problem(model: Any) -> str | None:
    """Every tensor's size and the pass's cost at a batch of one, from onnx's shape inference; a
    size it cannot tell (what only running would show) is refused."""
    one = onnx.ModelProto()
    one.CopyFrom(model)
    for v in one.graph.input:
        if v.name in INPUTS:
            v.type.tensor_type.shape.dim[0].dim_value = 1
    try:
        inferred = shape_inference.infer_shapes(one, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:  # onnx's InferenceError, ValidationError
        return f"its shapes are inconsistent ({one_line(exc)})"
    graph = inferred.graph
    shapes: dict[str, list[Any] | None] = {v.name: _dims(v) for v in
                                           [*graph.input, *graph.value_info, *graph.output]}
    shapes.update({t.name: list(t.dims) for t in graph.initializer})
    cost = 0
    for node in graph.node:
        sizes = []
        for name in [*node.input, *node.output]:
            if not name:
                continue
            dims = shapes.get(name)
            if dims is None or not all(isinstance(d, int) for d in dims):
                return f"the size of {name} ({node.op_type}) cannot be known before it runs"
            sizes.append(math.prod(dims))
            if sizes[-1] > MAX_ELEMENTS:
                return f"{name} ({node.op_type}) would hold {sizes[-1]} numbers, more than {MAX_ELEMENTS}"
        cost += sum(sizes)
        if node.op_type in ("MatMul", "Gemm") and shapes.get(node.input[0]):
            a, out = shapes[node.input[0]], shapes[node.output[0]]
            trans = any(x.name == "transA" and x.i for x in node.attribute)
            cost += math.prod(out or [1]) * (a[0] if trans and len(a) == 2 else a[-1])
        if cost > MAX_COST:
            return f"one position would take more than {MAX_COST} operations"
    return None
