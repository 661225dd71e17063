"""TensorFlow importer: a ``batch_size`` that sets no input, whose batch is fixed at another size, is refused."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.tf


def _dense(batch: int | None) -> keras.Model:
    return keras.Sequential([keras.Input((64,), batch_size=batch), keras.layers.Dense(10)])


def test_keras_fixed_batch_other_than_batch_size_is_refused():
    with pytest.raises(UnsupportedGraphError, match=r"input '.+' has a fixed batch .* of 5, but batch_size=3"):
        from_tensorflow(_dense(5), batch_size=3)


def test_function_fixed_batch_other_than_batch_size_is_refused():
    fn = tf.function(lambda x: x * 2.0, input_signature=[tf.TensorSpec((5, 4), name="x")])
    with pytest.raises(UnsupportedGraphError, match=r"input 'x' has a fixed batch .* of 5, but batch_size=3"):
        from_tensorflow(fn, batch_size=3)


def test_matching_or_unknown_batch_is_imported_at_batch_size():
    def matmul_shapes(graph) -> list[tuple[int, ...]]:
        return [op.output_shapes[0] for op in graph.ops() if op.type == "MatMul"]

    assert matmul_shapes(from_tensorflow(_dense(5), batch_size=5)) == [(5, 10)]
    assert matmul_shapes(from_tensorflow(_dense(None), batch_size=3)) == [(3, 10)]


def test_a_saved_cond_of_an_unknown_batch_says_to_import_the_function_itself(tmp_path):
    """A tf.cond saved at an unknown batch keeps that shape in its If op; the refusal said its size "depends on
    values known only at run time", where both branches are [2, 4] at batch_size=2."""

    class Module(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def __call__(self, x):
            return tf.cond(tf.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: x - 1.0)

    module = Module()
    tf.saved_model.save(module, str(tmp_path / "cond"), signatures=module.__call__)
    restored = tf.saved_model.load(str(tmp_path / "cond")).__call__  # traced again, its saved call's shapes kept
    for saved in (tmp_path / "cond", restored):
        with pytest.raises(UnsupportedGraphError, match=r"a (Stateless)?If keeps the shapes it was traced with") as err:
            from_tensorflow(saved, batch_size=2)
        assert "known only at run time" not in str(err.value)
    assert from_tensorflow(module.__call__, batch_size=2).num_ops > 0  # the function itself, as the message says


def test_a_loop_whose_size_depends_on_its_trip_count_keeps_the_run_time_message():
    """The function itself, traced at batch_size: a loop that grows its tensor has a size known only at run time,
    and the refusal must not advise importing the function itself, which the caller did."""

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def grow(x):
        return tf.while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, tf.concat([t, x], 0)), (0, x),
                             shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, 4])))[1]

    fixed = tf.function(grow.python_function, input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    for imported in (lambda: from_tensorflow(grow, batch_size=2), lambda: from_tensorflow(fixed),
                     lambda: from_tensorflow(fixed.get_concrete_function())):  # a fixed batch: no batch_size needed
        with pytest.raises(UnsupportedGraphError, match=r"size depends on values known only at run time") as err:
            imported()
        assert "keeps the shapes it was traced with" not in str(err.value)
