"""A QDQ colocation group (a weight's DequantizeLinear and its Gemm) stays in one part where the devices' data
flow has a cycle (parts made greedily), so onnxruntime fuses each part as it fuses the whole model."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import Placement, from_onnx  # noqa: E402
from gplace.export.onnx import run_parts, split_onnx  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

X = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)


def _model() -> onnx.ModelProto:
    """y = DQ(Q(Gemm(DQ(Q(sigmoid(relu(x)))), DQ(Wq)) + b)), int8 QDQ, the weight's DequantizeLinear listed first."""
    rng = np.random.default_rng(0)
    tensors = [numpy_helper.from_array(rng.integers(-127, 128, (64, 64)).astype(np.int8), "Wq"),
               numpy_helper.from_array(np.float32(0.01), "w_scale"),
               numpy_helper.from_array(np.int8(0), "zero"),
               numpy_helper.from_array(np.float32(1 / 127), "a_scale"),
               numpy_helper.from_array(np.float32(0.05), "y_scale"),
               numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")]
    nodes = [helper.make_node("DequantizeLinear", ["Wq", "w_scale", "zero"], ["W"], name="dq_w"),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["s"], name="sigmoid"),
             helper.make_node("QuantizeLinear", ["s", "a_scale", "zero"], ["sq"], name="q_s"),
             helper.make_node("DequantizeLinear", ["sq", "a_scale", "zero"], ["sd"], name="dq_s"),
             helper.make_node("Gemm", ["sd", "W", "b"], ["g"], name="gemm"),
             helper.make_node("QuantizeLinear", ["g", "y_scale", "zero"], ["gq"], name="q_g"),
             helper.make_node("DequantizeLinear", ["gq", "y_scale", "zero"], ["y"], name="dq_g")]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 64])], initializer=tensors)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_weights_dequantize_shares_its_gemms_part():
    """relu on /CPU:0, sigmoid on /CPU:1, the rest on /CPU:0 (a cycle): dq_w, which reads nothing, went to the
    first part of /CPU:0 and gemm to the third, so W crossed parts as floats and the part held no QDQ Gemm to
    fuse."""
    graph, cluster = from_onnx(_model()), uniform_cluster(2, kind="cpu")
    assert {op.colocation for op in graph.ops() if op.name in ("dq_w", "dq_s", "gemm")} == {"qdq:gemm"}
    placement = Placement.from_names(graph, cluster, {op.name: "/CPU:1" if op.name == "sigmoid" else "/CPU:0"
                                                      for op in graph.ops()})
    parts = split_onnx(graph, cluster, placement)
    [gemm_part] = [p for p in parts if "gemm" in {n.name for n in p.model.graph.node}]
    assert {"dq_w", "dq_s", "gemm"} <= {n.name for n in gemm_part.model.graph.node}
    assert "W" not in gemm_part.inputs
    whole = ort.InferenceSession(_model().SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(run_parts(parts, {"x": X}, "y")["y"], whole.run(["y"], {"x": X})[0])
