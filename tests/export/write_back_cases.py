"""Small placed programs for the write-back argument tests: a torch chain, an ONNX chain, a TensorFlow function."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from gplace import Placement, from_torch
from gplace.ir import Cluster, Device
from gplace.testing import uniform_cluster

BAD_PLACEMENTS = [pytest.param(lambda p: p.devices.tolist(), id="list"),
                  pytest.param(lambda p: p.devices, id="ndarray"),
                  pytest.param(lambda p: dict(enumerate(p.devices.tolist())), id="dict")]
"""What a placement was mistaken for: its device indices as a list or array, or a dict of them."""


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


def named_cluster() -> Cluster:
    """Two CPUs with names that map to no device without a device_map."""
    return Cluster.build([Device("fast", "cpu"), Device("slow", "cpu")], default_bandwidth=1e9)


class Chain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return self.second(self.first(x).relu()).tanh()


def torch_case():
    """The module, an input, its graph and a placement with ``second`` on device 1."""
    torch.manual_seed(0)
    module, example = Chain().eval(), torch.randn(2, 8)
    graph = from_torch(module, (example,))
    paths = graph.source.module_paths
    placement = Placement.for_graph(graph, [1 if paths.get(op, "").startswith("second") else 0
                                            for op in graph.op_names])
    return module, example, graph, placement


def onnx_case():
    """A graph of x -> MatMul -> Relu -> MatMul -> "logits", a placement over two CPUs and an input."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    from gplace import from_onnx

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), f"W{i}") for i in range(2)]
    nodes = [helper.make_node("MatMul", ["x", "W0"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("MatMul", ["b", "W1"], ["logits"], name="second")]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 8])],
                              initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    g = from_onnx(model, {"x": [4, 8]})
    placement = Placement.for_graph(g, [0 if op in ("first", "relu") else 1 for op in g.op_names])
    return g, placement, rng.standard_normal((4, 8)).astype(np.float32)


def tf_case():
    """TensorFlow, the graph of a tf.function, two CPUs and an alternating placement."""
    tf = pytest.importorskip("tensorflow")
    from gplace import from_tensorflow

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def f(x):
        return tf.nn.relu(tf.matmul(x, tf.ones((4, 4))))

    graph = from_tensorflow(f, batch_size=2, name="f")
    return tf, graph, uniform_cluster(2, kind="cpu"), Placement.for_graph(graph, np.arange(graph.num_ops) % 2)
