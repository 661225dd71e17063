"""tf-v1 counts bytes_moved as the importer sizes tensors (and sim-v1 counts them): a string element 8 bytes, a
TensorList its capacity; both counted 0 before."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import Placement  # noqa: E402
from gplace.runtime import Simulator  # noqa: E402
from gplace.runtime.tf_runtime import TensorFlowRuntime  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402

pytestmark = pytest.mark.tf


@tf.function(input_signature=[tf.TensorSpec([1000], tf.string)])
def _strings(x):
    return tf.strings.length(tf.strings.join([x, x]))


@tf.function(input_signature=[tf.TensorSpec([10, 4, 8], tf.float32)])
def _lists(x):
    ta = tf.TensorArray(tf.float32, size=10, element_shape=[4, 8])
    for i in tf.range(10):
        ta = ta.write(i, x[i] * 2.0)
    return ta.stack()


@pytest.mark.parametrize("function, second, expected", [
    (_strings, ("StringLength", "Identity"), 1000 * 8),
    (_lists, ("TensorArrayV2Stack/TensorListStack", "Identity"), 10 * 4 * 8 * 4 + 8),  # the list, element_shape
])
def test_tf_v1_counts_strings_and_lists_as_the_importer_and_sim_v1(function, second, expected):
    graph = from_tensorflow(function)
    cluster = uniform_cluster(2, kind="cpu", bandwidth=1e9)
    placement = Placement.from_names(graph, cluster, {n: "/CPU:1" if n in second else "/CPU:0"
                                                      for n in graph.op_names})
    assert Simulator().measure(graph, cluster, placement).bytes_moved == expected
    measured = TensorFlowRuntime(steps=1, warmup=0).measure(graph, cluster, placement)
    assert measured.ok, measured.reason
    assert measured.bytes_moved == expected
