"""A TF1 SavedModel whose variables are reference variables (``VariableV2``, TF1's default without
``use_resource``): their values are read from its checkpoint, as resource variables' are; they got none, with no
warning, so tf-v1 ran the model with made-up values and save_saved_model refused it."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from gplace import Placement, from_tensorflow  # noqa: E402
from gplace.runtime import TensorFlowRuntime  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

pytestmark = pytest.mark.tf

B = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


def _tf1_saved_model(path):
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        b = tf.compat.v1.get_variable("b", initializer=tf.constant(B), use_resource=False)
        z = tf.identity(x + b, name="z")
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            builder = tf.compat.v1.saved_model.Builder(str(path))
            builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
                "serving_default": tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"z": z})})
            builder.save()


def test_reference_variables_take_their_checkpointed_values(tmp_path, caplog):
    _tf1_saved_model(tmp_path / "model")
    graph = from_tensorflow(tmp_path / "model")
    assert "without a value" not in caplog.text
    assert set(graph.source.variables) == {"b"}
    [z] = TensorFlowRuntime(steps=1, warmup=0).run(graph, uniform_cluster(2, kind="cpu"), Placement.single(graph, 1),
                                                   feeds={"x:0": np.zeros((2, 4), np.float32)})
    np.testing.assert_array_equal(z, np.stack([B, B]))


def test_a_model_of_reference_variables_is_written_back_and_read_again(tmp_path):
    from gplace.export.tensorflow import save_saved_model

    _tf1_saved_model(tmp_path / "model")
    graph = from_tensorflow(tmp_path / "model")
    cluster = uniform_cluster(2, kind="cpu")
    save_saved_model(graph, cluster, Placement.single(graph, 1), tmp_path / "placed")
    again = from_tensorflow(tmp_path / "placed")
    [z] = TensorFlowRuntime(steps=1, warmup=0).run(again, cluster, Placement.single(again, 0),
                                                   feeds={"x:0": np.zeros((2, 4), np.float32)})
    np.testing.assert_array_equal(z, np.stack([B, B]))
