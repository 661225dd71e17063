"""TensorFlow importer: a Keras layer named ``gradient_tape`` (its variable nodes ``gradient_tape/kernel``, under
TensorFlow's gradient scope) leaves a training step's phases as another name does."""

from __future__ import annotations

import os
from collections import Counter

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402

pytestmark = pytest.mark.tf


def _train_step(layer: str):
    inp = keras.Input((4,), name="x")
    hidden = keras.layers.Dense(8, activation="relu", name=layer)(inp)
    model = keras.Model(inp, keras.layers.Dense(2, name="head")(hidden))
    return from_tensorflow(model, training=True, batch_size=2, loss="mse", optimizer="sgd")


def test_a_layer_named_gradient_tape_keeps_the_phases_of_another_name():
    named, other = _train_step("gradient_tape"), _train_step("dense1")
    ops = {op.name: op for op in named.ops()}
    assert ops["gradient_tape/kernel"].type == "VarHandleOp"  # the variable's node is under the gradient scope
    assert Counter(named.phase) == Counter(other.phase)
    forward = [op for op in ops.values() if op.type == "MatMul" and not op.name.startswith("gradient_tape/")]
    assert len(forward) == 2 and {op.phase for op in forward} == {"forward"}
    grads = [op for op in ops.values() if op.type == "MatMul" and op.name.startswith("gradient_tape/")]
    assert {op.phase for op in grads} == {"backward"}
    assert {op.grad_of for op in grads} == {op.name for op in forward}
    assert {ops[n].phase for n in ("gradient_tape/kernel", "gradient_tape/bias")} == {"forward"}
