"""A ``While``'s trip count is run only where small arithmetic on constants computes it: the importer ran any
stateless subgraph computing ``maximum_iterations`` in a Session, so a 3 KB GraphDef whose count came from a
``Fill`` of 30,000 x 30,000 floats took 4.6 s and 3.96 GB to import (a count from a ``StatelessWhile`` never
returned)."""

import pytest

tf = pytest.importorskip("tensorflow")

from gplace import from_tensorflow  # noqa: E402


def _loop(limit_of):
    @tf.function(input_signature=[tf.TensorSpec((4,))])
    def loop(x):
        return tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0), [0, x],
                             maximum_iterations=limit_of())[1]
    return from_tensorflow(loop)


def _while_cost(graph):
    (op,) = [op for op in graph.ops() if op.type.endswith("While")]
    return op.kind_cost["gpu"]


def test_a_count_from_a_large_fill_is_not_run_but_read_as_unknown(caplog):
    one = _while_cost(_loop(lambda: tf.constant(1)))
    with caplog.at_level("WARNING", logger="gplace.importers.tensorflow"):
        big = _while_cost(_loop(lambda: tf.cast(tf.reduce_sum(tf.fill([30000, 30000], 0.0)), tf.int32) + 7))
    assert big == pytest.approx(one) and "trip count unknown" in caplog.text


def test_a_count_from_small_constant_arithmetic_is_still_folded():
    one = _while_cost(_loop(lambda: tf.constant(1)))
    seven = _while_cost(_loop(lambda: tf.maximum(tf.constant(3) * 2 + 1, tf.constant(2))))
    assert seven == pytest.approx(7 * one)
