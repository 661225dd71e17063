"""ONNX import: an ``If`` whose condition is shape arithmetic (``torch.onnx.export`` writes one for
``nn.LocalResponseNorm``: squeeze or not by the input's rank) takes the branch the shapes choose. Its branches
return different ranks, so onnx's inference leaves its output unknown, and the model was refused ("has a shape
unknown after shape inference")."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402

pytestmark = pytest.mark.onnx


def _model(first_dim: int):
    unknown = helper.make_tensor_value_info("b", TensorProto.FLOAT, None)
    then = helper.make_graph([helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(
        np.array([0], np.int64))), helper.make_node("Unsqueeze", ["x", "axes"], ["b"])], "then", [], [unknown])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["b"])], "else", [], [unknown])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["n"]),
             helper.make_node("Equal", ["n", "two"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other),
             helper.make_node("Relu", ["y"], ["out"], name="relu")]
    graph = helper.make_graph(nodes, "if_on_shapes", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                     [first_dim, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(0, np.int64), "zero"),
                               numpy_helper.from_array(np.array(2, np.int64), "two")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(("first_dim", "shape"), [(2, (1, 2, 8)), (3, (3, 8))])
def test_an_if_on_shape_arithmetic_takes_the_branch_the_shapes_choose(first_dim, shape):
    graph = from_onnx(_model(first_dim))
    relu = next(op for op in graph.ops() if op.name == "relu")
    assert relu.output_shapes == (shape,) and relu.output_bytes == 4 * int(np.prod(shape))
