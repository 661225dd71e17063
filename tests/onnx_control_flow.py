"""Tiny ONNX models with control flow (If, Loop, Scan) whose subgraphs read outer values: one place for the
importer, write-back and runtime tests."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F32 = TensorProto.FLOAT


def _value(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, initializers, name):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)  # onnxruntime lags


def if_loop_model(trips: int | None = 5):
    """x (4, 8) -> Relu ``pre`` -> h; If ``branch`` on sum(h) > 0: then h @ W (reads h and W from outside), else
    Relu(h); then Loop ``loop`` (``trips`` times a constant, or with no trip count: until its condition, which
    stays true one pass) of acc @ W2 (W2 from outside) -> z. W is 0.1 everywhere, W2 the identity."""
    then_branch = helper.make_graph([helper.make_node("MatMul", ["h", "W"], ["t_out"])], "then", [],
                                    [_value("t_out", [4, 8])])
    else_branch = helper.make_graph([helper.make_node("Relu", ["h"], ["e_out"])], "else", [],
                                    [_value("e_out", [4, 8])])
    keep_going = (helper.make_node("Identity", ["cond_in"], ["cond_out"]) if trips else
                  helper.make_node("Constant", [], ["cond_out"], value=numpy_helper.from_array(np.array(False))))
    body = helper.make_graph(
        [keep_going, helper.make_node("MatMul", ["acc_in", "W2"], ["acc_out"])], "body",
        [_value("i", [], TensorProto.INT64), _value("cond_in", [], TensorProto.BOOL), _value("acc_in", [4, 8])],
        [_value("cond_out", [], TensorProto.BOOL), _value("acc_out", [4, 8])])
    count = [helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(np.array(trips, np.int64)),
                              name="M")] if trips else []
    nodes = [
        helper.make_node("Relu", ["x"], ["h"], name="pre"),
        helper.make_node("ReduceSum", ["h"], ["s"], keepdims=0, name="sum"),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
        helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch, name="branch"),
        *count,
        helper.make_node("Constant", [], ["go"], value=numpy_helper.from_array(np.array(True)), name="go"),
        helper.make_node("Loop", ["M" if trips else "", "go", "y"], ["z"], body=body, name="loop"),
    ]
    weights = [numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
               numpy_helper.from_array(np.full((8, 8), 0.1, np.float32), "W"),
               numpy_helper.from_array(np.eye(8, dtype=np.float32), "W2")]
    return _model(nodes, [_value("x", [4, 8])], [_value("z", [4, 8])], weights, "if_loop")


def scan_model(steps: int = 6, axis: int = 0, reverse: bool = False):
    """A running sum over ``steps`` slices of x along ``axis`` (x is (steps, 4, 8) for axis 0, (4, steps, 8) for
    axis 1), each slice scaled by V (4, 8, from outside): Scan ``scan`` -> the last sum ``total`` and every step's
    ``Relu`` ``states``, stacked along ``axis``; with ``reverse`` both run from the last slice to the first."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["x_t", "V"], ["scaled"]), helper.make_node("Add", ["acc_in", "scaled"], ["acc_out"]),
         helper.make_node("Relu", ["acc_out"], ["relu_out"])], "body",
        [_value("acc_in", [4, 8]), _value("x_t", [4, 8])], [_value("acc_out", [4, 8]), _value("relu_out", [4, 8])])
    nodes = [helper.make_node("Scan", ["init", "x"], ["total", "states"], body=body, num_scan_inputs=1, name="scan",
                              scan_input_axes=[axis], scan_output_axes=[axis], scan_input_directions=[int(reverse)],
                              scan_output_directions=[int(reverse)])]
    weights = [numpy_helper.from_array(np.zeros((4, 8), np.float32), "init"),
               numpy_helper.from_array(np.full((4, 8), 0.5, np.float32), "V")]
    shape = [steps, 4, 8] if axis == 0 else [4, steps, 8]
    return _model(nodes, [_value("x", shape)], [_value("total", [4, 8]), _value("states", shape)], weights, "scan")


def nested_model(trips: int = 3):
    """A Loop ``loop`` (``trips`` passes) whose body holds an If adding h = -x, made outside both, to the carried
    value: y = x + trips * h."""
    inner = helper.make_graph([helper.make_node("Add", ["acc_in", "h"], ["o"])], "inner", [], [_value("o", [2])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("If", ["cond_in"], ["acc_out"], then_branch=inner, else_branch=inner)], "body",
        [_value("i", [], TensorProto.INT64), _value("cond_in", [], TensorProto.BOOL), _value("acc_in", [2])],
        [_value("cond_out", [], TensorProto.BOOL), _value("acc_out", [2])])
    nodes = [helper.make_node("Neg", ["x"], ["h"], name="neg"),
             helper.make_node("Loop", ["n", "go", "x"], ["y"], body=body, name="loop")]
    consts = [numpy_helper.from_array(np.array(trips, np.int64), "n"), numpy_helper.from_array(np.array(True), "go")]
    return _model(nodes, [_value("x", [2])], [_value("y", [2])], consts, "nested")


def shape_loop_model():
    """What an exporter writes for ``for i in range(x.size(0)): acc = tanh(x[i] @ W + acc)`` with a dynamic first
    dimension: x ("T", 3, 8); Loop ``loop`` runs Gather(Shape(x), 0) times (shape arithmetic, not a constant),
    its body's carried input and its output declared without a shape, as the TorchScript exporter leaves them."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Gather", ["x", "i"], ["x_i"], axis=0),
         helper.make_node("MatMul", ["x_i", "W"], ["xw"]),
         helper.make_node("Add", ["xw", "acc_in"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["acc_out"])], "body",
        [_value("i", [], TensorProto.INT64), _value("cond_in", [], TensorProto.BOOL), _value("acc_in", ["a", "b"])],
        [_value("cond_out", [], TensorProto.BOOL), _value("acc_out", None)])
    nodes = [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
             helper.make_node("Gather", ["shape", "zero"], ["steps"], name="steps", axis=0),
             helper.make_node("Loop", ["steps", "go", "acc0"], ["z"], body=body, name="loop")]
    weights = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array(True), "go"),
               numpy_helper.from_array(np.zeros((3, 8), np.float32), "acc0"),
               numpy_helper.from_array(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8), "W")]
    return _model(nodes, [_value("x", ["T", 3, 8])], [_value("z", None)], weights, "shape_loop")


def growing_loop_model():
    """A Loop ``loop`` (3 passes, a constant) whose carried value grows by a column a pass, as a greedy decoder's
    output does: x (2, 1) -> Relu ``pre`` -> a; each pass appends last(a) + 1; y = Mul ``double`` (a, 2) is
    (2, 4). The body declares the carried value (2, ?)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Slice", ["a_in", "minus_one", "end", "one"], ["last"]),
         helper.make_node("Add", ["last", "one_f"], ["next"]),
         helper.make_node("Concat", ["a_in", "next"], ["a_out"], axis=1)], "body",
        [_value("i", [], TensorProto.INT64), _value("cond_in", [], TensorProto.BOOL), _value("a_in", [2, None])],
        [_value("cond_out", [], TensorProto.BOOL), _value("a_out", [2, None])])
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="pre"),
             helper.make_node("Loop", ["n", "go", "h"], ["a"], body=body, name="loop"),
             helper.make_node("Mul", ["a", "two"], ["y"], name="double")]
    consts = [numpy_helper.from_array(np.array(3, np.int64), "n"), numpy_helper.from_array(np.array(True), "go"),
              numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
              numpy_helper.from_array(np.array([1000], np.int64), "end"),
              numpy_helper.from_array(np.array([1], np.int64), "one"),
              numpy_helper.from_array(np.array(1, np.float32), "one_f"),
              numpy_helper.from_array(np.array(2, np.float32), "two")]
    return _model(nodes, [_value("x", [2, 1])], [_value("y", [2, None])], consts, "growing_loop")


def loop_scan_output_model(trips: int = 5):
    """A Loop ``loop`` (``trips`` passes, a constant) of acc -> tanh(acc @ W) with a scan output ``steps`` (every
    pass's acc, stacked: (trips, 2, 4)) that ReduceSum ``total`` reads; x (2, 4)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("MatMul", ["acc_in", "W"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["acc_out"]), helper.make_node("Identity", ["acc_out"], ["step"])], "body",
        [_value("i", [], TensorProto.INT64), _value("cond_in", [], TensorProto.BOOL), _value("acc_in", [2, 4])],
        [_value("cond_out", [], TensorProto.BOOL), _value("acc_out", [2, 4]), _value("step", [2, 4])])
    nodes = [helper.make_node("Loop", ["n", "go", "x"], ["y", "steps"], body=body, name="loop"),
             helper.make_node("ReduceSum", ["steps", "axis"], ["z"], keepdims=0, name="total")]
    consts = [numpy_helper.from_array(np.array(trips, np.int64), "n"), numpy_helper.from_array(np.array(True), "go"),
              numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4), "W"),
              numpy_helper.from_array(np.array([0], np.int64), "axis")]
    return _model(nodes, [_value("x", [2, 4])], [_value("y", [2, 4]), _value("z", [2, 4])], consts, "loop_scan")
