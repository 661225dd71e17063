"""TensorFlow importer: a Keras grouped convolution's gradients (an inlined gradient function, not under
``gradient_tape/``) are ``backward`` ops differentiating the forward convolution, as an ungrouped one's."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gplace.importers.tensorflow import from_tensorflow  # noqa: E402

pytestmark = pytest.mark.tf


def _two_convs(groups: int):
    inp = keras.Input((8, 8, 4))
    y = keras.layers.Conv2D(8, 3, groups=groups)(inp)
    y = keras.layers.Flatten()(keras.layers.Conv2D(8, 3, groups=groups)(y))
    return from_tensorflow(keras.Model(inp, y), batch_size=2, training=True)


@pytest.mark.parametrize("groups", [1, 2])
def test_conv_gradients_are_backward_with_their_forward_conv(groups):
    graph = _two_convs(groups)
    ops = {op.name: op for op in graph.ops()}
    backprops = [op for op in ops.values() if op.type.startswith("Conv2DBackprop")]
    assert len(backprops) == 3  # both filters' gradients and the second layer's input's (the first's is pruned)
    assert {op.phase for op in backprops} == {"backward"}
    assert all(op.grad_of is not None and ops[op.grad_of].type == "Conv2D" for op in backprops)
    assert len({op.grad_of for op in backprops}) == 2
    assert {op.phase for op in ops.values() if op.type == "AssignSubVariableOp"} == {"update"}


def test_a_step_tensorflow_cannot_run_names_the_failing_op_of_an_inlined_call():
    """TensorFlow's CPU kernels lack a grouped convolution's filter gradient (Keras runs it compiled with XLA); the
    error names the op as TensorFlow renamed it (``gradients/...``, not ``PartitionedCall/gradients/...``), so the
    failure said "the step on an unknown device" instead of naming the op and its device."""
    import numpy as np

    from gplace import Placement
    from gplace.runtime import TensorFlowRuntime
    from gplace.testing import uniform_cluster

    inp = keras.Input((8, 8, 4))
    model = keras.Model(inp, keras.layers.Flatten()(keras.layers.Conv2D(8, 3, groups=2)(inp)))
    graph = from_tensorflow(model, batch_size=2, training=True)
    measurement = TensorFlowRuntime(steps=1, warmup=0).measure(graph, uniform_cluster(2, kind="cpu"),
                                                               Placement.for_graph(graph, np.zeros(graph.num_ops, int)))
    if measurement.ok:
        pytest.skip("this TensorFlow runs a grouped convolution's gradient on the CPU")
    assert "op 'PartitionedCall" in measurement.reason and "on /CPU:0" in measurement.reason, measurement.reason
