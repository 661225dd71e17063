"""TensorFlow import: op types that do arithmetic but counted 0 FLOPs (no cost-model name): comparisons
(GreaterEqual, LessEqual), SelectV2, FloorMod, Log1p, activation gradients (EluGrad, SeluGrad, LeakyReluGrad,
SoftsignGrad) and ResizeBilinear with its gradient. Each now counts as its ATen or ONNX namesake."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402
from tests.flops_device import add_flops_kind  # noqa: E402

pytestmark = pytest.mark.tf

PER_ELEMENT = {"GreaterEqual": 1, "LessEqual": 1, "SelectV2": 1, "FloorMod": 1, "Log1p": 4, "EluGrad": 5,
               "SeluGrad": 5, "LeakyReluGrad": 2, "SoftsignGrad": 5, "ResizeBilinear": 9, "ResizeBilinearGrad": 9}
"""FLOPs per element as Greater, where, mod, log, elu_backward, leaky_relu_backward, softsign's forward (3) + 2
(as a smooth activation's backward), bilinear interpolation (3 lerps of 3)."""


def _step():
    w = tf.Variable(tf.ones([4]))

    @tf.function(input_signature=[tf.TensorSpec([2, 8, 8, 4], tf.float32)], autograph=False)
    def step(x):  # 512 elements per op; the resize's output and its gradient's input 2,048
        with tf.GradientTape() as tape:
            h = x * w
            a = tf.where(h >= 0.5, h, 0.0) + tf.where(h <= 0.2, h, 1.0) + tf.math.floormod(h, 0.3)
            b = tf.nn.elu(h) + tf.nn.selu(h) + tf.nn.leaky_relu(h) + tf.nn.softsign(h)
            loss = tf.reduce_sum(a + b + tf.math.log1p(tf.abs(h)))
            loss += tf.reduce_sum(tf.image.resize(h, (16, 16), "bilinear"))
        return loss, tape.gradient(loss, w)

    return step


def test_elementwise_ops_and_gradients_count_their_arithmetic(monkeypatch):
    kind = add_flops_kind(monkeypatch)
    g = from_tensorflow(_step())
    counted: dict[str, list[float]] = {}
    for t, f in zip(g.op_types, g.kind_cost[kind], strict=True):
        if t in PER_ELEMENT:
            counted.setdefault(t, []).append(float(f))
    assert set(counted) == set(PER_ELEMENT)
    resize = {"ResizeBilinear", "ResizeBilinearGrad"}
    assert {t: set(f) for t, f in counted.items()} == {
        t: {n * (2048 if t in resize else 512)} for t, n in PER_ELEMENT.items()}
