"""An initializer read by two nodes (an Initializer op) and a Constant node hold their bytes once, as persistent
memory, as TensorFlow's variables do: they also counted them as an output, so sim-v1's peak held every shared
weight twice."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import Placement, from_onnx  # noqa: E402
from gplace.runtime import Simulator  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

WEIGHT = 256 * 256 * 4
ACTIVATION = 4 * 256 * 4


def _model(weight_node: str):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 256])
    array = np.zeros((256, 256), np.float32)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="m1"),
             helper.make_node("MatMul", ["a", "W"], ["b"], name="m2"), helper.make_node("Relu", ["b"], ["y"], name="r")]
    initializers = [numpy_helper.from_array(array, "W")]
    if weight_node == "Constant":
        nodes.insert(0, helper.make_node("Constant", [], ["W"], name="w", value=numpy_helper.from_array(array)))
        initializers = []
    graph = helper.make_graph(nodes, "shared", [x], [y], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("weight_node", ["Initializer", "Constant"])
def test_a_shared_weight_is_held_once(weight_node):
    graph = from_onnx(_model(weight_node))
    w = graph.op_names.index("W" if weight_node == "Initializer" else "w")
    assert graph.persistent_memory[w] == WEIGHT and graph.output_bytes[w] == 0
    assert sorted(graph.edge_bytes.tolist()) == [ACTIVATION] * 3 + [WEIGHT] * 2  # a copy still moves the weight
    measured = Simulator().measure(graph, uniform_cluster(1), Placement.for_graph(graph, [0] * graph.num_ops))
    assert measured.ok and measured.peak_memory == [WEIGHT + 2 * ACTIVATION]  # was 532,480 (the weight twice)
