"""Importers and profiling, probe of 2026-12-06: an fp16 ONNX model profiles (onnxruntime's own casts left out),
a TensorFlow output index the node lacks is refused at import, in-place ATen views and ONNX Constants cost
nothing, opset 8's Scan runs batch x sequence passes, and bad arguments are named (``kind``, ``skip_runs``, a
folder for a model, a 0-d input shape); a graph imported from a file with external weights profiles without its
path again."""

from __future__ import annotations

import json
import logging

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import gplace
from gplace.ir import Op, OpGraph, UnsupportedGraphError
from gplace.profiling import ort_op_times, profile_onnx, read_ort_profile, with_measured_costs

torch.set_num_threads(1)
OPSET = [h.make_opsetid("", 17)]


def _value(name, shape, elem=T.FLOAT):
    return h.make_tensor_value_info(name, elem, shape)


def test_an_fp16_model_profiles_without_onnxruntimes_own_casts(caplog):
    """ProfileError: profiled node 'InsertedPrecisionFreeCast_x' is not an op of graph 'g'."""
    model = h.make_model(h.make_graph([h.make_node("MatMul", ["x", "x"], ["y"], name="mm")], "g",
                                      [_value("x", [4, 4], T.FLOAT16)], [_value("y", [4, 4], T.FLOAT16)]),
                         opset_imports=OPSET)
    graph = gplace.from_onnx(model)
    with caplog.at_level(logging.WARNING, logger="gplace.profiling"):
        profiled = profile_onnx(graph, repeats=2)
    cost = profiled.kind_cost["cpu"][profiled.op_index["mm"]]
    assert np.isfinite(cost) and cost > 0
    assert any("cast(s) of its own" in r.getMessage() for r in caplog.records)


def test_a_tensorflow_output_the_node_lacks_is_refused_at_import():
    """'y:3' of a MatMul was taken and failed only when a runtime fetched it."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 3], name="x")
        tf.matmul(x, tf.constant(np.ones((3, 2), np.float32), name="w"), name="y")
    with pytest.raises(UnsupportedGraphError, match=r"output 'y:3' is no tensor of the graph: node 'y' \(MatMul\) "
                                                    r"has 1 output, y:0"):
        gplace.from_tensorflow(graph, outputs="y:3")
    with pytest.raises(UnsupportedGraphError, match=r"output 'y:' is no tensor of the graph"):
        gplace.from_tensorflow(graph, outputs="y:")
    assert gplace.from_tensorflow(graph, outputs="y:0").num_ops > 0


def test_in_place_views_cost_as_their_out_of_place_forms():
    class InPlace(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            y.unsqueeze_(0)
            return y

    graph = gplace.from_torch(InPlace(), (torch.randn(256, 256),))
    [i] = [i for i, t in enumerate(graph.op_types) if "unsqueeze_" in t]
    assert all(graph.kind_cost[k][i] == 0.0 for k in graph.kind_cost)


def test_an_onnx_constant_costs_what_the_same_initializer_costs():
    """A Constant node was charged a kernel (8 us on the GPU even for one byte); an initializer costs nothing."""
    b = nh.from_array(np.ones(1024, np.float32), "b")
    add = h.make_node("Add", ["x", "b"], ["y"])
    ins, outs = [_value("x", [64, 1024])], [_value("y", [64, 1024])]
    as_init = gplace.from_onnx(h.make_model(h.make_graph([add], "g", ins, outs, [b]), opset_imports=OPSET))
    as_node = gplace.from_onnx(h.make_model(h.make_graph([h.make_node("Constant", [], ["b"], value=b), add], "g",
                                                         ins, outs), opset_imports=OPSET))
    [c] = [i for i, t in enumerate(as_node.op_types) if t == "Constant"]
    assert all(as_node.kind_cost[k][c] == 0.0 for k in as_node.kind_cost)
    assert np.nansum(as_node.kind_cost["gpu"]) == pytest.approx(np.nansum(as_init.kind_cost["gpu"]))  # x: NaN


def test_opset_8_scan_runs_a_pass_per_batch_entry_and_step():
    """Scan-8's inputs are [batch, sequence, ...]: it was costed for the batch size (2 passes, not 100)."""
    weight = nh.from_array(np.ones((64, 64), np.float32), "W")
    body = h.make_graph([h.make_node("MatMul", ["e", "W"], ["m"]), h.make_node("Add", ["s", "m"], ["s_o"]),
                         h.make_node("Identity", ["s_o"], ["out"])], "body",
                        [_value("s", [64]), _value("e", [64])], [_value("s_o", [64]), _value("out", [64])])

    def scan_cost(opset, inputs, init, seq):
        model = h.make_model(h.make_graph(
            [h.make_node("Scan", inputs, ["fin", "outs"], body=body, num_scan_inputs=1)], "g",
            [_value("init", init), _value("seq", seq), _value("W", [64, 64])], [_value("fin", init),
                                                                               _value("outs", seq)], [weight]),
            opset_imports=[h.make_opsetid("", opset)])
        graph = gplace.from_onnx(model)
        return graph.kind_cost["cpu"][graph.op_types.index("Scan")]

    per_step = scan_cost(16, ["init", "seq"], [64], [50, 64]) / 50
    assert scan_cost(8, ["", "init", "seq"], [2, 64], [2, 50, 64]) == pytest.approx(100 * per_step)


def test_arguments_of_the_wrong_kind_are_named(tmp_path):
    graph = OpGraph.from_ops([Op("a", "Relu", None, {"cpu": 1e-6})], [])
    for kind in ("", 5):
        with pytest.raises(ValueError, match="kind must be a device kind"):
            with_measured_costs(graph, {"a": 2e-3}, kind=kind)
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"cat": "Node", "name": "a_kernel_time", "dur": d} for d in (100, 1, 1, 1)]))
    profile = read_ort_profile(path)
    assert ort_op_times(graph, profile, skip_runs=1) == {"a": pytest.approx(1e-6)}
    assert ort_op_times(graph, profile, skip_runs=np.int64(1)) == {"a": pytest.approx(1e-6)}  # as before
    for skip in (-1, 1.5):
        with pytest.raises(ValueError, match="skip_runs must be a whole number >= 0"):
            ort_op_times(graph, profile, skip_runs=skip)
    with pytest.raises(IsADirectoryError, match="is a folder, not an ONNX file"):
        gplace.from_onnx(tmp_path)


def test_a_0_d_input_shape_imports_from_module_shapes():
    from gplace.importers.torch_export import from_module_shapes

    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 3

    assert from_module_shapes(Scale(), [[]]).num_ops > 0
    with pytest.raises(ValueError, match="input_shapes must be one shape per positional input"):
        from_module_shapes(Scale(), [""])


def test_a_graph_from_a_file_with_external_weights_profiles_without_the_path(tmp_path):
    model = h.make_model(h.make_graph([h.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g",
                                      [_value("x", [2, 64])], [_value("y", [2, 64])],
                                      [nh.from_array(np.ones((64, 64), np.float32), "W")]), opset_imports=OPSET)
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    graph = gplace.from_onnx(tmp_path / "m.onnx")
    profiled = profile_onnx(graph, repeats=2)
    assert profiled.kind_cost["cpu"][profiled.op_index["mm"]] > 0
