"""TensorFlowRuntime.run: a feed name that is no tensor or node of the graph is the caller's mistake, a ValueError
naming it and the source's inputs (as TorchRuntime.run raises for an unknown input name), not a
TensorFlowRunError (a failed step)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import Cluster, Device, Placement  # noqa: E402
from gplace.runtime.tf_runtime import TensorFlowRunError, TensorFlowRuntime  # noqa: E402

pytestmark = pytest.mark.tf


@pytest.fixture(scope="module")
def graph():
    w = tf.Variable(tf.ones((4, 4)))

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def f(x):
        return tf.matmul(x, w)

    return from_tensorflow(f, batch_size=2)


@pytest.mark.parametrize("name", ["nope", "nope:0", "x:7"])
def test_an_unknown_feed_name_is_a_value_error_naming_it_and_the_inputs(graph, name):
    cluster = Cluster.build([Device("/CPU:0", "cpu")])
    with pytest.raises(ValueError, match=rf"'{name}'.*'x:0'") as caught:
        TensorFlowRuntime().run(graph, cluster, Placement.single(graph, 0),
                                feeds={name: np.ones((2, 4), np.float32)})
    assert not isinstance(caught.value, TensorFlowRunError)


def test_known_feed_names_still_run(graph):
    cluster = Cluster.build([Device("/CPU:0", "cpu")])
    (got,) = TensorFlowRuntime().run(graph, cluster, Placement.single(graph, 0),
                                     feeds={"x": np.ones((2, 4), np.float32)})
    np.testing.assert_allclose(got, np.full((2, 4), 4.0, np.float32))


@pytest.mark.parametrize("feeds", [[np.ones((2, 4), np.float32), 1], "x:0"])
def test_feeds_that_are_no_mapping_are_named_as_such(graph, feeds):
    """feeds=[x, 1] said "feeds: array([[1., 1., ...", reporting an array as a tensor name."""
    cluster = Cluster.build([Device("/CPU:0", "cpu")])
    with pytest.raises(ValueError, match=rf"^feeds must be a mapping of tensor name to value \(its inputs: 'x:0'\), "
                                         rf"got a {type(feeds).__name__}$"):
        TensorFlowRuntime().run(graph, cluster, Placement.single(graph, 0), feeds=feeds)
