"""ONNX import: a shape left unknown because it follows from a graph input's value (an axes, shape or size input,
as onnx's node tests feed them) is refused naming that input and what to do; the message only said "has a shape
unknown after shape inference"."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.onnx


def _model(axes_type: int, axes_shape: list[int]):
    """ReduceSum(x[3, 4], axes) read by Relu: its output's rank follows from axes' value."""
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s"], name="sum", keepdims=0),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                                           helper.make_tensor_value_info("axes", axes_type, axes_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_refusal_names_the_value_input():
    with pytest.raises(UnsupportedGraphError, match=r"has a shape unknown after shape inference: it may depend on "
                                                    r"the value of graph input\(s\) 'axes'.*initializer"):
        from_onnx(_model(TensorProto.INT64, [1]))


def test_a_data_input_is_not_named():
    """x[3, 4] is data, not a value: not named."""
    with pytest.raises(UnsupportedGraphError) as err:
        from_onnx(_model(TensorProto.INT64, [1]))
    assert "'x'" not in str(err.value)
