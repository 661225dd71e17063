"""Write-back functions given a graph, cluster or placement of the wrong type, and dispatch given a device_map
that is no mapping of module paths (found by a type probe): refused in one line naming the argument, where they
failed with an AttributeError from inside ('list' object has no attribute 'validate', 'Cluster' object has no
attribute 'source', 'int' object has no attribute 'count')."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from write_back_cases import BAD_PLACEMENTS, one_line, onnx_case, tf_case, torch_case

from gplace.export import check_write_back, write_back
from gplace.export.torch import dispatch, module_device_map, pipeline_split, split_program
from gplace.testing import uniform_cluster

PLACEMENT = r"^placement must be a gplace Placement, got "
GRAPH = r"^graph must be a gplace OpGraph, got "


@pytest.fixture(scope="module")
def chain():
    return torch_case()


def _torch_calls(module, example):
    return {"split_program": lambda g, c, p: split_program(g, c, p),
            "module_device_map": lambda g, c, p: module_device_map(g, c, p),
            "pipeline_split": lambda g, c, p: pipeline_split(g, c, p, module, (example,))}


@pytest.mark.parametrize("call", ["split_program", "module_device_map", "pipeline_split"])
@pytest.mark.parametrize("bad", BAD_PLACEMENTS)
def test_torch_write_back_refuses_a_placement_that_is_no_placement(chain, call, bad):
    module, example, graph, placement = chain
    with pytest.raises(TypeError, match=PLACEMENT):
        _torch_calls(module, example)[call](graph, uniform_cluster(2, kind="cpu"), bad(placement))


@pytest.mark.parametrize("call", ["split_program", "module_device_map", "pipeline_split"])
def test_torch_write_back_refuses_graph_and_cluster_swapped_or_a_module(chain, call):
    module, example, graph, placement = chain
    with pytest.raises(TypeError, match=GRAPH + "Cluster"):
        _torch_calls(module, example)[call](uniform_cluster(2, kind="cpu"), graph, placement)
    with pytest.raises(TypeError, match=GRAPH + "Chain"):
        _torch_calls(module, example)[call](module, uniform_cluster(2, kind="cpu"), placement)


def test_write_back_and_check_write_back_refuse_graph_and_cluster_swapped(chain, tmp_path):
    _, _, graph, placement = chain
    with pytest.raises(TypeError, match=GRAPH + "Cluster"):
        write_back(uniform_cluster(2, kind="cpu"), graph, placement, tmp_path)
    with pytest.raises(TypeError, match=GRAPH + "Cluster"):
        check_write_back(uniform_cluster(2, kind="cpu"), graph)


@pytest.mark.parametrize("device_map", [None, [("0", "cpu")], "cpu"], ids=["None", "pairs", "str"])
def test_dispatch_refuses_a_device_map_that_is_no_mapping(device_map):
    with pytest.raises(ValueError, match=r"^device_map must map module paths to torch devices") as err:
        dispatch(nn.Sequential(nn.Linear(4, 4)), device_map)
    assert repr(device_map) in one_line(err)


def test_dispatch_reads_an_integer_key_as_the_index_of_a_sequential():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()
    x = torch.randn(2, 4)
    want = model(x)
    torch.testing.assert_close(dispatch(model, {0: "cpu"})(x), want)


@pytest.mark.parametrize("key", [1.5, None, True], ids=["float", "None", "bool"])
def test_dispatch_refuses_a_key_that_is_no_module_path(key):
    with pytest.raises(ValueError, match=rf"^device_map key {key!r} is not a module path") as err:
        dispatch(nn.Sequential(nn.Linear(4, 4)), {key: "cpu"})
    one_line(err)


# ---------------------------------------------------------------------- ONNX
@pytest.fixture(scope="module")
def onnx_chain():
    return onnx_case()


@pytest.mark.parametrize("call", ["annotate_onnx", "split_onnx"])
@pytest.mark.parametrize("bad", BAD_PLACEMENTS)
def test_onnx_write_back_refuses_a_placement_that_is_no_placement(onnx_chain, call, bad):
    from gplace.export import onnx as export_onnx

    g, placement, _ = onnx_chain
    with pytest.raises(TypeError, match=PLACEMENT):
        getattr(export_onnx, call)(g, uniform_cluster(2, kind="cpu"), bad(placement))


@pytest.mark.parametrize("call", ["annotate_onnx", "split_onnx"])
def test_onnx_write_back_refuses_graph_and_cluster_swapped_or_a_model(onnx_chain, call):
    from gplace.export import onnx as export_onnx

    g, placement, _ = onnx_chain
    with pytest.raises(TypeError, match=GRAPH + "Cluster"):
        getattr(export_onnx, call)(uniform_cluster(2, kind="cpu"), g, placement)
    with pytest.raises(TypeError, match=GRAPH + "ModelProto"):
        getattr(export_onnx, call)(g.source.model, uniform_cluster(2, kind="cpu"), placement)


# ---------------------------------------------------------------------- TensorFlow
@pytest.fixture(scope="module")
def tf_function():
    return tf_case()


@pytest.mark.tf
@pytest.mark.parametrize("bad", BAD_PLACEMENTS)
def test_tf_write_back_refuses_a_placement_that_is_no_placement(tf_function, bad, tmp_path):
    from gplace.export.tensorflow import place_graph_def, save_saved_model

    _, graph, cluster, placement = tf_function
    with pytest.raises(TypeError, match=PLACEMENT):
        place_graph_def(graph, cluster, bad(placement))
    with pytest.raises(TypeError, match=PLACEMENT):
        save_saved_model(graph, cluster, bad(placement), tmp_path / "sm")
    assert not (tmp_path / "sm").exists()


@pytest.mark.tf
def test_tf_write_back_refuses_graph_and_cluster_swapped(tf_function, tmp_path):
    from gplace.export.tensorflow import place_graph_def, save_saved_model

    _, graph, cluster, placement = tf_function
    with pytest.raises(TypeError, match=GRAPH + "Cluster"):
        place_graph_def(cluster, graph, placement)
    with pytest.raises(TypeError, match=GRAPH + "Cluster"):
        save_saved_model(cluster, graph, placement, tmp_path / "sm")
