"""TensorFlow importer inputs: which SavedModel signature is imported, what an unknown input dimension asks for,
and the output names a program gives."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.tf

W = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)


class _Codec(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(W, name="w")

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    def encode(self, x):
        return {"code": tf.nn.relu(tf.matmul(x, self.w))}

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="z")])
    def decode(self, z):
        return {"recon": tf.tanh(tf.matmul(z, self.w, transpose_b=True))}


@pytest.fixture(scope="module")
def two_signatures(tmp_path_factory):
    """A SavedModel with the signatures ``encode`` and ``decode`` and no ``serving_default``."""
    module = _Codec()
    path = tmp_path_factory.mktemp("sm") / "codec"
    tf.saved_model.save(module, str(path), signatures={"encode": module.encode, "decode": module.decode})
    return path


def _op_types(graph):
    return {op.type for op in graph.ops()}


def test_a_saved_model_without_serving_default_logs_the_signature_it_took(two_signatures, caplog):
    """Several signatures and no serving_default: the first by name is taken, and the log names it and the others
    (it was taken silently)."""
    with caplog.at_level(logging.INFO, logger="gplace.importers.tensorflow"):
        graph = from_tensorflow(two_signatures)
    assert graph.source.inputs == ("z:0",) and "Tanh" in _op_types(graph)
    assert "signature 'decode' of decode, encode" in caplog.text and "signature=" in caplog.text


def test_signature_picks_a_saved_model_signature_and_a_missing_one_lists_them(two_signatures):
    """``signature=`` imports the named signature; one the SavedModel lacks is an error listing those it has."""
    graph = from_tensorflow(two_signatures, signature="encode")
    assert graph.source.inputs == ("x:0",) and "Relu" in _op_types(graph) and "Tanh" not in _op_types(graph)
    assert graph.source.output_names == ("code",)
    with pytest.raises(UnsupportedGraphError, match="has no signature 'serve'; its signatures: decode, encode"):
        from_tensorflow(two_signatures, signature="serve")


def test_signature_is_refused_for_what_is_not_a_saved_model(tmp_path):
    """``signature=`` names a SavedModel's signature: given with a function or a GraphDef file it is an error."""
    fn = _Codec().encode
    with pytest.raises(UnsupportedGraphError, match="signature='encode' names a signature of a SavedModel"):
        from_tensorflow(fn, signature="encode")
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.identity(tf.compat.v1.placeholder(tf.float32, [2], name="x"), name="y")
    tf.io.write_graph(tf_graph.as_graph_def(), str(tmp_path), "g.pb", as_text=False)
    with pytest.raises(UnsupportedGraphError, match="this is a file"):
        from_tensorflow(tmp_path / "g.pb", signature="encode")


def _with_default_input() -> tf.Graph:
    """``y = relu(x @ W)`` whose input ``x`` is a ``PlaceholderWithDefault`` of shape ``[None, 4]``."""
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        x = tf.compat.v1.placeholder_with_default(np.zeros((2, 4), np.float32), [None, 4], name="x")
        tf.identity(tf.nn.relu(tf.matmul(x, tf.constant(W))), name="y")
    return tf_graph


@pytest.mark.parametrize("batch_size", [4, None])
def test_an_unknown_batch_of_a_placeholder_with_default_does_not_ask_for_batch_size(batch_size):
    """A PlaceholderWithDefault's unknown batch: batch_size does not set it, so the error says so and what to do
    (it said "give batch_size", even when batch_size was given)."""
    with pytest.raises(UnsupportedGraphError) as err:
        from_tensorflow(_with_default_input().as_graph_def(), batch_size=batch_size, outputs=["y"])
    message = str(err.value)
    assert "node 'x' (PlaceholderWithDefault)" in message and "give batch_size" not in message
    assert "batch_size sets only Placeholder inputs, not a PlaceholderWithDefault" in message
    assert "feed the input through a Placeholder" in message and "outputs=" in message
    assert ("batch_size=4 is given" in message) == (batch_size == 4)


def test_an_unknown_batch_of_a_placeholder_still_asks_for_batch_size():
    """A Placeholder's unknown batch without batch_size: give batch_size (unchanged)."""
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.identity(tf.compat.v1.placeholder(tf.float32, [None, 4], name="x") * 2.0, name="y")
    with pytest.raises(UnsupportedGraphError, match=r"node 'x' \(Placeholder\).*\(give batch_size\)$"):
        from_tensorflow(tf_graph.as_graph_def(), outputs=["y"])
    assert from_tensorflow(tf_graph.as_graph_def(), outputs=["y"], batch_size=3).num_ops


def test_a_function_returning_a_dict_keeps_its_keys_as_output_names():
    """The keys of a returned dict name the outputs, in the outputs' order; one unnamed tensor has none."""

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    def heads(x):
        return {"reg": tf.reduce_sum(x, 1), "cls": tf.nn.softmax(x)}

    source = from_tensorflow(heads).source
    assert len(source.output_names) == len(source.outputs) == 2 and set(source.output_names) == {"reg", "cls"}
    assert dict(zip(source.output_names, source.outputs, strict=True)) == {
        key: t.name for key, t in heads.get_concrete_function().structured_outputs.items()}

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    def plain(x):
        return tf.nn.relu(x)

    assert from_tensorflow(plain).source.output_names == ()


def test_the_tensorflow_graph_config_takes_a_signature(two_signatures):
    """``gplace graph=tensorflow graph.obj=... graph.signature=encode`` (the config had no such key)."""
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate

    with initialize_config_module(config_module="gplace.conf", version_base="1.3"):
        config = compose(config_name="config", overrides=["graph=tensorflow"]).graph
        assert "signature" in config and config.signature is None  # an override of a missing key fails in Hydra
        config = compose(config_name="config", overrides=["graph=tensorflow", f"graph.obj={two_signatures}",
                                                          "graph.signature=encode"]).graph
    graph = instantiate(config)
    assert graph.source.inputs == ("x:0",) and graph.source.output_names == ("code",)
