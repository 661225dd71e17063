"""TensorFlow importer: ragged and sparse inputs of a function or Keras model (refused, naming the input and the
dense inputs to give instead, since no argument can size them) and ragged or sparse outputs."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.tf


def _placeholder_bytes(graph) -> dict[str, int]:
    return {op.name: op.output_bytes for op in graph.ops() if op.type == "Placeholder"}


@pytest.mark.parametrize("batch_size", [None, 4])
def test_ragged_input_is_refused_naming_it(batch_size):
    """It asked for batch_size (which cannot size it); given one, its 4-row input imported with its values
    sized as 4 elements (16 bytes), whatever their count."""

    @tf.function(input_signature=[tf.RaggedTensorSpec([4, None], tf.float32)])
    def values_twice(x):
        return x.values * 2.0

    with pytest.raises(UnsupportedGraphError) as err:
        from_tensorflow(values_twice, batch_size=batch_size)
    message = str(err.value)
    assert "input 'x' is a ragged tensor (tf.RaggedTensorSpec, shape [4, None], float32)" in message
    assert "give batch_size" not in message
    assert "tf.TensorSpec([4, L], tf.float32)" in message  # the padded tensor
    assert "tf.TensorSpec([N], tf.float32) and tf.TensorSpec([B + 1], tf.int64)" in message  # its components


@pytest.mark.parametrize("batch_size", [None, 4])
def test_sparse_input_is_refused_and_its_advice_imports(batch_size):
    """It asked for batch_size; given one, nnz was taken for the batch size (indices [4, 2]) and the import failed
    further on (SparseReduceSum's output of unknown rank). The dense inputs its message names import, sized."""

    @tf.function(input_signature=[tf.SparseTensorSpec([None, 8], tf.float32)])
    def row_sums(x):
        return tf.sparse.reduce_sum(x, axis=1)

    with pytest.raises(UnsupportedGraphError) as err:
        from_tensorflow(row_sums, batch_size=batch_size)
    message = str(err.value)
    assert "input 'x' is a sparse tensor (tf.SparseTensorSpec, shape [None, 8], float32)" in message
    assert "give batch_size" not in message
    assert "tf.TensorSpec([NNZ, 2], tf.int64) and tf.TensorSpec([NNZ], tf.float32)" in message

    @tf.function(input_signature=[tf.TensorSpec([10, 2], tf.int64), tf.TensorSpec([10], tf.float32)])
    def advised(indices, values):
        return tf.sparse.reduce_sum(tf.SparseTensor(indices, values, dense_shape=[4, 8]), axis=1)

    assert _placeholder_bytes(from_tensorflow(advised)) == {"indices": 10 * 2 * 8, "values": 10 * 4}


def test_ragged_leaf_of_a_dict_is_named_by_its_path():
    """A dict with a ragged value failed inside TensorFlow (batch_size fixed the ragged values to 4 elements:
    'Dimensions must be equal, but are 4 and 3'); a dict of dense specs imports at batch_size."""

    @tf.function(input_signature=[{"a": tf.TensorSpec([None, 3]), "b": tf.RaggedTensorSpec([None, None], tf.float32)}])
    def mixed(d):
        return d["a"] + tf.reduce_sum(d["b"], axis=1, keepdims=True)

    with pytest.raises(UnsupportedGraphError, match=r"input \"d\['b'\]\" is a ragged tensor"):
        from_tensorflow(mixed, batch_size=4)

    @tf.function(input_signature=[{"a": tf.TensorSpec([None, 3]), "b": (tf.TensorSpec([None, 3]),)}])
    def dense(d):
        return d["a"] * d["b"][0]

    assert _placeholder_bytes(from_tensorflow(dense, batch_size=4)) == {"d": 48, "d_1": 48}


def test_concrete_function_with_a_sparse_keyword_input_is_refused():
    @tf.function
    def scaled(a, *, b):
        return a * tf.sparse.reduce_sum(b)

    concrete = scaled.get_concrete_function(tf.TensorSpec([3]), b=tf.SparseTensorSpec([2, 5], tf.float32))
    with pytest.raises(UnsupportedGraphError, match=r"concrete function 'scaled.*': input 'b' is a sparse tensor"):
        from_tensorflow(concrete)


@pytest.mark.parametrize("kind", ["sparse", "ragged"])
def test_keras_sparse_or_ragged_input_is_refused_and_its_advice_imports(kind):
    """Given batch_size, a sparse (or ragged) keras.Input was traced as a dense [4, 8] tensor (128 bytes) without a
    word: another program (a MatMul, not a sparse one)."""
    keras = pytest.importorskip("keras")
    inp = keras.Input((8,), name="feat", **{kind: True})
    model = keras.Model(inp, keras.layers.Dense(2)(inp))
    with pytest.raises(UnsupportedGraphError) as err:
        from_tensorflow(model, batch_size=4)
    message = str(err.value)
    assert f"input 'feat' is {kind} (keras.Input({kind}=True))" in message
    assert "x = keras.Input((8,), dtype='float32'); from_tensorflow(keras.Model(x, model(x)), batch_size=B)" in message
    x = keras.Input((8,), dtype="float32")
    assert list(_placeholder_bytes(from_tensorflow(keras.Model(x, model(x)), batch_size=4)).values()) == [128]


def test_composite_outputs():
    """A ragged output of fixed-size components is fetched as its components; one whose size depends on values
    (tf.sparse.from_dense's Where) is refused with a hint a function can follow (it said 'give outputs=', which
    from_tensorflow refuses for a function)."""

    @tf.function(input_signature=[tf.TensorSpec([10], tf.float32), tf.TensorSpec([5], tf.int64)])
    def ragged_out(values, splits):
        return tf.RaggedTensor.from_row_splits(values * 2.0, splits, validate=False)

    graph = from_tensorflow(ragged_out)
    assert graph.source.outputs == ("Identity:0", "Identity_1:0")
    assert {op.name: op.output_shapes for op in graph.ops() if op.name.startswith("Identity")} == {
        "Identity": ((10,),), "Identity_1": ((5,),)}

    @tf.function(input_signature=[tf.TensorSpec([4, 3])])
    def sparse_out(x):
        return tf.sparse.from_dense(x)

    with pytest.raises(UnsupportedGraphError, match="a function or Keras model: leave it out of what it returns"):
        from_tensorflow(sparse_out)
