"""profile_onnx on a model that calls local functions: each call's time is the sum of its inlined nodes'."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from gplace.profiling import onnx_op_times, profile_onnx  # noqa: E402


def _model() -> onnx.ModelProto:
    """z = relu(LinRelu(LinRelu(x, W1), W2)), LinRelu(x, W) = relu(x @ W) a local function; its body's value
    ``m`` is also the name of a graph value and of an op."""
    rng = np.random.default_rng(0)
    body = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    function = helper.make_function("my.dom", "LinRelu", ["x", "W"], ["y"], body, [helper.make_opsetid("", 17)])
    nodes = [helper.make_node("LinRelu", ["x", "W1"], ["h"], domain="my.dom", name="f1"),
             helper.make_node("LinRelu", ["h", "W2"], ["m"], domain="my.dom", name="f2"),
             helper.make_node("Relu", ["m"], ["z"], name="m")]
    weights = [numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), f"W{i}") for i in (1, 2)]
    graph = helper.make_graph(nodes, "calls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 64])], initializer=weights)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("my.dom", 1)]
    return helper.make_model(graph, opset_imports=opsets, functions=[function], ir_version=8)


@pytest.mark.parametrize("given", [False, True])
def test_each_call_is_timed_as_one_op(given):
    """Was: "profiled node 'MatMul_1' is not an op of graph 'calls'" (onnxruntime inlines the functions under
    names of its own)."""
    graph = from_onnx(_model())
    seconds = onnx_op_times(graph, _model() if given else None, repeats=2, warmup=1)
    assert set(seconds) == {"f1", "f2", "m"} and all(t > 0 for t in seconds.values())


def test_profile_onnx_stores_the_calls_times():
    profiled = profile_onnx(from_onnx(_model()), repeats=2, warmup=1)
    assert all(op.kind_cost["cpu"] > 0 for op in profiled.ops() if op.name in ("f1", "f2", "m"))
