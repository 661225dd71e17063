"""A device written inside a ``tf.while_loop`` or ``tf.cond`` body does not survive the write-back: the loop is
placed as a unit, its body runs where the placement puts the loop (a stale body device named a device the
placed program's session lacks)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace import Placement, from_tensorflow  # noqa: E402
from gplace.export.tensorflow import place_graph_def, session_config  # noqa: E402
from gplace.runtime import TensorFlowRuntime  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

pytestmark = pytest.mark.tf

X = np.ones((4, 8), np.float32)


def _loop_on(device: str):
    """A tf.function running tanh(t) + 1 three times in a while_loop whose body is written on ``device``."""

    @tf.function(input_signature=[tf.TensorSpec([4, 8], tf.float32, name="x")])
    def loop(x):
        def body(i, t):
            with tf.device(device):
                t = tf.tanh(t) + 1.0
            return i + 1, t
        return tf.while_loop(lambda i, t: i < 3, body, (tf.constant(0), tf.identity(x)))[1]

    return loop


loop_on_cpu2 = _loop_on("/device:CPU:2")


@tf.function(input_signature=[tf.TensorSpec([4, 8], tf.float32, name="x")])
def cond_on_cpu3(x):
    def then():
        with tf.device("/device:CPU:3"):
            return tf.tanh(x) * 2.0
    return tf.cond(tf.reduce_sum(x) > 0.0, then, lambda: x)


@pytest.mark.parametrize("function, expected", [(loop_on_cpu2, np.tanh(np.tanh(np.tanh(X) + 1) + 1) + 1),
                                                (cond_on_cpu3, np.tanh(X) * 2)])
def test_body_devices_give_way_to_the_placement(function, expected):
    graph = from_tensorflow(function)
    cluster = uniform_cluster(2, kind="cpu")
    placed = place_graph_def(graph, cluster, Placement.single(graph, 1))
    assert not [n.device for f in placed.library.function for n in f.node_def if n.device]
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(placed, name="")
    with tf.compat.v1.Session(graph=tf_graph, config=session_config(placed)) as session:
        [out] = session.run(list(graph.source.outputs), {graph.source.inputs[0]: X})
    np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_tf_v1_measures_a_loop_whose_body_named_a_device():
    graph = from_tensorflow(loop_on_cpu2)
    measurement = TensorFlowRuntime(steps=1, warmup=0).measure(graph, uniform_cluster(2, kind="cpu"),
                                                                 Placement.single(graph, 0))
    assert measurement.ok, measurement.reason


loop_pinned_to_cpu0 = _loop_on("/device:CPU:0")


def test_a_body_pinned_to_the_first_cpu_keeps_its_pin():
    graph = from_tensorflow(loop_pinned_to_cpu0)
    placed = place_graph_def(graph, uniform_cluster(2, kind="cpu"), Placement.single(graph, 1))
    assert {n.device for f in placed.library.function for n in f.node_def if n.device} == {"/device:CPU:0"}
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        tf.graph_util.import_graph_def(placed, name="")
    with tf.compat.v1.Session(graph=tf_graph, config=session_config(placed)) as session:
        [out] = session.run(list(graph.source.outputs), {graph.source.inputs[0]: X})
    np.testing.assert_allclose(out, np.tanh(np.tanh(np.tanh(X) + 1) + 1) + 1, rtol=1e-5)


def test_a_first_cpu_pin_of_another_job_becomes_this_processs():
    """A body pinned to /job:worker/task:1/device:CPU:0 (a distributed program's) named a device no local session
    has; such a pin is the local first CPU now, and other body devices are cleared."""
    from tensorflow.core.framework import graph_pb2

    from gplace.runtime.tf_runtime import with_devices

    graph_def = graph_pb2.GraphDef()
    graph_def.node.add(name="call", op="NoOp")
    function = graph_def.library.function.add()
    for name, device in (("a", "/job:worker/task:1/device:CPU:0"), ("b", "/device:GPU:1"), ("c", "/cpu:0")):
        function.node_def.add(name=name, op="NoOp", device=device)
    placed = with_devices(graph_def, {"call": "/device:CPU:1"})
    assert [n.device for n in placed.library.function[0].node_def] == ["/device:CPU:0", "", "/device:CPU:0"]
    assert placed.node[0].device == "/device:CPU:1"
