"""from_tensorflow's arguments: outputs= read once and only where it is read, training= a real flag, a path any
os.PathLike."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.tf

W = np.ones((4, 4), np.float32)


class _PathLike:
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


@pytest.fixture(scope="module")
def graph():
    """``x -> a -> (b, c) -> d``: outputs ``b`` and ``c`` leave ``d`` out."""
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        a = tf.matmul(x, tf.constant(W, name="w"), name="a")
        tf.add(tf.nn.relu(a, name="b"), tf.tanh(a, name="c"), name="d")
    return g


@pytest.fixture(scope="module")
def keras_model():
    keras = tf.keras
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])


@pytest.fixture(scope="module")
def square():
    return tf.function(lambda x: tf.square(x), input_signature=[tf.TensorSpec([None, 4], tf.float32)])


@pytest.mark.parametrize("make", [tuple, np.array, lambda names: (n for n in names)],
                         ids=["tuple", "ndarray", "generator"])
def test_outputs_are_any_iterable_of_names_read_once(graph, make):
    g = from_tensorflow(graph.as_graph_def(add_shapes=True), batch_size=2, outputs=make(["b", "c"]))
    assert g.source.outputs == ("b:0", "c:0")
    assert "d" not in {op.name for op in g.ops()}
    assert all(type(name) is str for name in g.source.outputs)


@pytest.mark.parametrize("outputs, match", [
    (b"b", r"outputs must be a name \(str\) or names .* got a bytes"),
    (5, r"outputs must be a name \(str\) or names .* got a int"),
    ([b"b"], r"outputs\[0\] must be a name \(str\), got a bytes"),
    (["b", 3], r"outputs\[1\] must be a name \(str\), got a int"),
])
def test_outputs_that_are_not_names_are_refused_naming_outputs(graph, outputs, match):
    with pytest.raises(TypeError, match=match):
        from_tensorflow(graph.as_graph_def(add_shapes=True), batch_size=2, outputs=outputs)


def test_an_output_given_as_a_tensor_is_refused_naming_outputs(graph):
    with pytest.raises(TypeError, match=r"outputs\[0\] must be a name \(str\), got a"):
        from_tensorflow(graph, batch_size=2, outputs=[graph.get_tensor_by_name("b:0")])


def test_outputs_is_refused_for_a_keras_model_a_function_or_a_saved_model(keras_model, square, tmp_path):
    with pytest.raises(UnsupportedGraphError, match=r"outputs=\['nonexistent'\] .* a Keras model is imported with"):
        from_tensorflow(keras_model, batch_size=2, outputs=["nonexistent"])
    with pytest.raises(UnsupportedGraphError, match="a tf.function is imported with its own outputs"):
        from_tensorflow(square, batch_size=2, outputs="nonexistent")
    with pytest.raises(UnsupportedGraphError, match="a concrete function is imported with its own outputs"):
        from_tensorflow(square.get_concrete_function(), batch_size=2, outputs="nonexistent")
    module = tf.Module()
    module.f = square
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures=square.get_concrete_function())
    with pytest.raises(UnsupportedGraphError, match="the SavedModel .* is imported with its own outputs"):
        from_tensorflow(tmp_path / "sm", batch_size=2, outputs="nonexistent")
    assert from_tensorflow(keras_model, batch_size=2, outputs=[]).num_ops  # no outputs named: nothing to refuse


@pytest.mark.parametrize("training", ["false", np.bool_(True), None, 0])
def test_training_must_be_true_or_false(keras_model, training):
    with pytest.raises(ValueError, match="from_tensorflow: training must be true or false"):
        from_tensorflow(keras_model, batch_size=2, training=training)


def test_a_path_may_be_any_os_pathlike(graph, square, tmp_path):
    pb = tmp_path / "g.pb"
    pb.write_bytes(graph.as_graph_def(add_shapes=True).SerializeToString())
    for path in (_PathLike(pb), pathlib.PurePosixPath(pb)):
        assert from_tensorflow(path, batch_size=2, outputs="b").name == "g"
    module = tf.Module()
    module.f = square
    tf.saved_model.save(module, str(tmp_path / "sm"), signatures=square.get_concrete_function())
    g = from_tensorflow(_PathLike(tmp_path / "sm"), batch_size=2, signature="serving_default")
    assert "Square" in {op.type for op in g.ops()}
