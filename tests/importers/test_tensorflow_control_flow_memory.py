"""TensorFlow import: a functional ``If``/``Case``/``While`` holds its functions' intermediates while it runs, as
``temporary_memory``. It held only its outputs: a Keras LSTM's ``While`` (batch 512, hidden 1024) was charged
nothing for a step's gate pre-activations, at least 25 MB."""

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402

pytestmark = pytest.mark.tf

TENSOR = 64 * 64 * 4


@tf.function(input_signature=[tf.TensorSpec((64, 64))], autograph=False)
def _branches(x):
    def dear():
        a = tf.exp(x)
        return tf.reduce_sum(a * a)  # a and a * a live at once

    return tf.cond(tf.reduce_sum(x) > 0, dear, lambda: tf.reduce_sum(x))


@tf.function(input_signature=[tf.TensorSpec((64, 64))], autograph=False)
def _loop(x):
    return tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.exp(v) + v), (tf.constant(0), x))[1]


def _control_flow_op(function):
    return next(op for op in from_tensorflow(function).ops() if op.type in ("If", "StatelessIf", "While",
                                                                             "StatelessWhile"))


def test_an_if_holds_its_dearer_branch_s_intermediates_while_it_runs():
    assert _control_flow_op(_branches).temporary_memory == 2 * TENSOR


def test_a_while_holds_one_pass_of_its_body_while_it_runs():
    """The body's exp(v) until the add reads it; the add's result is what the body returns."""
    assert _control_flow_op(_loop).temporary_memory == TENSOR
