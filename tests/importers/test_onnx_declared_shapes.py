"""ONNX import: a model's declared value_info and output shapes give way to the shapes inferred from input_shapes;
a declared type is used only where inference leaves the value unknown (a custom op's output)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from gplace import Placement, from_onnx  # noqa: E402

pytestmark = pytest.mark.onnx

F32 = TensorProto.FLOAT


def _info(name, shape, elem=F32):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, value_info=(), initializers=(), domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers), value_info=list(value_info))
    opsets = [helper.make_opsetid("", 17), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)  # onnxruntime lags onnx


def _relu_matmul(value_info, y_shape):
    """x (batch, 4) -> Relu -> a -> MatMul(W 4x8) -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("MatMul", ["a", "W"], ["y"], name="mm")]
    weight = numpy_helper.from_array(np.ones((4, 8), np.float32), "W")
    return _model(nodes, [_info("x", ["batch", 4])], [_info("y", y_shape)], value_info, [weight])


def test_a_stale_fixed_value_info_shape_gives_way_to_the_given_input_shape(caplog):
    """value_info saying a: [1, 4] while x is (batch, 4): a was sized (1, 4), 16 bytes, at batch 256 (4,096)."""
    model = _relu_matmul([_info("a", [1, 4])], ["batch", 8])
    with caplog.at_level("INFO", logger="gplace.importers.onnx"):
        g = from_onnx(model, {"x": [256, 4]})
    assert g.output_shapes[g.op_index["r"]] == ((256, 4),) and g.output_bytes[g.op_index["r"]] == 256 * 4 * 4
    assert {(e.src, e.dst): e.bytes for e in g.edges()}[("r", "mm")] == 256 * 4 * 4
    kept = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in g.source.model.graph.value_info}
    assert kept["a"] == [256, 4]
    assert "1 value(s) declared with a fixed shape" in caplog.text and "'a' declared [1, 4], inferred [256, 4]" in \
        caplog.text


def test_a_stale_fixed_output_shape_gives_way_to_the_given_input_shape():
    """A graph output declared [1, 8] was sized 32 bytes at batch 256 (8,192)."""
    g = from_onnx(_relu_matmul([], [1, 8]), {"x": [256, 4]})
    assert g.output_shapes[g.op_index["mm"]] == ((256, 8),) and g.output_bytes[g.op_index["mm"]] == 256 * 8 * 4
    y = g.source.model.graph.output[0]
    assert [d.dim_value for d in y.type.tensor_type.shape.dim] == [256, 8]


def _exported_at_batch_one():
    """An MLP as exported at batch 1 with its shapes inferred into value_info, then the batch made dynamic by
    onnx.tools.update_model_dims (which changes only the inputs and outputs)."""
    from onnx.tools import update_model_dims

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), f"W{i}")
               for i, s in enumerate([(32, 64), (64, 64), (64, 10)])]
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["h0"], name="mm0"),
             helper.make_node("Relu", ["h0"], ["h1"], name="relu"),
             helper.make_node("MatMul", ["h1", "W1"], ["h2"], name="mm1"),
             helper.make_node("Tanh", ["h2"], ["h3"], name="tanh"),
             helper.make_node("MatMul", ["h3", "W2"], ["y"], name="mm2")]
    model = onnx.shape_inference.infer_shapes(_model(nodes, [_info("x", [1, 32])], [_info("y", [1, 10])],
                                                     initializers=weights))
    assert {v.name for v in model.graph.value_info} == {"h0", "h1", "h2", "h3"}
    return update_model_dims.update_inputs_outputs_dims(model, {"x": ["batch", 32]}, {"y": ["batch", 10]})


def test_value_info_left_at_the_export_batch_is_replaced_and_the_split_model_runs():
    """Every intermediate was (1, 64), 256 bytes, at batch 64 (16,384); split_onnx declared the cut tensor [1, 64]
    and run_parts failed in onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    from gplace.export.onnx import run_parts, split_onnx
    from gplace.testing import uniform_cluster

    model = _exported_at_batch_one()
    g = from_onnx(model, {"x": [64, 32]})
    for op in ("mm0", "relu", "mm1", "tanh"):
        assert g.output_bytes[g.op_index[op]] == 64 * 64 * 4, op
    assert g.output_bytes[g.op_index["mm2"]] == 64 * 10 * 4
    cluster = uniform_cluster(2, kind="cpu")
    mapping = {n: "/CPU:1" if n in ("tanh", "mm2") else "/CPU:0" for n in g.op_names}
    parts = split_onnx(g, cluster, Placement.from_names(g, cluster, mapping))
    cut = parts[1].model.graph.input[0]
    assert cut.name == "h2" and [d.dim_value for d in cut.type.tensor_type.shape.dim] == [64, 64]
    x = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    whole = ort.InferenceSession(_without_value_info(model).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(run_parts(parts, {"x": x}, ["y"])["y"], whole.run(["y"], {"x": x})[0], rtol=1e-5)


def _without_value_info(model):
    """The model without its stale value_info, for onnxruntime to run as the reference (quietly)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.value_info[:]
    return copy


def test_a_custom_ops_declared_type_is_kept_and_what_follows_it_is_inferred():
    """Foo and Bar (no onnx inference) take their value_info types, their symbols resolved; Relu's and Tanh's stale
    [1, 64] give way to what follows from Foo's and Bar's."""
    nodes = [helper.make_node("Foo", ["x"], ["a"], domain="my", name="foo"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Bar", ["b"], ["c"], domain="my", name="bar"),
             helper.make_node("Tanh", ["c"], ["y"], name="tanh")]
    value_info = [_info("a", ["batch", 64]), _info("b", [1, 64]), _info("c", ["batch", 32])]
    model = _model(nodes, [_info("x", ["batch", 64])], [_info("y", [1, 32])], value_info, domains=["my"])
    g = from_onnx(model, {"x": [16, 64]})
    shapes = dict(zip(g.op_names, g.output_shapes, strict=True))
    assert shapes == {"x": ((16, 64),), "foo": ((16, 64),), "relu": ((16, 64),), "bar": ((16, 32),),
                      "tanh": ((16, 32),)}


def test_a_custom_op_with_no_declared_type_is_still_named():
    """Without value_info, a custom op's output read by another node stays an error naming it."""
    nodes = [helper.make_node("Foo", ["x"], ["a"], domain="my", name="foo"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    model = _model(nodes, [_info("x", [2, 3])], [_info("y", [2, 3])], domains=["my"])
    with pytest.raises(ValueError, match="node 'foo': its output 'a' .*unknown after shape inference"):
        from_onnx(model)


def test_a_declared_shape_still_fills_what_inference_cannot_know():
    """NonZero's output count is data-dependent: its value_info shape is the only size there is, and it still
    flows on."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             helper.make_node("Transpose", ["nz"], ["y"], name="t")]
    model = _model(nodes, [_info("x", [3, 4])], [_info("y", None, TensorProto.INT64)],
                   [_info("nz", [2, 5], TensorProto.INT64)])
    g = from_onnx(model)
    assert g.output_shapes[g.op_index["nonzero"]] == ((2, 5),) and g.output_shapes[g.op_index["t"]] == ((5, 2),)
