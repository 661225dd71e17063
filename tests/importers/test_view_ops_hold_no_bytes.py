"""ONNX and TensorFlow imports: an op that only reuses its input's buffer (ONNX ``Reshape``, ``Squeeze``,
``Unsqueeze``, ``Flatten``, ``Identity``; TensorFlow ``Identity``, ``IdentityN``, ``Reshape``, ``Squeeze``,
``ExpandDims``, ...) holds no bytes of its own, and its readers keep the producer's buffer allocated
(``gplace.importers.aliases``), as the torch import's views. Each was charged as a fresh tensor: a Keras MLP
training step's ``IdentityN`` of the gradients took 12.7 MB more, the simulated peak 25.4 MB against 15.7 MB
for the torch import of the same model."""

import os

import numpy as np
import pytest

from gplace import Placement
from gplace.runtime import Simulator
from gplace.testing import uniform_cluster

ACTIVATION = 64 * 64 * 4


def _ops(graph):
    return {op.name: op for op in graph.ops()}


def _edges(graph):
    return {(e.src, e.dst): e.bytes for e in graph.edges()}


def _one_device_peak(graph) -> int:
    measured = Simulator().measure(graph, uniform_cluster(1), Placement.for_graph(graph, [0] * graph.num_ops))
    return int(measured.peak_memory[0])


@pytest.mark.onnx
def test_onnx_views_hold_no_bytes_and_their_readers_hold_the_buffer():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from gplace import from_onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096]),
               helper.make_tensor_value_info("flat", TensorProto.FLOAT, [4096])]
    nodes = [helper.make_node("Exp", ["x"], ["e"], name="exp"),
             helper.make_node("Reshape", ["e", "shape"], ["r"], name="reshape"),
             helper.make_node("Unsqueeze", ["r", "axes"], ["u"], name="unsqueeze"),
             helper.make_node("Squeeze", ["u", "axes"], ["s"], name="squeeze"),
             helper.make_node("Relu", ["s"], ["y"], name="relu"),
             helper.make_node("Flatten", ["e"], ["f"], name="flatten", axis=0),
             helper.make_node("Reshape", ["f", "shape"], ["flat"], name="returned")]
    inits = [numpy_helper.from_array(np.array([4096], np.int64), "shape"),
             numpy_helper.from_array(np.array([0], np.int64), "axes")]
    model = helper.make_model(helper.make_graph(nodes, "views", [x], outputs, inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    graph = from_onnx(model)
    ops, edges = _ops(graph), _edges(graph)
    assert [ops[n].output_bytes for n in ("reshape", "unsqueeze", "squeeze", "flatten")] == [0, 0, 0, 0]
    assert ops["returned"].output_bytes == ACTIVATION  # a model output keeps its bytes to the end
    assert edges[("exp", "relu")] == 0 and edges[("squeeze", "relu")] == ACTIVATION
    # e, relu's y and the returned flat (x is freed after exp) and the two 8-byte initializers
    assert _one_device_peak(graph) == 3 * ACTIVATION + 16


@pytest.mark.tf
def test_tensorflow_views_hold_no_bytes_and_their_readers_hold_the_buffer():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    tf = pytest.importorskip("tensorflow")
    from gplace.importers.tensorflow import from_tensorflow

    @tf.function(input_signature=[tf.TensorSpec((64, 64))], autograph=False)
    def views(x):
        e = tf.exp(x)
        r = tf.expand_dims(tf.reshape(tf.identity(e), [4096]), 0)
        return tf.nn.relu(tf.squeeze(r, 0))

    graph = from_tensorflow(views)
    ops, edges = _ops(graph), _edges(graph)
    read = {src for src, _ in edges}
    views = [op for op in ops.values() if op.type in ("Identity", "Reshape", "ExpandDims", "Squeeze")]
    assert {op.type for op in views if op.name in read} == {"Identity", "Reshape", "ExpandDims", "Squeeze"}
    assert all(op.output_bytes == 0 for op in views if op.name in read)
    assert [op.output_bytes for op in views if op.name not in read] == [ACTIVATION]  # the function's output
    relu = next(name for name, op in ops.items() if op.type == "Relu")
    assert edges[("Exp", relu)] == 0
