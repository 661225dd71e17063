"""Nodes inside an ``If``'s or ``Loop``'s subgraphs, and inside the model's local functions, lose the device labels
an earlier tool (or an earlier placing) wrote on them: the annotated model and its parts name only gplace's one
configuration, and the node that holds them is placed as a unit."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402
from onnx_control_flow import if_loop_model  # noqa: E402

from gplace import Placement, from_onnx  # noqa: E402
from gplace.export.onnx import DEVICE_KEY, STAGE_KEY, annotate_onnx, split_onnx  # noqa: E402
from gplace.importers.onnx.tensors import subgraphs  # noqa: E402
from gplace.testing import uniform_cluster  # noqa: E402


def _inner_nodes(model):
    """Every node of a subgraph of ``model``'s nodes (one level deep: the models here nest no deeper) or of a local
    function."""
    return [inner for node in model.graph.node for graph in subgraphs(node) for inner in graph.node] + \
        [node for function in model.functions for node in function.node]


def _labelled_by_another_tool():
    model = if_loop_model()
    model.configuration.add(name="other", num_devices=9, device=[f"/OLD:{i}" for i in range(9)])
    inner = list(_inner_nodes(model))
    assert inner
    for node in inner:
        node.device_configurations.add(configuration_id="other", pipeline_stage=3)
        node.metadata_props.add(key=DEVICE_KEY, value="/OLD:9")
        node.metadata_props.add(key=STAGE_KEY, value="3")
        node.metadata_props.add(key="kept", value="yes")
    return model


def test_inner_nodes_keep_no_other_configuration_or_gplace_labels():
    graph = from_onnx(_labelled_by_another_tool())
    cluster = uniform_cluster(2, kind="cpu")
    placement = Placement.for_graph(graph, np.arange(graph.num_ops) % 2)
    models = [annotate_onnx(graph, cluster, placement)]
    models += [part.model for part in split_onnx(graph, cluster, placement)]
    for model in models:
        assert [c.name for c in model.configuration] == [cluster.name]
        for node in _inner_nodes(model):
            assert not node.device_configurations, node.name
            assert {p.key: p.value for p in node.metadata_props} == {"kept": "yes"}, node.name
        onnx.checker.check_model(model)


def test_a_local_functions_nodes_lose_their_labels():
    body = helper.make_node("Relu", ["a"], ["b"], name="inner_relu")
    body.device_configurations.add(configuration_id="other")
    body.metadata_props.add(key=DEVICE_KEY, value="/OLD:1")
    function = helper.make_function("local", "twice", ["a"], ["b"], [body], [helper.make_opsetid("", 17)])
    graph = helper.make_graph([helper.make_node("twice", ["x"], ["y"], domain="local", name="call")], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, functions=[function], ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    imported = from_onnx(model)
    annotated = annotate_onnx(imported, uniform_cluster(2, kind="cpu"), Placement.single(imported, 1))
    [inner] = annotated.functions[0].node
    assert not inner.device_configurations
    assert not list(inner.metadata_props)
