"""Shape arithmetic of an old-opset model is folded at the model's opset: onnx.reference, given a bare node, ran it
at the newest opset (an ``Unsqueeze`` with an ``axes`` attribute failed as opset 13's), so the ``Expand`` before an
``nn.LSTM`` exported at opset 11 or 12 kept an unknown shape and the import was refused."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402

pytestmark = pytest.mark.onnx


def _expand_by_shape(opset: int):
    """x (3, 4) -> Expand to [1, dim 0 of x, 4] -> + 1: the target shape built from Shape, Gather, Unsqueeze."""
    unsqueeze = (helper.make_node("Unsqueeze", ["d"], ["d1"], axes=[0]) if opset < 13 else
                 helper.make_node("Unsqueeze", ["d", "zero"], ["d1"]))
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero_scalar"], ["d"], axis=0),
        unsqueeze,
        helper.make_node("Concat", ["one", "d1", "four"], ["target"], axis=0),
        helper.make_node("Expand", ["x", "target"], ["e"], name="expand"),
        helper.make_node("Add", ["e", "onef"], ["y"], name="add"),
    ]
    initializers = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                    (("zero_scalar", 0), ("one", [1]), ("four", [4]), ("zero", [0]))]
    initializers.append(numpy_helper.from_array(np.array(1.0, np.float32), "onef"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


@pytest.mark.parametrize("opset", [11, 12, 13])
def test_shape_arithmetic_folds_at_the_models_opset(opset):
    model = _expand_by_shape(opset)
    [y] = ort.InferenceSession(model.SerializeToString()).run(None, {"x": np.zeros((3, 4), np.float32)})
    graph = from_onnx(model)
    ops = {op.name: op for op in graph.ops()}
    assert ops["expand"].output_shapes == ((1, 3, 4),) == (y.shape,)
