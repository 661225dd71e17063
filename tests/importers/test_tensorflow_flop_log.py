"""TensorFlow importer: the cost model's DEBUG log of op types left at 0 FLOPs names none the importer counts by
its own TensorFlow rules (depthwise convolution, pooling, convolution and pooling gradients, batched MatMul)."""

from __future__ import annotations

import logging
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")

from gplace import costmodel  # noqa: E402
from gplace.importers.tensorflow import from_tensorflow  # noqa: E402

pytestmark = pytest.mark.tf

COUNTED = ("DepthwiseConv2dNative", "AvgPool", "Conv2DBackpropInput", "BatchMatMulV2", "MaxPoolGrad")


@tf.function(input_signature=[tf.TensorSpec((2, 8, 8, 4)), tf.TensorSpec((3, 3, 4, 1)), tf.TensorSpec((2, 8, 8))],
             autograph=False)
def _layers(x, w, m):
    pooled = tf.nn.avg_pool2d(tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME"), 2, 2, "VALID")
    up = tf.nn.conv2d_transpose(pooled, tf.ones((3, 3, 4, 4)), (2, 8, 8, 4), 2)
    grad = tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=tf.nn.max_pool2d(x, 2, 2, "VALID"), grad=pooled,
                                  ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    return up, grad, tf.matmul(m, m), tf.math.cumulative_logsumexp(m, axis=1)


def test_ops_costed_by_tensorflow_rules_are_not_logged_as_uncounted(caplog):
    costmodel._log_memory_only.cache_clear()  # logged once per process: an earlier test may have named it
    with caplog.at_level(logging.DEBUG, logger="gplace.costmodel"):
        graph = from_tensorflow(_layers)
    costed = {op.type for op in graph.ops()}
    assert set(COUNTED) <= costed
    logged = [r.getMessage() for r in caplog.records if r.name == "gplace.costmodel"]
    assert not [m for m in logged if any(f" {t} " in m for t in COUNTED)], logged
    assert any(" CumulativeLogsumexp " in m for m in logged)  # one the cost model has no rule for is still named
