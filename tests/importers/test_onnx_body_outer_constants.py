"""ONNX import: a control-flow body's node whose shape follows from an outer ``Constant`` (an ``Unsqueeze``'s axes,
as the expanded LinearAttention functions of onnx's node tests have) is costed with that value; it and every node
after it counted 0 seconds ("shape unknown")."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402

pytestmark = pytest.mark.onnx

F = TensorProto.FLOAT


def _model():
    """Scan over x[5, 3], state s[3]: s += x_t (3 FLOPs); Unsqueeze(x_t, outer axes) [1, 3] MatMul w[3, 4] (24)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Unsqueeze", ["x_t", "axes"], ["r"]),
         helper.make_node("MatMul", ["r", "w"], ["y_t"])],
        "body", [helper.make_tensor_value_info(n, F, None) for n in ("s_in", "x_t")],
        [helper.make_tensor_value_info(n, F, None) for n in ("s_out", "y_t")])
    nodes = [
        helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([0], np.int64))),
        helper.make_node("Scan", ["s0", "x"], ["s", "y"], name="scan", body=body, num_scan_inputs=1),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("s0", F, [3]),
                                           helper.make_tensor_value_info("x", F, [5, 3])],
                              [helper.make_tensor_value_info(n, F, None) for n in ("s", "y")],
                              [numpy_helper.from_array(np.ones((3, 4), np.float32), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_body_node_reading_an_outer_constant_is_costed(monkeypatch, caplog):
    kind = add_flops_kind(monkeypatch)
    g = from_onnx(_model())
    assert float(g.kind_cost[kind][g.op_index["scan"]]) == 5 * (3 + 2 * 4 * 3)  # was 5 * 3
    assert "shape unknown" not in caplog.text
