"""TensorFlow importer: the nodes TensorFlow prunes (neither fetched nor stateful, nor needed by either) are not
imported; stateful ones are, fetched or not."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402

pytestmark = pytest.mark.tf


def _types(graph) -> list[str]:
    return sorted(op.type for op in graph.ops())


def test_unused_matmul_of_a_function_is_dropped():
    @tf.function(input_signature=[tf.TensorSpec((64, 64), name="x")], autograph=False)
    def fn(x):
        tf.matmul(x, x)  # TensorFlow does not run it
        return tf.nn.relu(x)

    graph = from_tensorflow(fn)
    assert "MatMul" not in _types(graph)
    assert [n.op for n in graph.source.graph_def.node if n.op == "MatMul"] == []


def test_unfetched_stateful_ops_are_kept():
    v = tf.Variable(tf.zeros((4,)), name="v")

    @tf.function(input_signature=[tf.TensorSpec((4,), name="x")], autograph=False)
    def fn(x):
        v.assign_add(tf.exp(x))  # runs, though nothing returned reads it
        tf.random.uniform((3,))  # stateful: runs too
        return x * 2.0

    types = _types(from_tensorflow(fn))
    assert {"AssignAddVariableOp", "Exp", "RandomUniform"} <= set(types)


def test_keras_step_drops_the_gradient_of_its_input():
    inp = keras.Input((8, 8, 2))
    y = keras.layers.Dense(2)(keras.layers.Flatten()(keras.layers.Conv2D(4, 3)(inp)))
    graph = from_tensorflow(keras.Model(inp, y), batch_size=2, training=True)
    types = _types(graph)
    assert "Conv2DBackpropFilter" in types
    assert "Conv2DBackpropInput" not in types  # nothing reads the gradient of the model's input


def test_keras_gru_step_zero_cell_outside_its_loop_is_dropped():
    model = keras.Sequential([keras.Input((10, 16)), keras.layers.GRU(32, return_sequences=True)])
    types = _types(from_tensorflow(model, batch_size=4))
    assert "While" in types
    assert "MatMul" not in types  # the cell Keras runs once outside the loop only for its output dtype
