"""ONNX importer: ops, edges, bytes, persistent memory, shapes and costs; every failure an UnsupportedGraphError."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx_control_flow import (  # noqa: E402
    growing_loop_model,
    if_loop_model,
    loop_scan_output_model,
    nested_model,
    scan_model,
    shape_loop_model,
)

from gplace.costmodel import TensorSpec, op_flops, op_kind_costs, op_work, roofline_costs  # noqa: E402
from gplace.importers.onnx import OnnxSource, from_onnx  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.onnx

F32 = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), name="m"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _weight(name, *shape):
    return numpy_helper.from_array(np.ones(shape, dtype=np.float32), name)


def _mlp(batch=4):
    """x (batch, 8) -> MatMul(W 8x16) -> Add(b 16) -> Relu -> y; W and b are initializers."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
        helper.make_node("Add", ["h", "b"], ["z"], name="add"),
        helper.make_node("Relu", ["z"], ["y"], name="relu"),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", F32, [batch, 8])],
                  [helper.make_tensor_value_info("y", F32, None)], [_weight("W", 8, 16), _weight("b", 16)])


def test_matmul_add_relu_ops_edges_bytes_and_weights():
    """One op per node plus an Input op; edges carry inferred tensor bytes; weights fold into their reader."""
    g = from_onnx(_mlp())
    assert g.op_names == ("x", "mm", "add", "relu")
    assert g.op_types == ("Input", "MatMul", "Add", "Relu")
    edges = {(e.src, e.dst): e.bytes for e in g.edges()}
    assert edges == {("x", "mm"): 4 * 8 * 4, ("mm", "add"): 4 * 16 * 4, ("add", "relu"): 4 * 16 * 4}
    assert g.persistent_memory.tolist() == [0, 8 * 16 * 4, 16 * 4, 0]
    assert g.output_shapes[3] == ((4, 16),)
    assert isinstance(g.source, OnnxSource) and g.source.node_index["relu"] == 2


def test_costs_follow_the_analytic_model():
    """MatMul's time per kind is the roofline of 2*M*N*K FLOPs and the bytes it reads and writes."""
    g = from_onnx(_mlp(batch=1024))
    mm = g.op_index["mm"]
    flops = op_flops("MatMul", [TensorSpec((1024, 8), 0), TensorSpec((8, 16), 0)], [TensorSpec((1024, 16), 0)])
    assert flops == 2 * 1024 * 16 * 8
    expected = roofline_costs(flops, (1024 * 8 + 8 * 16 + 1024 * 16) * 4)
    for kind in ("gpu", "cpu"):
        assert g.kind_cost[kind][mm] == pytest.approx(expected[kind])
        assert np.all(g.kind_cost[kind][1:] > 0)


def test_conv_shapes_and_flops():
    """A Conv's output shape comes from shape inference and its FLOPs from the weight shape."""
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    model = _model([conv], [helper.make_tensor_value_info("x", F32, [2, 3, 32, 32])],
                   [helper.make_tensor_value_info("y", F32, None)], [_weight("w", 8, 3, 3, 3), _weight("b", 8)])
    g = from_onnx(model)
    assert g.output_shapes[g.op_index["conv"]] == ((2, 8, 32, 32),)
    assert g.persistent_memory[g.op_index["conv"]] == (8 * 27 + 8) * 4
    flops = op_flops("Conv", [TensorSpec((2, 3, 32, 32), 0), TensorSpec((8, 3, 3, 3), 0), TensorSpec((8,), 0)],
                     [TensorSpec((2, 8, 32, 32), 0)])
    assert flops == 2 * (2 * 8 * 32 * 32) * 27 + 2 * 8 * 32 * 32


def test_lstm_and_pool_costs_use_weights_and_kernel_attributes():
    """ONNX LSTM counts 2*T*B*(numel(W)+numel(R)) plus gates; MaxPool reads kernel_shape from the node."""
    seq, batch, inp, hidden = 5, 3, 4, 6
    lstm = helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="lstm", hidden_size=hidden)
    pool = helper.make_node("MaxPool", ["y"], ["p"], name="pool", kernel_shape=[2, 2])
    model = _model([lstm, pool], [helper.make_tensor_value_info("x", F32, [seq, batch, inp])],
                   [helper.make_tensor_value_info("p", F32, None)],
                   [_weight("W", 1, 4 * hidden, inp), _weight("R", 1, 4 * hidden, hidden)])
    g = from_onnx(model)
    y_shape = (seq, 1, batch, hidden)
    assert g.output_shapes[g.op_index["lstm"]] == (y_shape,)
    flops = 2 * seq * batch * 4 * hidden * (inp + hidden) + 12 * seq * batch * hidden
    nbytes = 4 * (seq * batch * inp + 4 * hidden * (inp + hidden) + seq * batch * hidden)
    assert g.kind_cost["gpu"][g.op_index["lstm"]] == pytest.approx(roofline_costs(flops, nbytes)["gpu"])
    pool_out = TensorSpec((seq, 1, batch - 1, hidden - 1), 0)
    assert op_flops("MaxPool", [TensorSpec(y_shape, 0)], [pool_out], {"kernel_shape": [2, 2]}) == 4 * pool_out.numel
    assert g.kind_cost["gpu"][g.op_index["pool"]] > roofline_costs(0, 0)["gpu"]


def test_attention_einsum_and_reshape_rules():
    """Attention counts QK^T and PV; Einsum multiplies every index size; Reshape costs nothing, Transpose copies."""
    q, k, out = TensorSpec((2, 4, 10, 8), 0), TensorSpec((2, 4, 12, 8), 0), TensorSpec((2, 4, 10, 8), 0)
    assert op_flops("Attention", [q, k, k], [out]) == 2 * 12 * (q.numel + out.numel) + 5 * 2 * 4 * 10 * 12
    a, b = TensorSpec((3, 4), 48), TensorSpec((4, 5), 80)
    assert op_flops("Einsum", [a, b], [TensorSpec((3, 5), 60)], {"equation": "ij,jk->ik"}) == 2 * 3 * 4 * 5
    assert op_work("Reshape", [a], [a]).nbytes == 0 and op_work("Transpose", [a], [a]).nbytes == 96


def test_einsum_with_an_ellipsis_and_quantised_convolutions_count_their_flops():
    """An ellipsis covers its dimensions as indices of their own (broadcast); QLinearConv reads its weight at
    input 3 and its bias at 8, ConvInteger has no bias: each counts the float convolution's FLOPs."""
    a, y = TensorSpec((8, 64, 32), 0), TensorSpec((8, 64, 16), 0)
    b = TensorSpec((32, 16), 0)
    assert op_flops("Einsum", [a, b], [y], {"equation": "...ij,jk->...ik"}) == 2 * 8 * 64 * 32 * 16
    assert op_flops("Einsum", [a, b], [y], {"equation": "b...j,jk->b...k"}) == 2 * 8 * 64 * 32 * 16
    x, w, out, scalar = TensorSpec((2, 4, 8, 8), 0), TensorSpec((6, 4, 3, 3), 0), TensorSpec((2, 6, 8, 8), 0), \
        TensorSpec((), 4)
    conv = op_flops("Conv", [x, w], [out])
    assert conv == 2 * out.numel * 4 * 9
    assert op_flops("QLinearConv", [x, scalar, scalar, w, scalar, scalar, scalar, scalar], [out]) == conv
    assert op_flops("ConvInteger", [x, w, scalar, scalar], [out]) == conv
    bias = TensorSpec((6,), 24)
    assert op_flops("QLinearConv", [x, scalar, scalar, w, scalar, scalar, scalar, scalar, bias], [out]) == \
        conv + out.numel


def test_a_tensor_read_twice_counts_in_both_positions_and_its_bytes_once():
    """Mul(x, x): the FLOP rules see both positions; the traffic counts x once (``distinct``)."""
    x = TensorSpec((4, 8), 128)
    assert op_work("Mul", [x, x], [x], distinct=[x]).nbytes == 2 * 128
    assert op_work("Mul", [x, x], [x]).nbytes == 3 * 128
    g = from_onnx(_model([helper.make_node("Mul", ["x", "x"], ["y"], name="square")],
                         [helper.make_tensor_value_info("x", F32, [4, 8])],
                         [helper.make_tensor_value_info("y", F32, [4, 8])]))
    assert {op.name: op for op in g.ops()}["square"].kind_cost == pytest.approx(
        op_kind_costs("Mul", [x, x], [x], distinct=[x]))


def _dynamic_mlp():
    model = _mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    return model


def test_dynamic_batch_resolved_from_input_shapes():
    """A symbolic batch dimension takes its value from input_shapes and flows through inference."""
    model = _dynamic_mlp()
    g = from_onnx(model, {"x": [32, 8]})
    assert g.output_shapes[g.op_index["relu"]] == ((32, 16),)
    assert g.output_bytes[g.op_index["x"]] == 32 * 8 * 4
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"  # caller's model untouched


def test_a_symbol_resolved_by_one_inputs_shape_resolves_it_in_the_others():
    """ids and mask both (batch, seq): giving ids' shape left mask's dimensions unknown ('give the full shape'),
    though the docstring said the symbols it resolves are written into every use."""
    ids, mask, y = (helper.make_tensor_value_info(n, F32, ["batch", "seq"]) for n in ("ids", "mask", "y"))
    model = _model([helper.make_node("Add", ["ids", "mask"], ["y"], name="add")], [ids, mask], [y])
    g = from_onnx(model, {"ids": [2, 16]})
    assert g.output_shapes[g.op_index["mask"]] == ((2, 16),) and g.output_shapes[g.op_index["add"]] == ((2, 16),)


def test_missing_input_shape_names_the_input_and_dim():
    """An unknown dimension with no input shape raises, naming the input and the dimension."""
    with pytest.raises(UnsupportedGraphError, match=r"input 'x': dimension 0 \(batch\) is unknown"):
        from_onnx(_dynamic_mlp())


@pytest.mark.parametrize("shapes, match", [
    ({"x": [32, 9]}, "dimension 1 is 8"),
    ({"x": [32]}, "rank 2"),
    ({"nope": [1, 8]}, "'nope'"),
])
def test_bad_input_shapes_are_named(shapes, match):
    """input_shapes that contradict the model or name no input raise UnsupportedGraphError."""
    with pytest.raises(UnsupportedGraphError, match=match):
        from_onnx(_dynamic_mlp(), shapes)


@pytest.mark.parametrize("shapes, match", [
    ({"x": ["a", 8]}, r"input_shapes\['x'\] must be a list of integers, got \['a', 8\]"),
    ({"x": 32}, r"input_shapes\['x'\] must be a list of integers, got 32"),
    ({"x": [32.5, 8]}, r"input_shapes\['x'\] must be a list of integers"),
    ({"x": [True, 8]}, r"input_shapes\['x'\] must be a list of integers"),
    ({"x": [10**30, 8]}, r"input_shapes\['x'\]: dimension 10+ is larger than ONNX's int64 allows"),
    ("x", "input_shapes must map input names to shapes"),
    ([[32, 8]], "input_shapes must map input names to shapes"),
])
def test_input_shapes_that_are_not_integer_lists_raise_naming_the_input(shapes, match):
    """Before, these raised a raw ValueError or TypeError from int() or dict(), an OverflowError-like ValueError
    from protobuf for a huge dimension, or silently truncated 32.5 to 32."""
    with pytest.raises(UnsupportedGraphError, match=match):
        from_onnx(_dynamic_mlp(), shapes)


def test_input_shapes_accept_numpy_integers_and_none_for_a_given_input():
    """numpy integer dimensions are integers; a None shape counts as not given (as it did before)."""
    g = from_onnx(_dynamic_mlp(), {"x": np.array([32, 8])})
    assert g.output_shapes[g.op_index["relu"]] == ((32, 16),)
    assert from_onnx(_mlp(), {"x": None}).op_names == ("x", "mm", "add", "relu")


def test_an_input_named_by_a_number_takes_its_shape_from_an_integer_key():
    """``graph.input_shapes={1:[8,64]}`` on the command line gives the key as the int 1 (Hydra): an input named "1"
    (as older torch.onnx exports name them) could not be given a shape ("input_shapes names [1], which are not
    inputs of the model; inputs: ['1']")."""
    model = _model([helper.make_node("Relu", ["1"], ["y"], name="relu")],
                   [helper.make_tensor_value_info("1", F32, ["batch", 64])],
                   [helper.make_tensor_value_info("y", F32, None)])
    for key in (1, np.int64(1), "1"):
        g = from_onnx(model, {key: [8, 64]})
        assert g.op_names == ("1", "relu") and g.output_shapes[g.op_index["relu"]] == ((8, 64),)


def _matmul_costs(rows, inner, cols):
    a, b = TensorSpec((rows, inner), rows * inner * 4), TensorSpec((inner, cols), inner * cols * 4)
    return op_kind_costs("MatMul", [a, b], [TensorSpec((rows, cols), rows * cols * 4)])


def test_control_flow_nodes_are_ops_reading_what_their_subgraphs_capture():
    """If and Loop are one op each: an edge from the producer of every outer value a subgraph reads, the weights
    only a subgraph reads as the node's persistent memory, the If's dearer branch and the Loop's body times M."""
    g = from_onnx(if_loop_model(trips=5))
    assert g.op_types[g.op_index["branch"]] == "If" and g.op_types[g.op_index["loop"]] == "Loop"
    edges = {(e.src, e.dst): e.bytes for e in g.edges()}
    assert edges[("pre", "branch")] == 4 * 8 * 4  # h, read only inside the then branch
    assert edges[("gt", "branch")] == 1 and edges[("branch", "loop")] == 4 * 8 * 4
    memory = dict(zip(g.op_names, g.persistent_memory.tolist(), strict=True))
    assert memory["branch"] == memory["loop"] == 8 * 8 * 4  # W and W2, folded into their one reader
    matmul = _matmul_costs(4, 8, 8)
    ops = {op.name: op for op in g.ops()}
    assert ops["branch"].kind_cost == pytest.approx(matmul)  # the MatMul branch, dearer than the Relu
    identity = op_kind_costs("Identity", [TensorSpec((), 1)], [TensorSpec((), 1)])
    assert ops["loop"].kind_cost == pytest.approx({k: 5 * (matmul[k] + identity[k]) for k in matmul})


def test_loop_without_a_known_trip_count_counts_one_pass_and_warns(caplog):
    """A Loop whose trip count is not a constant costs one pass of its body, with a warning naming it."""
    with caplog.at_level("WARNING", logger="gplace.importers.onnx"):
        g = from_onnx(if_loop_model(trips=None))
    ops = {op.name: op for op in g.ops()}
    matmul, stop = _matmul_costs(4, 8, 8), op_kind_costs("Constant", [], [TensorSpec((), 1)])
    assert ops["loop"].kind_cost == pytest.approx({k: matmul[k] + stop[k] for k in matmul})
    assert "Loop 'loop': trip count unknown" in caplog.text


def test_a_while_loops_int64_max_bound_is_no_trip_count(caplog):
    """Exporters write a while loop as a Loop of INT64_MAX passes stopping on its condition: it was costed as
    2**63 - 1 passes of its body (5.5e13 s here), silently."""
    model = if_loop_model(trips=2)
    count = next(n for n in model.graph.node if n.name == "M")
    count.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array(2**63 - 1, np.int64)))
    with caplog.at_level("WARNING", logger="gplace.importers.onnx"):
        g = from_onnx(model)
    ops = {op.name: op for op in g.ops()}
    matmul = _matmul_costs(4, 8, 8)
    identity = op_kind_costs("Identity", [TensorSpec((), 1)], [TensorSpec((), 1)])
    assert ops["loop"].kind_cost == pytest.approx({k: matmul[k] + identity[k] for k in matmul})
    assert "Loop 'loop': trip count unknown" in caplog.text


@pytest.mark.parametrize("trips", [0, -5])
def test_a_loop_of_no_passes_costs_nothing(trips):
    """M = 0 was costed as one pass (0 read as unknown); a negative M, which ONNX runs as no pass, was refused
    ("negative kind_cost")."""
    model = if_loop_model(trips=2)
    count = next(n for n in model.graph.node if n.name == "M")
    count.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array(trips, np.int64)))
    ops = {op.name: op for op in from_onnx(model).ops()}
    assert set(ops["loop"].kind_cost.values()) == {0.0}


def test_loop_trip_count_from_shape_arithmetic_and_carried_shapes(caplog):
    """A Loop run Gather(Shape(x), 0) times, x's first dimension fixed at import, costs its body that many times;
    its body's carried input and its output, declared without a shape, take the initial value's (3, 8)."""
    with caplog.at_level("WARNING", logger="gplace.importers.onnx"):
        g = from_onnx(shape_loop_model(), {"x": (5, 3, 8)})
    assert "unknown" not in caplog.text
    row, square = TensorSpec((3, 8), 96), TensorSpec((8, 8), 256)
    scalar, flag = TensorSpec((), 8), TensorSpec((), 1)
    body = [op_kind_costs("Identity", [flag], [flag]),
            op_kind_costs("Gather", [TensorSpec((5, 3, 8), 480), scalar], [row]),
            op_kind_costs("MatMul", [row, square], [row]), op_kind_costs("Add", [row, row], [row]),
            op_kind_costs("Tanh", [row], [row])]
    loop = {op.name: op for op in g.ops()}["loop"]
    assert loop.kind_cost == pytest.approx({k: 5 * sum(c[k] for c in body) for k in body[0]})
    assert loop.output_bytes == 96


def test_a_carried_value_that_grows_takes_its_shape_after_the_loops_passes():
    """A Loop's carried value that grows a column a pass has, after its 3 passes, shape (2, 1 + 3): the body
    inferred pass by pass (one pass keeping the initial shape would have said (2, 1))."""
    g = from_onnx(growing_loop_model())
    ops = {op.name: op for op in g.ops()}
    assert ops["loop"].output_shapes == ((2, 4),) and ops["double"].output_shapes == ((2, 4),)
    assert {(e.src, e.dst): e.bytes for e in g.edges()}[("loop", "double")] == 2 * 4 * 4


def test_a_loops_scan_output_is_its_passes_stacked():
    """A Loop's scan output, left (?, 2, 4) by onnx's inference, is (M, 2, 4) for a constant M, so a node
    reading it imports."""
    g = from_onnx(loop_scan_output_model(trips=5))
    ops = {op.name: op for op in g.ops()}
    assert ops["loop"].output_shapes == ((2, 4), (5, 2, 4))
    assert {(e.src, e.dst): e.bytes for e in g.edges()}[("loop", "total")] == 5 * 2 * 4 * 4


def test_scan_costs_its_body_times_its_sequence_length():
    """A Scan costs its body (Mul, Add, Relu on (4, 8)) once per step of its scan input; V (read only inside)
    is its persistent memory, with the initial state it reads."""
    g = from_onnx(scan_model(steps=6))
    step = TensorSpec((4, 8), 128)
    body = [op_kind_costs(t, [step, step] if t != "Relu" else [step], [step]) for t in ("Mul", "Add", "Relu")]
    scan = {op.name: op for op in g.ops()}["scan"]
    assert scan.kind_cost == pytest.approx({k: 6 * sum(c[k] for c in body) for k in body[0]})
    assert g.persistent_memory[g.op_index["scan"]] == 2 * 128
    assert [(e.src, e.dst) for e in g.edges()] == [("x", "scan")]


def test_nested_subgraphs_capture_through_every_level():
    """An If inside a Loop's body reading a top-level tensor makes an edge from its producer to the Loop."""
    g = from_onnx(nested_model(trips=3))
    assert {(e.src, e.dst) for e in g.edges()} == {("x", "neg"), ("x", "loop"), ("neg", "loop")}
    add = op_kind_costs("Add", [TensorSpec((2,), 8)] * 2, [TensorSpec((2,), 8)])
    identity = op_kind_costs("Identity", [TensorSpec((), 1)], [TensorSpec((), 1)])
    loop = {op.name: op for op in g.ops()}["loop"]
    assert loop.kind_cost == pytest.approx({k: 3 * (add[k] + identity[k]) for k in add})


@pytest.mark.parametrize("opset, channels_of_scale", [(18, 2), (21, 4)])
def test_a_group_normalisations_output_keeps_its_input_shape(opset, channels_of_scale):
    """GroupNormalization is an ONNX function whose output onnx's inference leaves out; a node reading it imports,
    the output taking the input's shape."""
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["n"], name="norm", num_groups=2),
             helper.make_node("Relu", ["n"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "gn", [helper.make_tensor_value_info("x", F32, [1, 4, 3, 3])],
                              [helper.make_tensor_value_info("y", F32, None)],
                              [numpy_helper.from_array(np.ones(channels_of_scale, np.float32), "s"),
                               numpy_helper.from_array(np.zeros(channels_of_scale, np.float32), "b")])
    g = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10))
    assert {op.name: op for op in g.ops()}["norm"].output_shapes == ((1, 4, 3, 3),)


@pytest.mark.parametrize("call_first", [False, True])
def test_a_call_of_a_local_function_costs_its_body(call_first):
    """A node calling a model-local function (MatMul and a call of Relu inside) costs what the same nodes cost
    written out; before, it counted memory traffic only. With the inner call first, the MatMul reads the type
    the call's body gives its output (before, unknown: the MatMul counted 0 s)."""
    act = helper.make_function("local", "Act", ["T"], ["Y"], [helper.make_node("Relu", ["T"], ["Y"])],
                               [helper.make_opsetid("", 18)])
    steps = [helper.make_node("MatMul", ["X", "W"], ["T"]), helper.make_node("Act", ["T"], ["Y"], domain="local")]
    plain_steps = [helper.make_node("MatMul", ["x", "W"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    if call_first:
        steps = [helper.make_node("Act", ["X"], ["T"], domain="local"), helper.make_node("MatMul", ["T", "W"], ["Y"])]
        plain_steps = [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("MatMul", ["t", "W"], ["y"])]
    lin = helper.make_function("local", "Lin", ["X", "W"], ["Y"], steps,
                               [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)])
    x = [helper.make_tensor_value_info("x", F32, [64, 32])]
    w = [numpy_helper.from_array(np.ones((32, 16), np.float32), "W")]
    y = [helper.make_tensor_value_info("y", F32, None)]
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)]
    called = from_onnx(helper.make_model(helper.make_graph(
        [helper.make_node("Lin", ["x", "W"], ["y"], domain="local", name="lin")], "call", x, y, w),
        opset_imports=opsets, functions=[act, lin]))
    plain = from_onnx(helper.make_model(helper.make_graph(plain_steps, "plain", x, y, w), opset_imports=opsets[:1]))
    for kind in ("gpu", "cpu"):
        want = float(np.nansum(plain.kind_cost[kind]))
        assert float(called.kind_cost[kind][called.op_index["lin"]]) == pytest.approx(want)

def test_shared_initializer_becomes_an_op_and_unnamed_nodes_get_names():
    """A weight read by two nodes is one Initializer op with an edge to each; unnamed nodes are <type>_<i>."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("MatMul", ["h", "W"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", F32, [2, 4])],
                   [helper.make_tensor_value_info("y", F32, None)], [_weight("W", 4, 4)])
    g = from_onnx(model)
    assert g.op_names == ("x", "W", "MatMul_0", "MatMul_1")
    assert g.persistent_memory.tolist() == [0, 64, 0, 0]
    assert {(e.src, e.dst) for e in g.edges()} >= {("W", "MatMul_0"), ("W", "MatMul_1")}


def test_a_name_made_for_a_node_is_never_a_later_nodes_given_name():
    """The unnamed Relu (node 1) was named Relu_1 and the node given the name Relu_1 (node 3) became Relu_1_1, so a
    placement of op Relu_1 went to another node; the second of two nodes named dup took dup_1, a later node's name."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["c"], name="dup"),
             helper.make_node("Relu", ["c"], ["d"], name="Relu_1"),
             helper.make_node("Relu", ["d"], ["e"], name="dup"),
             helper.make_node("Relu", ["e"], ["y"], name="dup_1")]
    g = from_onnx(_relu_chain(nodes))
    assert dict(g.source.node_index) == {"relu": 0, "Relu_1_1": 1, "dup": 2, "Relu_1": 3, "dup_2": 4, "dup_1": 5}
    # without such a clash, names are as before: given, <op_type>_<i> for an unnamed node, _<k> for a repeated name
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"], name="x"),
             helper.make_node("Relu", ["b"], ["c"], name="r"), helper.make_node("Relu", ["c"], ["y"], name="r")]
    assert from_onnx(_relu_chain(nodes)).op_names == ("x", "Relu_0", "x_1", "r", "r_1")


def test_initializer_with_a_negative_dimension_is_named():
    """A stored tensor with dims (-2, 3) is refused naming the initializer, not the node that reads it."""
    weight = _weight("W", 2, 3)
    weight.dims[0] = -2
    model = _model([helper.make_node("Add", ["x", "W"], ["y"], name="add")],
                   [helper.make_tensor_value_info("x", F32, [1, 3])], [helper.make_tensor_value_info("y", F32, None)],
                   [weight])
    with pytest.raises(UnsupportedGraphError, match=r"initializer 'W' has dims \[-2, 3\]"):
        from_onnx(model)


def test_consumed_unknown_shape_names_node_and_tensor():
    """A tensor read by a node but of unknown shape after inference raises, naming producer and tensor."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F32, [2, 4]),
                           helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", F32, None)])
    with pytest.raises(UnsupportedGraphError, match="'reshape'.*'r'"):
        from_onnx(model)


def _relu_chain(nodes, initializers=()):
    return _model(nodes, [helper.make_tensor_value_info("x", F32, [2, 4])],
                  [helper.make_tensor_value_info("y", F32, None)], initializers)


def test_a_tensor_written_by_two_nodes_or_by_a_node_and_a_weight_raises_naming_both():
    """Before, the second writer silently replaced the first as the tensor's producer (an ONNX graph is SSA)."""
    twice = _relu_chain([helper.make_node("Relu", ["x"], ["y"], name="first"),
                         helper.make_node("Relu", ["x"], ["y"], name="second")])
    with pytest.raises(UnsupportedGraphError, match="tensor 'y' is an output of two nodes, 'first' and 'second'"):
        from_onnx(twice)
    shadow = _relu_chain([helper.make_node("Relu", ["x"], ["W"], name="relu"),
                          helper.make_node("MatMul", ["W", "W"], ["y"], name="mm")], [_weight("W", 4, 4)])
    with pytest.raises(UnsupportedGraphError, match=r"'relu' \(Relu\) writes tensor 'W', which is also an initializer"):
        from_onnx(shadow)


def test_a_node_reading_a_later_nodes_output_names_that_node_as_out_of_order_or_a_cycle():
    """Before, the message said the tensor was one that "nothing produces", though a later node (or the node
    itself) does."""
    unsorted = _relu_chain([helper.make_node("Relu", ["h"], ["y"], name="second"),
                            helper.make_node("Relu", ["x"], ["h"], name="first")])
    with pytest.raises(UnsupportedGraphError, match="'second'.*reads tensor 'h', which only a later node, 'first', "
                                                    "produces: the nodes are not in topological order"):
        from_onnx(unsorted)
    self_loop = _relu_chain([helper.make_node("Add", ["x", "y"], ["y"], name="add")])
    with pytest.raises(UnsupportedGraphError, match=r"'add' \(Add\) reads tensor 'y', which it produces itself"):
        from_onnx(self_loop)


# ---------------------------------------------------------------------- folding shape arithmetic
def _ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _reshape_by_mod(source="x"):
    """Reshape x (2, 3, 4) to Concat(Shape(source)[[1, 2]] % [4, 3], [-1]), which is (3, 1, 8) for source x."""
    nodes = [helper.make_node("Shape", [source], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "i"], ["g"], name="gather"),
             helper.make_node("Mod", ["g", "k"], ["m"], name="mod"),
             helper.make_node("Concat", ["m", "rest"], ["dims"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "dims"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    if source != "x":
        nodes.insert(0, helper.make_node("NonZero", ["x"], [source], name="nonzero"))
    return _model(nodes, [helper.make_tensor_value_info("x", F32, [2, 3, 4])],
                  [helper.make_tensor_value_info("y", F32, None)],
                  [_ints("i", [1, 2]), _ints("k", [4, 3]), _ints("rest", [-1])])


def _inferred_shape(model, tensor):
    """The shape onnx's own inference (with data propagation) gives ``tensor``; None where a dim is unknown."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    value = next(v for v in inferred.graph.value_info if v.name == tensor)
    return [d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim]


def test_shape_arithmetic_that_inference_leaves_unknown_is_folded():
    """A Reshape whose shape comes from Shape -> Gather -> Mod -> Concat gets its shape; no node is removed."""
    model = _reshape_by_mod()
    assert None in _inferred_shape(model, "r")  # onnx alone cannot resolve it (no Mod data propagation)
    g = from_onnx(model)
    assert g.op_names == ("x", "shape", "gather", "mod", "concat", "reshape", "relu")
    assert g.output_shapes[g.op_index["reshape"]] == ((3, 1, 8),)
    assert g.output_shapes[g.op_index["mod"]] == ((2,),)
    assert {(e.src, e.dst): e.bytes for e in g.edges()}[("reshape", "relu")] == 24 * 4
    assert list(g.source.model.graph.node) == list(model.graph.node)


def test_shape_that_cannot_be_folded_names_node_and_tensor():
    """Shape arithmetic over a data-dependent tensor (NonZero's output) stays unknown and raises, naming it."""
    with pytest.raises(UnsupportedGraphError, match="'nonzero'.*'nz'.*unknown after shape inference"):
        from_onnx(_reshape_by_mod("nz"))


@pytest.mark.filterwarnings("ignore")  # the TorchScript-based exporter's deprecation and tracer warnings
def test_raw_torch_transformer_export_imports_and_runs():
    """torch's legacy export of a TransformerEncoder (Slice bounds from Shape/Mod/Div) imports and runs right."""
    torch = pytest.importorskip("torch")
    import io

    from gplace.ir import Cluster, Device, Placement
    from gplace.runtime.torch_runtime import TorchRuntime

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    module, x = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval(), torch.randn(2, 5, 16)
    buffer = io.BytesIO()
    torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=17, input_names=["x"])
    model = onnx.load_from_string(buffer.getvalue())
    assert None in _inferred_shape(model, "/layers.0/self_attn/Slice_output_0")
    g = from_onnx(model)

    graph = model.graph
    readers = {t.name: sum(t.name in n.input for n in graph.node) for t in graph.initializer}
    assert g.num_ops == len(graph.node) + 1 + sum(k != 1 for k in readers.values())
    assert list(g.source.model.graph.node) == list(graph.node)
    assert all(-1 not in shape for shapes in g.output_shapes for shape in shapes)
    kept = g.source.model.graph
    floats = {v.name for v in [*kept.value_info, *kept.input] if v.type.tensor_type.elem_type == F32}
    op_of = {t: name for name, i in g.source.node_index.items() for t in graph.node[i].output} | {"x": "x"}
    float_edges = {(op_of[t], name) for name, i in g.source.node_index.items() for t in graph.node[i].input
                   if t in floats and t in op_of}
    edge_bytes = {(e.src, e.dst): e.bytes for e in g.edges()}
    assert len(float_edges) > 50 and all(edge_bytes[e] > 0 for e in float_edges)

    cluster = Cluster.build([Device("/CPU:0", "cpu"), Device("/CPU:1", "cpu")], default_bandwidth=1e9)
    placement = Placement.for_graph(g, np.random.default_rng(0).integers(0, 2, g.num_ops).tolist())
    runtime = TorchRuntime(steps=1, warmup=0, device_map={"/CPU:0": "cpu", "/CPU:1": "cpu"})
    got = runtime.run(g, cluster, placement, inputs=[x])[0]
    with torch.no_grad():
        torch.testing.assert_close(got, module(x), rtol=1e-5, atol=1e-5)

def test_file_path_and_garbage_file(tmp_path: Path):
    """A path imports like the proto; a file that is not ONNX raises UnsupportedGraphError, not DecodeError."""
    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp(), str(path))
    assert from_onnx(path).fingerprint == from_onnx(_mlp()).fingerprint
    assert from_onnx(str(path), name="n").name == "n"
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\x00 not a protobuf \x13\x37" * 3)
    with pytest.raises(UnsupportedGraphError, match="bad.onnx"):
        from_onnx(bad)
    with pytest.raises(FileNotFoundError):
        from_onnx(tmp_path / "missing.onnx")


# ---------------------------------------------------------------------- the shipped backend models
_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
_SETS = ("light", "pytorch-converted", "pytorch-operator", "simple")


def _shipped_models() -> list[Path]:
    return sorted(p for s in _SETS for p in (_DATA / s).glob("**/*.onnx"))


def test_every_shipped_backend_model_imports_or_is_unsupported():
    """Each model in onnx's backend test data imports or raises UnsupportedGraphError; all light/ ones import."""
    models = _shipped_models()
    assert len(models) > 100, f"only {len(models)} models under {_DATA}"
    imported, unsupported, failures = [], [], []
    start = time.perf_counter()
    for path in models:
        label = str(path.relative_to(_DATA))
        try:
            g = from_onnx(path)
            assert g.num_ops > 0 and all(s for s in g.output_shapes)
            imported.append(label)
        except UnsupportedGraphError as err:
            unsupported.append(f"{label}: {err}")
            if label.startswith("light"):
                failures.append(f"{label}: light model did not import: {err}")
        except Exception as err:  # the rule under test: nothing else may escape
            failures.append(f"{label}: {type(err).__name__}: {err}")
    elapsed = time.perf_counter() - start
    summary = f"{len(models)} models: {len(imported)} imported, {len(unsupported)} unsupported in {elapsed:.1f}s"
    assert not failures, summary + "\n" + "\n".join(failures)
    assert sum(label.startswith("light") for label in imported) == 9, summary
    assert elapsed < 40, summary


def test_a_local_function_called_inside_a_scan_body_costs_its_body():
    """A Scan whose body calls a local function (Mul then Exp) costs what the Scan with those nodes written out
    costs; before, the call inside the body counted memory traffic only."""
    plain, called = scan_model(steps=6), scan_model(steps=6)
    for model in (plain, called):
        body = next(a.g for a in model.graph.node[0].attribute if a.name == "body")
        mul = body.node[0]
        body.node.remove(mul)
        if model is plain:
            body.node.insert(0, helper.make_node("Exp", ["product"], ["scaled"]))
            body.node.insert(0, helper.make_node("Mul", ["x_t", "V"], ["product"]))
        else:
            body.node.insert(0, helper.make_node("Scale", ["x_t", "V"], ["scaled"], domain="local"))
    called.functions.append(helper.make_function(
        "local", "Scale", ["A", "B"], ["C"],
        [helper.make_node("Mul", ["A", "B"], ["T"]), helper.make_node("Exp", ["T"], ["C"])],
        [helper.make_opsetid("", 18)]))
    called.opset_import.append(helper.make_opsetid("local", 1))
    want, got = from_onnx(plain), from_onnx(called)
    for kind in ("gpu", "cpu"):
        assert float(got.kind_cost[kind][got.op_index["scan"]]) == pytest.approx(
            float(want.kind_cost[kind][want.op_index["scan"]]))



def _scalar(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype), name)


def _qdq_mlp():
    """A QDQ-quantised 2-layer MLP: x -> Q -> DQ -> MatMul(DQ(W1)) -> Relu -> Q -> DQ -> MatMul(DQ(W2)) -> y.

    Weights within +-63: on CPUs without AVX-512 VNNI, onnxruntime's int8 MatMul sums pairs of u8 x s8 products in
    16 bits, which saturate for larger weights (255 x 100 x 2), so a fused and an unfused part differed by 11.5 in
    one output there (and not on AVX-512 machines)."""
    rng = np.random.default_rng(0)
    initializers = [_scalar("sx", 0.05), _scalar("zx", 0, np.int8), _scalar("sr", 0.1), _scalar("zr", 0, np.int8),
                    numpy_helper.from_array(rng.integers(-63, 64, (16, 16)).astype(np.int8), "W1q"),
                    _scalar("s1", 0.02), _scalar("z1", 0, np.int8),
                    numpy_helper.from_array(rng.integers(-63, 64, (16, 16)).astype(np.int8), "W2q"),
                    _scalar("s2", 0.03), _scalar("z2", 0, np.int8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="q1"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dq1"),
             helper.make_node("DequantizeLinear", ["W1q", "s1", "z1"], ["W1d"], name="dqw1"),
             helper.make_node("MatMul", ["xd", "W1d"], ["h"], name="mm1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("QuantizeLinear", ["r", "sr", "zr"], ["rq"], name="q2"),
             helper.make_node("DequantizeLinear", ["rq", "sr", "zr"], ["rd"], name="dq2"),
             helper.make_node("DequantizeLinear", ["W2q", "s2", "z2"], ["W2d"], name="dqw2"),
             helper.make_node("MatMul", ["rd", "W2d"], ["y"], name="mm2")]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", F32, [4, 16])],
                              [helper.make_tensor_value_info("y", F32, [4, 16])], initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _qdq_placements(graph, cluster):
    """The baselines' placements and random ones that keep each colocation group on one device."""
    import gplace

    placements = [gplace.place(graph, cluster, method=m, seed=0).placement
                  for m in ("heft", "m_etf", "round_robin", "random", "single")]
    for seed in range(40):
        devices = np.random.default_rng(seed).integers(0, cluster.num_devices, graph.num_ops)
        first: dict[str, int] = {}
        for i, group in enumerate(graph.colocation):
            if group is not None:
                devices[i] = first.setdefault(group, int(devices[i]))
        placements.append(gplace.Placement.for_graph(graph, devices.tolist()))
    return placements


def test_a_dequantize_read_by_one_node_is_colocated_with_it_and_splits_give_the_whole_models_outputs():
    """QDQ: each DequantizeLinear read by one node runs where that node runs (both of a MatMul's join one
    group), so onnxruntime fuses a part's DQ + MatMul as it fuses the whole model's: every placement's parts give
    the whole model's output."""
    ort = pytest.importorskip("onnxruntime")
    from gplace.export.onnx import run_parts, split_onnx
    from gplace.testing import uniform_cluster

    ort.set_default_logger_severity(3)
    model, x = _qdq_mlp(), np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    graph, cluster = from_onnx(model), uniform_cluster(3, kind="cpu", bandwidth=1e9)
    groups = {op: group for op, group in zip(graph.op_names, graph.colocation, strict=True) if group}
    assert groups == {"dq1": "qdq:mm1", "dqw1": "qdq:mm1", "mm1": "qdq:mm1",
                      "dq2": "qdq:mm2", "dqw2": "qdq:mm2", "mm2": "qdq:mm2"}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    for placement in _qdq_placements(graph, cluster):
        names = placement.to_names(graph, cluster)
        assert names["dq1"] == names["dqw1"] == names["mm1"] and names["dq2"] == names["dqw2"] == names["mm2"]
        got = run_parts(split_onnx(graph, cluster, placement), {"x": x}, ["y"])["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(names))


def test_a_dequantize_read_by_several_nodes_or_none_is_in_no_group():
    """Only a DequantizeLinear with exactly one reading node is colocated (with it)."""
    nodes = [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="shared"),
             helper.make_node("Relu", ["xd"], ["a"], name="relu"), helper.make_node("Neg", ["xd"], ["b"], name="neg"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["unused"], name="dead"),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "dq", [helper.make_tensor_value_info("xq", TensorProto.INT8, [4])],
                              [helper.make_tensor_value_info("y", F32, [4])],
                              initializer=[_scalar("s", 0.5), _scalar("z", 0, np.int8)])
    g = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    assert set(g.colocation) == {None}


@pytest.mark.parametrize(("marker", "named"), [
    (b"ReQQ", r"node 1 \('relu'\): its op_type b'Re\\xff\\xfe' is not UTF-8 text"),
    (b"zQQQ", r"node 0 \('mmQQ'\): its output b'zQ\\xff\\xfe' is not UTF-8 text"),
    (b"mmQQ", r"node 0 \(b'mm\\xff\\xfe'\): its name b'mm\\xff\\xfe' is not UTF-8 text"),
])
def test_a_name_that_is_not_utf8_text_is_named(tmp_path, marker, named):
    """Protobuf hands a string field of invalid UTF-8 over as bytes: an op type failed in the cost model ('a
    bytes-like object is required'), a tensor name imported and then failed the write-back."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["zQQQ"], name="mmQQ"),
             helper.make_node("ReQQ", ["zQQQ"], ["y"], name="relu")]
    model = _model(nodes, [helper.make_tensor_value_info("x", F32, [4, 8])],
                   [helper.make_tensor_value_info("y", F32, None)], [_weight("W", 8, 16)])
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString().replace(marker, marker[:-2] + b"\xff\xfe"))
    with pytest.raises(UnsupportedGraphError, match=f"bad.onnx: {named}"):
        from_onnx(path)


def test_an_initializer_of_a_data_type_onnx_does_not_define_is_named():
    """data_type 999 was sized as 32-bit, silently."""
    model = _mlp()
    model.graph.initializer[0].data_type = 999
    with pytest.raises(UnsupportedGraphError, match="initializer 'W' has data_type 999, not an ONNX element type"):
        from_onnx(model)
    model.graph.initializer[0].data_type = 27  # FLOAT6E2M3: 6 bits an element
    assert from_onnx(model).persistent_memory.tolist()[1] == 8 * 16 * 6 // 8


def test_an_input_dimension_of_minus_one_is_a_dynamic_one():
    """Some exporters write -1 for a dynamic dimension: it was taken as a size ('op x has negative output_bytes
    -32'), and an input_shapes entry for it was refused as a mismatch."""
    model = _mlp()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1
    with pytest.raises(UnsupportedGraphError, match=r"input 'x': dimension 0 \(-1\) is unknown; give the full shape"):
        from_onnx(model)
    g = from_onnx(model, {"x": [4, 8]})
    assert g.output_shapes[g.op_index["relu"]] == ((4, 16),)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", F32, [-1, 16]))  # a declared output too
    g = from_onnx(model, {"x": [4, 8]})
    assert g.output_shapes[g.op_index["relu"]] == ((4, 16),) and g.output_bytes[g.op_index["relu"]] == 4 * 16 * 4


def test_a_local_function_body_name_that_is_not_utf8_text_is_named(tmp_path):
    """The UTF-8 check walked the main graph only: a function body's op type of invalid UTF-8 imported, costing
    0 s."""
    act = helper.make_function("local", "Act", ["T"], ["Y"], [helper.make_node("ReQQ", ["T"], ["Y"])],
                               [helper.make_opsetid("", 18)])
    x, y = [helper.make_tensor_value_info("x", F32, [4, 8])], [helper.make_tensor_value_info("y", F32, None)]
    model = helper.make_model(helper.make_graph([helper.make_node("Act", ["x"], ["y"], domain="local", name="a")],
                                                "g", x, y),
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
                              functions=[act])
    path = tmp_path / "bad.onnx"
    path.write_bytes(model.SerializeToString().replace(b"ReQQ", b"Re\xff\xfe"))
    with pytest.raises(UnsupportedGraphError, match=r"bad.onnx, function 'Act': node 0 \(''\): its op_type"):
        from_onnx(path)
