"""ONNX import: an ``If`` whose condition is a known value (shape arithmetic, folded) costs and holds the branch
it takes. It was costed and sized at its dearer branch either way: a model taking the ``Identity`` branch was
charged its other branch's 64 x 64 MatMul and the two 16 KiB tensors that branch makes."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import from_onnx  # noqa: E402
from gplace.costmodel import TensorSpec, op_kind_costs  # noqa: E402

pytestmark = pytest.mark.onnx

TENSOR = 64 * 64 * 4


def _model(first_dim: int):
    """``x [first_dim, 64]``: a first dimension of 2 takes the dear then-branch (Exp, MatMul), else Identity."""
    value = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Exp", ["w"], ["a"]), helper.make_node("MatMul", ["a", "a"], ["b"]),
                              helper.make_node("ReduceSum", ["b"], ["t"], keepdims=0)], "then", [],
                             [value("t", TensorProto.FLOAT, [])])
    other = helper.make_graph([helper.make_node("Identity", ["zero_f"], ["e"])], "else", [],
                              [value("e", TensorProto.FLOAT, [])])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["n"]),
             helper.make_node("Equal", ["n", "two"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other),
             helper.make_node("Add", ["y", "x"], ["out"], name="add")]
    graph = helper.make_graph(
        nodes, "if_known", [value("x", TensorProto.FLOAT, [first_dim, 64])],
        [value("out", TensorProto.FLOAT, [first_dim, 64])],
        [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(2, np.int64), "two"),
         numpy_helper.from_array(np.ones((64, 64), np.float32), "w"),
         numpy_helper.from_array(np.array(0, np.float32), "zero_f")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _if(first_dim: int):
    return next(op for op in from_onnx(_model(first_dim)).ops() if op.name == "if")


def test_an_if_on_a_known_condition_costs_and_holds_the_branch_it_takes():
    identity = op_kind_costs("Identity", [TensorSpec((), 4)], [TensorSpec((), 4)])
    taken_else = _if(3)
    assert taken_else.kind_cost == pytest.approx(identity)
    assert taken_else.temporary_memory == 0
    taken_then = _if(2)
    matmul = op_kind_costs("MatMul", [TensorSpec((64, 64), TENSOR)] * 2, [TensorSpec((64, 64), TENSOR)])
    assert all(taken_then.kind_cost[k] > matmul[k] for k in matmul)
    assert taken_then.temporary_memory == 2 * TENSOR  # Exp's a and MatMul's b at once
