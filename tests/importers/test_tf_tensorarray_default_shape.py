"""A TensorArray of the default (unknown) element_shape written in a tf.range loop: its list, read by the stack,
holds what the stack returns (it counted 0 bytes); one whose size nothing tells counts 0 with a warning naming
the loop output."""

from __future__ import annotations

import logging
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402

pytestmark = pytest.mark.tf


def _stacked(element_shape):
    @tf.function(input_signature=[tf.TensorSpec([10, 4, 8], tf.float32)])
    def f(x):
        ta = tf.TensorArray(tf.float32, size=10, element_shape=element_shape)
        for i in tf.range(10):
            ta = ta.write(i, tf.nn.relu(x[i]) * 2.0)
        return ta.stack()

    return f


@tf.function(input_signature=[tf.TensorSpec([10, 4, 8], tf.float32)])
def _read_one(x):
    ta = tf.TensorArray(tf.float32, size=10)
    for i in tf.range(10):
        ta = ta.write(i, x[i] * 2.0)
    return ta.read(3)


def _list_edge(graph) -> int:
    stack = next(op.name for op in graph.ops() if op.type == "TensorListStack")
    return {(e.src, e.dst): e.bytes for e in graph.edges()}[("while", stack)]


@pytest.mark.parametrize("element_shape", [None, [4, 8]])
def test_a_stacked_list_counts_its_elements_whatever_its_element_shape(element_shape, caplog):
    with caplog.at_level(logging.WARNING, logger="gplace"):
        graph = from_tensorflow(_stacked(element_shape))
    assert _list_edge(graph) == 10 * 4 * 8 * 4
    assert "TensorList of unknown size" not in caplog.text


def test_a_loop_list_of_unknown_size_warns_naming_it(caplog):
    with caplog.at_level(logging.WARNING, logger="gplace"):
        graph = from_tensorflow(_read_one)
    assert graph.num_ops
    assert "loop output(s) holding a TensorList of unknown size" in caplog.text
    assert "while:" in caplog.text
