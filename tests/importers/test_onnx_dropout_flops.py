"""ONNX import: Dropout is the identity unless a training_mode input is given; it counted 2 FLOPs per element
either way."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402

pytestmark = pytest.mark.onnx


def test_dropout_counts_only_with_a_training_mode(monkeypatch):
    """x[4, 8]: Dropout(x) and Dropout(x, ratio) 0 FLOPs (were 64 each); Dropout(x, ratio, training_mode) 2 per
    element."""
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "training")]
    nodes = [helper.make_node("Dropout", ins, [name], name=name)
             for name, ins in (("plain", ["x"]), ("p", ["x", "ratio"]), ("train", ["x", "ratio", "training"]))]
    outputs = [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, [4, 8]) for n in nodes]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])], outputs,
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    kind = add_flops_kind(monkeypatch)
    g = from_onnx(model)
    assert {n: float(g.kind_cost[kind][g.op_index[n]]) for n in ("plain", "p", "train")} == {
        "plain": 0.0, "p": 0.0, "train": 64.0}
