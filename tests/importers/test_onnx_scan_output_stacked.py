"""ONNX import: a ``Scan`` output that onnx's inference leaves unknown (its body reads an outer ``Constant``, as
the ``*_expanded`` function bodies of ONNX's node tests do) is the body's element stacked as long as the
sequence; it was refused ("has a shape unknown after shape inference")."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402

pytestmark = pytest.mark.onnx

F = TensorProto.FLOAT


def _model(output_axis: int | None):
    """Scan over x[5, 3] with state s[3]: s += x_t; y_t = Unsqueeze(x_t, outer axes) [1, 3]; Relu(y)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Unsqueeze", ["x_t", "axes"], ["y_t"])],
        "body", [helper.make_tensor_value_info(n, F, None) for n in ("s_in", "x_t")],
        [helper.make_tensor_value_info(n, F, None) for n in ("s_out", "y_t")])
    attrs = {} if output_axis is None else {"scan_output_axes": [output_axis]}
    nodes = [
        helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Scan", ["s0", "x"], ["s", "y"], name="scan", body=body, num_scan_inputs=1, **attrs),
        helper.make_node("Relu", ["y"], ["out"], name="relu"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("s0", F, [3]),
                                           helper.make_tensor_value_info("x", F, [5, 3])],
                              [helper.make_tensor_value_info(n, F, None) for n in ("s", "out")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("axis", "shape"), [(None, (5, 1, 3)), (1, (1, 5, 3)), (-1, (1, 3, 5))])
def test_scan_output_is_the_element_stacked(axis, shape):
    g = from_onnx(_model(axis))
    scan = g.ops()[g.op_index["scan"]]
    assert scan.output_shapes == ((3,), shape)
    assert scan.output_bytes == 4 * (3 + 15)
    assert g.ops()[g.op_index["relu"]].output_shapes == (shape,)
