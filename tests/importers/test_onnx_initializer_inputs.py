"""An initialiser that is also a graph input, declared with symbolic dims (IR version < 4 style), has the
initialiser's shape."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import UnsupportedGraphError, from_onnx  # noqa: E402


def _model() -> onnx.ModelProto:
    """y = relu(x @ W), W [64, 32] an initialiser also declared as input W ['K', 'M']."""
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="relu")],
        "g", [value("x", TensorProto.FLOAT, ["N", 64]), value("W", TensorProto.FLOAT, ["K", "M"])],
        [value("y", TensorProto.FLOAT, ["N", "M"])],
        initializer=[numpy_helper.from_array(np.ones((64, 32), np.float32), "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


@pytest.mark.parametrize("shapes", [{"x": [8, 64]}, {"x": [8, 64], "W": [64, 32]}])
def test_the_initialisers_dims_size_what_reads_it(shapes):
    """Was: W kept ['K', 'M'], so h and y were unknown (an error for relu's input), and input_shapes={'W': ...}
    was refused as naming no input."""
    ops = {op.name: op for op in from_onnx(_model(), input_shapes=shapes).ops()}
    assert ops["mm"].output_shapes == ((8, 32),) and ops["relu"].output_bytes == 8 * 32 * 4
    assert ops["mm"].persistent_memory == 64 * 32 * 4


def test_a_shape_given_for_it_must_be_the_initialisers():
    with pytest.raises(UnsupportedGraphError, match=r"input 'W' is an initializer of shape \[64, 32\], "
                                                    r"input_shapes gives \[64, 16\]"):
        from_onnx(_model(), input_shapes={"x": [8, 64], "W": [64, 16]})
