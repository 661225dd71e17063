"""ONNX import: an ``If``, ``Loop`` or ``Scan`` holds its subgraphs' intermediates while it runs, as
``temporary_memory``. It held only its outputs and weights: a then-branch making two 16 MiB tensors was
simulated at 8.9 MB where onnxruntime's branch materialises 33.5 MB."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402

pytestmark = pytest.mark.onnx

TENSOR = 64 * 64 * 4


def _value(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _if_model():
    then = helper.make_graph([helper.make_node("Exp", ["x"], ["a"]), helper.make_node("Mul", ["a", "a"], ["b"]),
                              helper.make_node("ReduceSum", ["b"], ["t"], keepdims=0)], "then", [], [_value("t", [])])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], "else", [],
                              [_value("e", [])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)]
    graph = helper.make_graph(nodes, "branches", [_value("x", [64, 64])], [_value("y", [])],
                              [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _loop_model():
    body = helper.make_graph(
        [helper.make_node("Exp", ["v"], ["e"]), helper.make_node("Add", ["e", "v"], ["next"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []), _value("v", [64, 64])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), _value("next", [64, 64])])
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["y"], name="loop", body=body)]
    graph = helper.make_graph(nodes, "loop", [_value("x", [64, 64])], [_value("y", [64, 64])],
                              [numpy_helper.from_array(np.array(3, np.int64), "trips")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _op(graph, name):
    return next(op for op in graph.ops() if op.name == name)


def test_an_if_holds_its_dearer_branch_s_intermediates_while_it_runs():
    assert _op(from_onnx(_if_model()), "if").temporary_memory == 2 * TENSOR  # Exp's a and Mul's b at once


def test_a_loop_holds_one_pass_of_its_body_while_it_runs():
    """Exp's e until Add reads it; Add's result is the pass's output (the node's), not counted."""
    assert _op(from_onnx(_loop_model()), "loop").temporary_memory == TENSOR
