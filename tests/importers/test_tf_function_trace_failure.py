"""A tf.function with an input_signature that fails in its own code is said to have failed while tracing, with
its own error, not told to 'give it an input_signature'."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from gplace.ir import UnsupportedGraphError  # noqa: E402

pytestmark = pytest.mark.tf


@tf.function(input_signature=[tf.TensorSpec([4, 8], tf.float32)])
def _bad_reshape(x):
    return tf.reshape(x, [3, 7])


@tf.function
def _unsigned(x):
    return x * 2.0


def test_a_signed_function_failing_in_its_code_says_so():
    with pytest.raises(UnsupportedGraphError) as caught:
        from_tensorflow(_bad_reshape)
    message = str(caught.value)
    assert "'_bad_reshape' failed while tracing at its input_signature" in message
    assert "reshape" in message.lower() and "21" in message  # TensorFlow's own error: 32 values into [3, 7]
    assert "give it an input_signature" not in message


def test_a_function_without_a_signature_is_still_told_to_give_one():
    with pytest.raises(UnsupportedGraphError, match="give it an input_signature if it takes inputs"):
        from_tensorflow(_unsigned)
