"""An op onnx has no shape inference rule for (onnxruntime's contrib ops, as its optimiser writes them) leaving a
value's shape unknown is named with its domain and type, why, and what to do."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import UnsupportedGraphError, from_onnx  # noqa: E402


def _model(op_type: str, **attrs) -> onnx.ModelProto:
    """y = relu(com.microsoft::<op_type>(x, W)), no value_info (as onnxruntime's optimiser writes it)."""
    value = helper.make_tensor_value_info
    nodes = [helper.make_node(op_type, ["x", "W"], ["a"], domain="com.microsoft", name="fused", **attrs),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [value("x", TensorProto.FLOAT, [2, 8])],
                              [value("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(np.ones((8, 8), np.float32), "W")])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets)


@pytest.mark.parametrize("op_type, attrs", [("FusedMatMul", {"alpha": 0.5}), ("BiasGelu", {})])
def test_an_op_with_no_inference_rule_is_named_with_the_cause_and_the_fix(op_type, attrs):
    """Was only "node 'fused': its output 'a' (read by 'relu') has a shape unknown after shape inference"."""
    with pytest.raises(UnsupportedGraphError) as err:
        from_onnx(_model(op_type, **attrs))
    message = str(err.value)
    assert "node 'fused': its output 'a' (read by 'relu') has a shape unknown after shape inference" in message
    assert f"no rule for its op, type {op_type!r} of domain 'com.microsoft'" in message
    assert "ORT_ENABLE_BASIC" in message and "value_info" in message


def test_the_same_op_with_value_info_imports():
    """The fix the message names: value_info with the shapes of the op's outputs."""
    model = _model("FusedMatMul", alpha=0.5)
    model.graph.value_info.append(helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 8]))
    assert {op.name for op in from_onnx(model).ops()} >= {"fused", "relu"}
